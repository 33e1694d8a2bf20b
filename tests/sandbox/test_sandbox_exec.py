"""exec in the sandbox, through POST /api/v1/runtime/execute, against a real Docker engine.

Each test configures its tenant's sandbox through the tenant API (PATCH /api/v1/tenant/) and checks
what the command saw and did from the tool's answers and from the engine."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from apps.accounts import services
from apps.policy import services as policy_services
from apps.sandbox import manager
from apps.sandbox.models import SandboxContainer
from apps.tenants.actors import Actor
from apps.toolkit.workspace import workspace_for
from tests.sandbox.conftest import configure, containers_of

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sandbox_settings")]


def allow_data_exfiltration(tenant) -> None:
    target = policy_services.target("tenant")
    saved = policy_services.current(tenant, target)
    document = dict(saved.document) if saved is not None else {}
    document["shellDenyGroups"] = {"data_exfiltration": False}
    policy_services.policy_save(Actor.system(tenant), target, document)


def run(client, command, *, agent="bot", session="s-1", **args):
    body = {
        "agent": agent,
        "tool": "exec",
        "args": {"command": command, **args},
        "context": {"session_key": session},
    }
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_command_runs_in_the_container_with_the_workspace(owner_a, member_a, agent, tenant_a, engine):
    configure(owner_a, mode="all")
    workspace = workspace_for(tenant=tenant_a, agent=agent, user_id="")
    (workspace / "hello.txt").write_text("from the host\n")

    body = run(member_a, "pwd; cat hello.txt; hostname; echo made > inside.txt")

    assert body["is_error"] is False, body
    lines = body["for_llm"].splitlines()
    assert lines[:3] == ["/workspace", "from the host", "sandbox"]
    assert (workspace / "inside.txt").read_text() == "made\n"
    assert (workspace / "inside.txt").stat().st_uid == __import__("os").getuid()
    [container] = containers_of(engine, scope="session")
    assert container.labels["toolgate.tenant"] == str(tenant_a.pk)
    assert container.labels["toolgate.agent"] == str(agent.pk)
    host = container.attrs["HostConfig"]
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["NetworkMode"] == "none"
    assert host["Memory"] == 512 * 1024 * 1024
    assert host["MemorySwap"] == 512 * 1024 * 1024
    assert host["PidsLimit"] == 256
    assert host["NanoCpus"] == 1_000_000_000
    assert set(host["Tmpfs"]) == {"/tmp", "/var/tmp", "/run"}
    assert all("noexec" in options and "size=64m" in options for options in host["Tmpfs"].values())
    [mount] = container.attrs["Mounts"]
    assert (mount["Source"], mount["Destination"], mount["RW"]) == (str(workspace), "/workspace", True)


def test_the_root_is_read_only_and_tmp_is_noexec(owner_a, member_a, agent):
    configure(owner_a, mode="all")
    body = run(member_a, "mkdir /newdir; echo rc=$?; cp /bin/busybox /tmp/bb && /tmp/bb true; echo rc=$?")
    assert "Read-only file system" in body["for_llm"]
    assert "rc=1" in body["for_llm"]
    assert "Permission denied" in body["for_llm"]
    assert "rc=126" in body["for_llm"]


def test_the_container_is_reused_within_its_session(owner_a, member_a, agent, tenant_a, engine):
    configure(owner_a, mode="all")
    first = run(member_a, "echo one > /tmp/state; echo $$")
    second = run(member_a, "cat /tmp/state")
    other_session = run(member_a, "cat /tmp/state", session="s-2")

    assert second["is_error"] is False
    assert second["for_llm"].startswith("one")
    assert other_session["is_error"] is True
    assert "No such file" in other_session["for_llm"]
    assert first["is_error"] is False
    assert len(containers_of(engine, scope="session")) == 2
    rows = SandboxContainer.objects.for_tenant(tenant_a)
    assert sorted(rows.values_list("session_key", flat=True)) == ["s-1", "s-2"]
    assert rows.get(session_key="s-1").exec_count == 2


def test_agent_scope_shares_one_container_across_sessions(owner_a, member_a, agent, engine):
    configure(owner_a, mode="all", scope="agent")
    run(member_a, "echo kept > /tmp/state", session="s-1")
    body = run(member_a, "cat /tmp/state", session="s-2")
    assert body["for_llm"].startswith("kept")
    assert len(containers_of(engine, scope="agent")) == 1


def test_another_tenants_workspace_is_not_visible(owner_a, member_a, outsider, agent, tenant_a, tenant_b):
    configure(owner_a, mode="all", scope="shared")
    other = services.agent_create(actor=Actor.system(tenant_b), key="bot", name="Bot")
    other_workspace = workspace_for(tenant=tenant_b, agent=other, user_id="")
    (other_workspace / "secret.txt").write_text("tenant b only\n")

    body = run(
        member_a,
        "ls -a /workspace; find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f -print "
        "| xargs grep -l 'tenant b only' 2>/dev/null; find / -name secret.txt 2>/dev/null; true",
        timeout=60,
    )

    assert "secret.txt" not in body["for_llm"]
    assert "tenant b only" not in body["for_llm"]
    assert str(tenant_b.pk) not in body["for_llm"]
    # The shared scope mounts this tenant's tree: its own agent's workspace is there.
    assert "agents" in body["for_llm"]


def test_a_timeout_kills_the_command_and_its_children(owner_a, member_a, agent, tenant_a, engine):
    configure(owner_a, mode="all")
    started = time.monotonic()
    body = run(member_a, "sleep 300 & sleep 301; echo never", timeout=2)
    elapsed = time.monotonic() - started

    assert body["is_error"] is True
    assert "timed out after 2s" in body["for_llm"]
    assert "never" not in body["for_llm"]
    assert elapsed < 10
    [container] = containers_of(engine, scope="session")
    listing = container.exec_run(["ps", "-o", "args"]).output.decode()
    assert "sleep 30" not in listing


def test_background_leftovers_die_with_the_call(owner_a, member_a, agent, engine):
    configure(owner_a, mode="all")
    body = run(member_a, "sleep 1000 >/dev/null 2>&1 & echo started")
    assert body["for_llm"].startswith("started")
    [container] = containers_of(engine, scope="session")
    assert "sleep 1000" not in container.exec_run(["ps", "-o", "args"]).output.decode()


def test_output_is_capped_at_one_mebibyte(owner_a, member_a, agent):
    configure(owner_a, mode="all")
    body = run(member_a, "yes 0123456789abcdef | head -c 3000000")
    assert "[output truncated at 1MB]" in body["for_llm"]
    assert body["for_llm"].count("0123456789abcdef") <= (1024 * 1024) // 17 + 1


def test_a_fork_bomb_is_contained_by_the_pid_limit(owner_a, member_a, agent, engine):
    configure(owner_a, mode="all", pids_limit=64)
    # Written as a script, the bomb is out of the static safeguard's sight: the pid limit holds it.
    run(member_a, "printf 'while true; do sh bomb.sh & done\\n' > bomb.sh")
    body = run(member_a, "sh bomb.sh", timeout=3)

    assert body["is_error"] is True
    assert "can't fork" in body["for_llm"] or "timed out after 3s" in body["for_llm"]
    [container] = containers_of(engine, scope="session")
    stats = container.stats(stream=False)
    assert stats["pids_stats"]["current"] <= 64
    after = run(member_a, "echo alive")
    assert after["for_llm"].startswith("alive")


def test_memory_over_the_limit_is_killed(owner_a, member_a, agent):
    configure(owner_a, mode="all", memory_mb=32)
    body = run(member_a, "head -c 200000000 /dev/zero | tail > /dev/null; echo status=$?")
    assert "status=137" in body["for_llm"]
    after = run(member_a, "echo alive")
    assert after["for_llm"].startswith("alive")


class _Hits(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"reached")

    def log_message(self, *args) -> None:
        pass


def test_there_is_no_network(owner_a, member_a, agent, tenant_a):
    configure(owner_a, mode="all")
    # The shell's own deny group would refuse these commands first; lifted, the sandbox stops them.
    allow_data_exfiltration(tenant_a)
    server = ThreadingHTTPServer(("0.0.0.0", 0), _Hits)  # noqa: S104 - every address, the bridge's included
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    bridge = socket.gethostbyname(socket.gethostname())
    try:
        body = run(
            member_a,
            f"ip addr 2>&1 | grep -c inet; "
            f"wget -q -T 2 -O - http://172.17.0.1:{port}/ 2>&1; echo gw=$?; "
            f"wget -q -T 2 -O - http://{bridge}:{port}/ 2>&1; echo lan=$?; "
            f"wget -q -T 2 -O - http://127.0.0.1:{port}/ 2>&1; echo loop=$?; "
            "wget -q -T 2 -O - http://1.1.1.1/ 2>&1; echo out=$?",
        )
    finally:
        server.shutdown()
    text = body["for_llm"]
    assert "reached" not in text
    for name in ("gw", "lan", "loop", "out"):
        assert f"{name}=0" not in text
        assert f"{name}=" in text
    assert _Hits.hits == []


def test_network_can_be_enabled_by_an_admin(owner_a, member_a, agent, engine):
    configure(owner_a, mode="all", network=True)
    run(member_a, "true")
    [container] = containers_of(engine, scope="session")
    assert container.attrs["HostConfig"]["NetworkMode"] == "bridge"


def test_read_only_and_no_workspace(owner_a, member_a, agent, tenant_a):
    workspace = workspace_for(tenant=tenant_a, agent=agent, user_id="")
    (workspace / "notes.txt").write_text("visible\n")
    configure(owner_a, mode="all", workspace_access="ro")
    body = run(member_a, "cat notes.txt; touch new.txt; echo rc=$?; echo $HOME")
    assert body["for_llm"].splitlines()[0] == "visible"
    assert "rc=1" in body["for_llm"]
    assert "/tmp" in body["for_llm"]
    assert not (workspace / "new.txt").exists()

    configure(owner_a, mode="all", workspace_access="none")
    body = run(member_a, "ls -a /workspace; cat notes.txt; echo rc=$?")
    assert "notes.txt" not in body["for_llm"].split("rc=")[0].replace("cat: can't open 'notes.txt'", "")
    assert "rc=1" in body["for_llm"]


def test_the_container_sandbox_off_runs_in_the_jail_not_on_the_host(owner_a, member_a, agent, engine):
    configure(owner_a, mode="off")  # saved before the jail existed: read as jail
    body = run(member_a, "hostname")
    assert body["is_error"] is False
    assert body["for_llm"].splitlines()[0] == "jail"
    assert containers_of(engine) == []


def test_host_mode_runs_on_the_host_only_where_the_operator_allows_it(
    owner_a, member_a, agent, engine, settings
):
    settings.TOOLGATE_ALLOW_HOST_EXEC = True
    configure(owner_a, mode="host")
    assert run(member_a, "hostname")["for_llm"].splitlines()[0] == socket.gethostname()
    settings.TOOLGATE_ALLOW_HOST_EXEC = False  # withdrawn: the stored host mode is read as jail
    assert run(member_a, "hostname")["for_llm"].splitlines()[0] == "jail"
    assert containers_of(engine) == []


def test_non_main_mode_spares_the_main_agent(owner_a, member_a, tenant_a, engine):
    services.agent_create(actor=Actor.system(tenant_a), key="main", name="Main")
    services.agent_create(actor=Actor.system(tenant_a), key="helper", name="Helper")
    configure(owner_a, mode="non-main")
    assert run(member_a, "hostname", agent="main")["for_llm"].splitlines()[0] == "jail"
    assert run(member_a, "hostname", agent="helper")["for_llm"].splitlines()[0] == "sandbox"


def test_an_engine_that_is_down_fails_closed(owner_a, member_a, agent, tenant_a, settings, tmp_path):
    configure(owner_a, mode="all")
    settings.TOOLGATE_DOCKER_URL = f"unix://{tmp_path}/no-engine.sock"
    manager.reset_client()
    marker = workspace_for(tenant=tenant_a, agent=agent, user_id="") / "ran-here"

    body = run(member_a, f"touch {marker.name}; echo ran")

    assert body["is_error"] is True
    assert body["for_llm"].startswith("sandbox unavailable: the Docker engine cannot be reached")
    assert "will not fall back to unsandboxed host execution" in body["for_llm"]
    assert not marker.exists()


def test_a_missing_image_fails_closed(owner_a, member_a, agent, settings):
    configure(owner_a, mode="all")
    settings.TOOLGATE_SANDBOX_IMAGE = "toolgate-test-sandbox:does-not-exist"
    settings.TOOLGATE_SANDBOX_IMAGES = ["toolgate-test-sandbox:does-not-exist"]
    body = run(member_a, "echo hi")
    assert body["is_error"] is True
    assert "sandbox image toolgate-test-sandbox:does-not-exist is not on the Docker engine" in body["for_llm"]


def test_a_container_removed_behind_our_back_is_made_again(owner_a, member_a, agent, engine):
    configure(owner_a, mode="all")
    run(member_a, "true")
    [container] = containers_of(engine, scope="session")
    container.remove(force=True)
    body = run(member_a, "echo again")
    assert body["for_llm"].startswith("again")
    [replacement] = containers_of(engine, scope="session")
    assert replacement.id != container.id


def test_pruning_removes_idle_containers(owner_a, member_a, agent, tenant_a, engine):
    configure(owner_a, mode="all")
    run(member_a, "true")
    row = SandboxContainer.objects.for_tenant(tenant_a).get()
    from datetime import timedelta

    from django.utils import timezone

    SandboxContainer.objects.for_tenant(tenant_a).update(last_used_at=timezone.now() - timedelta(hours=25))
    counts = manager.prune()
    assert counts["idle"] == 1
    assert containers_of(engine) == []
    assert not SandboxContainer.objects.for_tenant(tenant_a).filter(pk=row.pk).exists()


def test_cwd_maps_into_the_container(owner_a, member_a, agent, tenant_a):
    configure(owner_a, mode="all")
    (workspace_for(tenant=tenant_a, agent=agent, user_id="") / "sub" / "deeper").mkdir(parents=True)
    body = run(member_a, "pwd", cwd="sub/deeper")
    assert body["for_llm"].splitlines()[0] == "/workspace/sub/deeper"
    refused = run(member_a, "pwd", cwd="../..")
    assert refused["is_error"] is True
    assert "cwd refused" in refused["for_llm"]
