"""The sandbox settings: defaults of SPEC B §6.3, validation, merging and when they apply."""

from __future__ import annotations

import pytest

from apps.toolkit import runtime_settings as runtime_config
from apps.toolkit.sandbox_config import SandboxConfig, validate


@pytest.fixture(autouse=True)
def images(settings):
    settings.TOOLGATE_SANDBOX_IMAGE = "toolgate-sandbox:bookworm-slim"
    settings.TOOLGATE_SANDBOX_IMAGES = ["toolgate-sandbox:bookworm-slim", "toolgate-sandbox:busybox"]


def test_defaults_are_upstreams():
    config = SandboxConfig.of({})
    assert config.as_dict() == {
        "mode": "jail",
        "scope": "session",
        "workspace_access": "rw",
        "image": "toolgate-sandbox:bookworm-slim",
        "memory_mb": 512,
        "cpus": 1.0,
        "pids_limit": 256,
        "timeout_seconds": 300,
        "network": False,
        "read_only_root": True,
        "tmpfs_size_mb": 64,
        "cpu_seconds": 300,
        "address_space_mb": 4096,
        "file_size_mb": 1024,
        "open_files": 1024,
    }


@pytest.mark.parametrize(
    ("mode", "agent", "applies"),
    [
        ("off", "bot", False),
        ("all", "main", True),
        ("non-main", "bot", True),
        ("non-main", "main", False),
        ("non-main", "default", False),
    ],
)
def test_which_agents_run_sandboxed(mode, agent, applies):
    assert SandboxConfig.of({"mode": mode}).applies_to(agent) is applies


def test_an_unreadable_stored_mode_confines_everything_in_the_jail():
    config = SandboxConfig.of({"mode": "sometimes"})
    assert (config.kind_for("main"), config.kind_for("bot")) == ("jail", "jail")


@pytest.mark.parametrize(
    ("mode", "allowed", "agent", "kind"),
    [
        ("jail", False, "bot", "jail"),
        ("docker", False, "main", "docker"),
        ("host", True, "bot", "host"),
        ("host", False, "bot", "jail"),  # stored while allowed, read after the operator withdrew it
        ("off", True, "bot", "jail"),
        ("all", False, "main", "docker"),
        ("non-main", False, "bot", "docker"),
        ("non-main", False, "main", "jail"),
    ],
)
def test_where_processes_run(settings, mode, allowed, agent, kind):
    settings.TOOLGATE_ALLOW_HOST_EXEC = allowed
    assert SandboxConfig.of({"mode": mode}).kind_for(agent) == kind


def test_host_mode_is_refused_unless_the_operator_allows_it(settings):
    settings.TOOLGATE_ALLOW_HOST_EXEC = False
    assert any("TOOLGATE_ALLOW_HOST_EXEC=1" in e for e in validate({"mode": "host"}))
    settings.TOOLGATE_ALLOW_HOST_EXEC = True
    assert validate({"mode": "host"}) == []


def test_unreadable_stored_values_take_the_defaults():
    config = SandboxConfig.of({"memory_mb": "lots", "cpus": True, "network": "yes", "image": "evil:latest"})
    assert (config.memory_mb, config.cpus, config.network) == (512, 1.0, False)
    assert config.image == "toolgate-sandbox:bookworm-slim"


def test_the_agent_overrides_the_tenant_key_by_key():
    effective = runtime_config.effective(
        {"sandbox": {"mode": "all", "memory_mb": 1024, "scope": "agent"}}, {"sandbox": {"scope": "session"}}
    )
    assert effective["sandbox"] == {"mode": "all", "memory_mb": 1024, "scope": "session"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "Must be an object"),
        ({"mode": "sometimes"}, '"mode" must be one of jail, docker, host.'),
        ({"cpu_seconds": 0}, '"cpu_seconds" must be a whole number from 1 to 86400.'),
        ({"open_files": 8}, '"open_files" must be a whole number from 16 to 65536.'),
        ({"scope": "global"}, '"scope" must be one of session, agent, shared.'),
        ({"workspace_access": "write"}, '"workspace_access" must be one of rw, ro, none.'),
        ({"memory_mb": 8}, '"memory_mb" must be a whole number from 16 to 16384.'),
        ({"memory_mb": 512.5}, '"memory_mb" must be a whole number'),
        ({"cpus": 0}, '"cpus" must be a number from 0.1 to 16.'),
        ({"pids_limit": True}, '"pids_limit" must be a whole number'),
        ({"timeout_seconds": 3601}, '"timeout_seconds" must be a whole number from 1 to 3600.'),
        ({"network": "no"}, '"network" must be true or false.'),
        ({"image": "alpine:latest"}, '"image" must be one of the images this server allows'),
        ({"privileged": True}, "Unknown keys: privileged."),
    ],
)
def test_invalid_values_are_refused_with_what_to_do(value, message):
    errors = validate(value)
    assert any(message in error for error in errors), errors
    assert runtime_config.validate({"sandbox": value})["sandbox"] == errors


def test_valid_values_pass():
    assert validate({"mode": "all", "cpus": 2, "image": "toolgate-sandbox:busybox", "network": True}) == []


def test_the_fingerprint_follows_what_the_container_is_made_of():
    base = SandboxConfig.of({"mode": "all"})
    assert base.fingerprint() == SandboxConfig.of({"mode": "non-main", "timeout_seconds": 30}).fingerprint()
    assert base.fingerprint() != SandboxConfig.of({"mode": "all", "memory_mb": 256}).fingerprint()
    assert base.fingerprint() != SandboxConfig.of({"mode": "all", "workspace_access": "ro"}).fingerprint()
