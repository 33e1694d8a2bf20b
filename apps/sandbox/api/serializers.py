"""Output shapes of the sandbox API (and the one filter input of its container list)."""

from __future__ import annotations

from rest_framework import serializers

from apps.tenants.api.base import StrictSerializer


class EngineOutput(serializers.Serializer):  # type: ignore[type-arg]
    available = serializers.BooleanField(help_text="whether the Docker engine answers")
    version = serializers.CharField(required=False, help_text="the engine's version (when it answers)")
    reason = serializers.CharField(required=False, help_text="why it does not answer")
    images = serializers.ListField(
        child=serializers.CharField(), help_text="the allowed images the engine has"
    )


class JailOutput(serializers.Serializer):  # type: ignore[type-arg]
    available = serializers.BooleanField(help_text="whether this server can make the jail (bubblewrap)")
    reason = serializers.CharField(help_text="why it cannot (empty when it can)")
    bwrap = serializers.CharField(help_text="the bubblewrap program used")
    version = serializers.CharField()
    pids_limit = serializers.CharField(
        help_text="how the process limit is enforced: rlimit, cgroup or not enforced"
    )
    syscall_filter = serializers.CharField(
        help_text="the system calls the jail refuses (the kernel keyring's, io_uring's); empty when it "
        "cannot be made"
    )


class ConfigOutput(serializers.Serializer):  # type: ignore[type-arg]
    mode = serializers.ChoiceField(
        choices=["jail", "docker", "host", "off", "non-main", "all"],
        help_text="jail (the default), docker or host; off, non-main and all are settings saved before the "
        "jail (read as jail, docker except for main/default agents, docker)",
    )
    scope = serializers.CharField(help_text="session, agent or shared: what one container serves")
    workspace_access = serializers.ChoiceField(choices=["rw", "ro", "none"])
    image = serializers.CharField()
    memory_mb = serializers.IntegerField()
    cpus = serializers.FloatField()
    pids_limit = serializers.IntegerField()
    timeout_seconds = serializers.IntegerField()
    network = serializers.BooleanField()
    read_only_root = serializers.BooleanField()
    tmpfs_size_mb = serializers.IntegerField()
    cpu_seconds = serializers.IntegerField()
    address_space_mb = serializers.IntegerField()
    file_size_mb = serializers.IntegerField()
    open_files = serializers.IntegerField()


class SandboxOutput(serializers.Serializer):  # type: ignore[type-arg]
    jail = JailOutput()
    host_allowed = serializers.BooleanField(help_text="whether this installation allows mode host")
    engine = EngineOutput()
    config = ConfigOutput(help_text="the tenant's sandbox settings in effect (an agent may override keys)")
    allowed_images = serializers.ListField(child=serializers.CharField())


class UsageOutput(serializers.Serializer):  # type: ignore[type-arg]
    state = serializers.CharField(
        help_text="running, another engine state (exited …), gone (no longer on the engine) or unknown "
        "(the engine does not answer); the numbers are there only while it runs"
    )
    memory_bytes = serializers.IntegerField(required=False, allow_null=True)
    memory_limit_bytes = serializers.IntegerField(required=False, allow_null=True)
    pids = serializers.IntegerField(required=False, allow_null=True)
    cpu_seconds = serializers.FloatField(required=False, allow_null=True)


class ContainerOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    name = serializers.CharField(help_text="the Docker container's name")
    scope = serializers.CharField(help_text="session, agent or shared")
    agent = serializers.CharField(allow_null=True, help_text="the agent's key; null for a shared container")
    session_key = serializers.CharField(help_text="the session it serves (session scope)")
    image = serializers.CharField()
    workspace_access = serializers.CharField()
    limits = serializers.JSONField(help_text="memory_mb, cpus, pids_limit, network, read_only_root …")
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField()
    exec_count = serializers.IntegerField()
    usage = UsageOutput(required=False, help_text="left out with ?usage=false")


class ContainerFilterInput(StrictSerializer):
    usage = serializers.BooleanField(
        required=False, default=True, help_text="false: skip asking the engine for each container's use"
    )
    page = serializers.IntegerField(required=False, min_value=1)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)
