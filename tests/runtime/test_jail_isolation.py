"""The jail, with the settings a new tenant gets, on real processes: what tenant A's processes cannot
reach (tenant B's workspace, the data directory, the database socket, Toolgate's environment, the
network) and what they still do (ordinary commands, pipelines and scripts in their own workspace).

Each check runs through the public surface (POST /api/v1/runtime/execute) for every kind of process
Toolgate starts for a tenant: ``exec``, a custom tool, a credentialed CLI and a stdio MCP server. The
commands are written so the text filters (the safeguard, the deny groups) let them through: what stops
them is the jail, not a filter."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings

from apps.accounts import services as tenant_services
from apps.mcp_grants import client as mcp_client
from apps.mcp_grants import services as mcp_services
from apps.mcp_grants.models import MCPServer
from apps.secure_cli import services as cli_services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.toolkit import jail, syscall_filter
from apps.toolkit.workspace import workspace_for
from config import embedded_db
from tests.jail_support import programs_visible_in_jail
from tests.mcp.live_servers import DEMO

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_connections")]

SECRET = "tenant B's secret 7f3a"
# find skips the host's own /usr (read-only in the jail, and holding nothing of Toolgate's) and /proc:
# crawling them costs seconds and shows nothing about the jail.
SKIP = r"\( -path /usr -o -path /proc \) -prune -o"
MARKER = "jail-marker-c41d"

Run = Callable[[str], str]


@pytest.fixture
def mcp_connections() -> Iterator[None]:
    """This process's MCP connections closed after the test (their stdio servers stopped)."""
    yield
    manager = mcp_client.manager()
    manager.run(manager.close_all(), 60)


@pytest.fixture
def workspace_b(tenant_b: Tenant) -> Path:
    agent = tenant_services.agent_create(actor=Actor.system(tenant_b), key="bot", name="B's bot")
    workspace = Path(os.path.realpath(workspace_for(tenant=tenant_b, agent=agent, user_id="")))
    (workspace / "secret.txt").write_text(SECRET)
    return workspace


@pytest.fixture(autouse=True)
def toolgate_marker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value only Toolgate's own environment holds."""
    monkeypatch.setenv("TOOLGATE_JAIL_MARKER", MARKER)


def execute(client, tool: str, args: dict) -> dict:  # type: ignore[no-untyped-def]
    response = client.post(
        "/api/v1/runtime/execute", {"agent": "bot", "tool": tool, "args": args}, format="json"
    )
    assert response.status_code == 200, response.content
    return dict(response.json())


def text_of(body: dict) -> str:
    assert body.get("rule") is None, body  # nothing was refused by a filter: the process ran
    return str(body["for_llm"])


# --- the three kinds of process that run a shell command ---------------------------------------------


@pytest.fixture
def shell_runner(request, member_a, admin_a, tenant_a, agent_a, settings, tmp_path) -> Run:  # type: ignore[no-untyped-def]
    kind = request.param
    if kind == "exec":
        return lambda command: text_of(execute(member_a, "exec", {"command": command}))
    if kind == "custom_tool":
        created = admin_a.post(
            "/api/v1/custom-tools/",
            {
                "name": "run_script",
                "description": "Runs a script.",
                "command": "sh -c {{.script}}",
                "parameters": {
                    "type": "object",
                    "properties": {"script": {"type": "string"}},
                    "required": ["script"],
                },
            },
            format="json",
        )
        assert created.status_code == 201, created.content
        return lambda command: text_of(execute(member_a, "run_script", {"script": command}))
    # A credentialed CLI whose program runs its first argument as a script: what it can reach is
    # what any CLI could.
    next(programs_visible_in_jail(settings, tmp_path))
    program = tmp_path / "bin" / "scriptcli"
    program.parent.mkdir()
    program.write_text('#!/bin/sh\nexec sh -c "$1"\n')
    program.chmod(0o755)
    cli_services.binary_create(
        actor=Actor.system(tenant_a),
        binary_name="scriptcli",
        binary_path=str(program),
        env={"CLI_TOKEN": "x" * 20},
    )

    def run(command: str) -> str:
        quoted = "'" + command.replace("'", "'\"'\"'") + "'"
        body = execute(member_a, "exec", {"command": f"scriptcli {quoted}"})
        assert "[CREDENTIALED EXEC]" not in body["for_llm"], body
        return text_of(body)

    return run


KINDS = ["exec", "custom_tool", "credentialed_cli"]


def _spelled(path: Path) -> str:
    """``path`` built by the shell at run time, so no filter of command text can see it."""
    head, tail = str(path)[:3], str(path)[3:]
    return f'"$(printf %s {head})$(printf %s {tail})"'


@pytest.mark.parametrize("shell_runner", KINDS, indirect=True)
def test_another_tenants_workspace_is_out_of_reach(shell_runner, workspace_a, workspace_b):
    relative = os.path.relpath(workspace_b, workspace_a)
    assert SECRET not in shell_runner(f"cat {relative}/secret.txt 2>&1")
    assert SECRET not in shell_runner(f"cat {_spelled(workspace_b / 'secret.txt')} 2>&1")
    assert SECRET not in shell_runner(
        # The globs that reach B's file on the host: up from A's workspace, and down from the root.
        "cat ../../../../*/agents/*/workspace/secret.txt 2>&1; "
        f"cat {_spelled(workspace_b.parents[3])}/*/agents/*/workspace/secret.txt 2>&1"
    )
    found = shell_runner(f"find / {SKIP} -name secret.txt -print 2>/dev/null; echo end")
    assert "secret.txt" not in found
    listed = shell_runner("cd ../../../../../../../..; pwd; ls -a")
    assert str(workspace_b.parent.parent.name) not in listed
    assert "tenants" not in listed
    shell_runner(
        f"echo pwned > {relative}/pwned.txt 2>&1; echo pwned > {_spelled(workspace_b / 'pwned.txt')} 2>&1"
    )
    assert not (workspace_b / "pwned.txt").exists()


@pytest.mark.parametrize("shell_runner", KINDS, indirect=True)
def test_the_data_directory_and_the_database_socket_are_out_of_reach(shell_runner):
    data_dir = Path(os.path.realpath(settings.TOOLGATE_DATA_DIR))
    names = [entry.name for entry in data_dir.iterdir()]
    assert names  # the data directory holds the database and the secret files
    seen = shell_runner(
        f"ls -a {_spelled(data_dir)} 2>&1; "
        f"find / {SKIP} -name 'field_encryption_key' -print 2>/dev/null; echo end"
    )
    assert "field_encryption_key" not in seen
    assert "No such file or directory" in seen
    sockets = shell_runner(f"find / {SKIP} -type s -print 2>/dev/null; echo end")
    assert sockets.splitlines()[0] == "end", sockets  # no Unix socket at all: no database, no Docker engine
    socket_dir = embedded_db.data_dir()
    assert ".s.PGSQL" not in shell_runner(f"ls -a {_spelled(socket_dir)} 2>&1")
    if Path("/usr/bin/psql").exists():
        refused = shell_runner("psql -h /tmp -U postgres -c 'select 1' 2>&1; echo end")
        assert "1 row" not in refused


@pytest.mark.parametrize("shell_runner", KINDS, indirect=True)
def test_toolgates_environment_and_processes_are_out_of_reach(shell_runner):
    seen = shell_runner(
        "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; "
        f"cat /proc/{os.getpid()}/cmdline 2>&1; env; echo end"
    )
    assert MARKER not in seen
    assert "SECRET_KEY" not in seen
    assert "DATABASE" not in seen
    processes = shell_runner("ls /proc | grep -c '^[0-9]'")
    assert int(processes.splitlines()[0]) < 10  # the jail's own processes only
    assert shell_runner("id -u; grep CapEff /proc/self/status").splitlines()[:2] == [
        str(jail.UID),
        "CapEff:\t0000000000000000",
    ]


@pytest.mark.parametrize("shell_runner", KINDS, indirect=True)
def test_ordinary_commands_pipelines_and_scripts_still_run(shell_runner, workspace_a):
    (workspace_a / "data.txt").write_text("pear\napple\nfig\n")
    (workspace_a / "count.sh").write_text(
        'n=0\nwhile read -r line; do n=$((n+1)); done < data.txt\necho "lines=$n"\n'
    )
    assert shell_runner("sort data.txt | head -1").splitlines()[0] == "apple"
    assert shell_runner("sh count.sh").splitlines()[0] == "lines=3"
    shell_runner("mkdir -p out && grep -c a data.txt > out/n.txt && python3 -c 'print(6*7)' >> out/n.txt")
    assert (workspace_a / "out" / "n.txt").read_text() == "2\n42\n"
    assert shell_runner("echo $HOME; pwd").splitlines()[:2] == ["/workspace", "/workspace"]


@pytest.fixture
def listener() -> Iterator[int]:
    """A real HTTP server on 127.0.0.1: reachable from the host, not from a jail without network."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"reached")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()


@pytest.mark.parametrize("shell_runner", ["exec"], indirect=True)
def test_the_network_is_off_by_default_and_an_admin_may_turn_it_on(
    shell_runner, owner_a, listener, workspace_a
):
    fetch = (
        f"print(__import__('urllib.request').request.urlopen('http://127.0.0.1:{listener}/').read().decode())"
    )
    (workspace_a / "fetch.py").write_text(fetch + "\n")
    probe = "python3 fetch.py 2>&1 | tail -1"
    assert "reached" not in shell_runner(probe)
    response = owner_a.patch("/api/v1/tenant/", {"settings": {"sandbox": {"network": True}}}, format="json")
    assert response.status_code == 200, response.content
    assert shell_runner(probe).splitlines()[0] == "reached"


@pytest.mark.parametrize("shell_runner", ["exec"], indirect=True)
def test_a_fork_bomb_meets_the_process_limit(shell_runner):
    out = shell_runner("for i in $(seq 400); do sleep 3 & done 2>&1 | tail -1; echo done")
    assert "fork" in out.lower() or "resource" in out.lower(), out


@pytest.fixture(params=["shell", "prlimit"])
def limits_setter(request, monkeypatch: pytest.MonkeyPatch) -> str:
    """The limits set by the trampoline's ``ulimit`` (verified at start-up), or by ``prlimit`` where the
    shell's could not be verified."""
    if request.param == "prlimit":
        monkeypatch.setattr(jail, "_status", dataclasses.replace(jail.status(), nproc_flag=""))
    return str(request.param)


@pytest.mark.parametrize("shell_runner", KINDS, indirect=True)
def test_the_tenants_limits_hold_in_the_jail_and_cannot_be_raised(shell_runner, owner_a, limits_setter):
    limits = {"cpu_seconds": 41, "address_space_mb": 1500, "file_size_mb": 7, "open_files": 300}
    response = owner_a.patch("/api/v1/tenant/", {"settings": {"sandbox": limits}}, format="json")
    assert response.status_code == 200, response.content
    out = shell_runner("cat /proc/self/limits; ulimit -n 4096 2>&1 || echo raise-refused")
    rows = {line[:26].strip(): line[26:].split()[:2] for line in out.splitlines() if line.startswith("Max ")}
    assert rows["Max cpu time"] == ["41", "41"]
    assert rows["Max address space"] == [str(1500 * 1024 * 1024)] * 2
    assert rows["Max file size"] == [str(7 * 1024 * 1024)] * 2
    assert rows["Max open files"] == ["300", "300"]
    assert rows["Max core file size"] == ["0", "0"]
    assert "raise-refused" in out  # hard limits: the jailed process cannot lift them
    too_big = shell_runner("head -c 9000000 /dev/zero > big.bin; echo rc=$?; wc -c < big.bin")
    lines = too_big.splitlines()
    assert lines[0] != "rc=0", too_big  # stopped by SIGXFSZ …
    assert lines[1].strip() == str(7 * 1024 * 1024), too_big  # … at 7 MiB


# The kernel keyring from inside a jail: add a key (its description names the tenant), then try the two
# other calls. A program, not a command, so that no filter of command text is involved.
KEYRING_PROBE = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
calls = {
    "add_key": (248, b"user", sys.argv[1].encode(), b"payload", 7, ctypes.c_int(-4)),
    "request_key": (249, b"user", sys.argv[1].encode(), None, ctypes.c_int(0)),
    "keyctl": (250, 0, ctypes.c_int(-4), 0, 0, 0),
    "io_uring_setup": (425, 4, ctypes.create_string_buffer(120)),
}
for name, args in calls.items():
    result = libc.syscall(*args)
    print(name, result, ctypes.get_errno() if result < 0 else 0)
"""


@pytest.mark.parametrize("shell_runner", KINDS, indirect=True)
def test_the_kernel_keyring_io_uring_and_new_user_namespaces_are_refused(shell_runner, workspace_a):
    """Keys are not namespaced like the jail's other resources: a key one jail adds would be listed in
    every other jail's /proc/keys, whatever the tenant. A jail can add none, read no key list, set up no
    io_uring, and make no user namespace of its own."""
    if os.uname().machine != "x86_64":
        pytest.fail("the probe's system call numbers are x86_64's; add this machine's")
    (workspace_a / "keyring_probe.py").write_text(KEYRING_PROBE)
    out = shell_runner(f"{sys.executable} keyring_probe.py tenant-a-key-7c2e 2>&1")
    # EPERM for the keyring (as under Docker), ENOSYS for io_uring (as on a kernel without it)
    assert out.splitlines()[:4] == [
        "add_key -1 1",
        "request_key -1 1",
        "keyctl -1 1",
        "io_uring_setup -1 38",
    ], out
    assert "tenant-a-key-7c2e" not in Path("/proc/keys").read_text()  # nothing reached the kernel
    listed = shell_runner("cat /proc/keys 2>&1; cat /proc/key-users 2>&1; echo end")
    assert listed.count("Permission denied") == 2, listed
    status = shell_runner("grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status")
    assert status.split()[:4] == ["NoNewPrivs:", "1", "Seccomp:", "2"], status  # a filter is loaded
    nested = shell_runner("unshare -U id -u 2>&1; echo rc=$?")
    assert nested.splitlines()[-1] != "rc=0", nested


def test_a_filter_file_that_went_away_is_written_again(member_a, agent_a, settings):
    settings.TOOLGATE_JAIL_WARM = 0  # a new jail for the command, made after the file went
    program = syscall_filter.path()
    program.unlink()
    out = text_of(execute(member_a, "exec", {"command": "grep Seccomp: /proc/self/status"}))
    assert out.split()[:2] == ["Seccomp:", "2"], out
    assert program.is_file()


# --- a stdio MCP server ------------------------------------------------------------------------------


@pytest.fixture
def mcp_probe(member_a, tenant_a, agent_a) -> Callable[..., str]:  # type: ignore[no-untyped-def]
    system = Actor.system(tenant_a)
    server = mcp_services.server_create(
        actor=system, name="demo", transport="stdio", command=sys.executable, args=[str(DEMO), "stdio"]
    )
    mcp_services.agent_grant_set(actor=system, server=server, agent=agent_a)
    mcp_client.refresh(server)

    def call(tool: str, **args: object) -> str:
        body = execute(member_a, f"mcp_demo__{tool}", args)
        assert body["is_error"] is False, body
        return str(body["for_llm"])

    return call


def test_a_stdio_mcp_server_is_jailed(mcp_probe, tenant_a, workspace_a, workspace_b, listener):
    own = (
        Path(os.path.realpath(settings.TOOLGATE_WORKSPACE_ROOT))
        / "tenants"
        / str(tenant_a.pk)
        / "mcp"
        / "demo"
    )
    for path in (
        str(workspace_b / "secret.txt"),
        os.path.relpath(workspace_b / "secret.txt", own),
        str(workspace_a),
        str(Path(os.path.realpath(settings.TOOLGATE_DATA_DIR))),
        f"/proc/{os.getpid()}/environ",
        "/var/run/docker.sock",
    ):
        assert mcp_probe("probe", path=path).startswith("error: No such file or directory"), path
    assert SECRET not in mcp_probe("probe", path="/")
    assert MARKER not in mcp_probe("env", name="TOOLGATE_JAIL_MARKER")
    assert mcp_probe("probe", path="/workspace").splitlines() == ["stderr.log"]  # its own directory
    assert mcp_probe("whoami", host="127.0.0.1", port=listener).startswith(f"uid={jail.UID} reached=no")
    # The same system call filter as every jail: no kernel keyring, no key list.
    assert "Seccomp:\t2" in mcp_probe("probe", path="/proc/self/status")
    assert mcp_probe("probe", path="/proc/keys") == "error: Permission denied"


def test_a_stdio_mcp_server_with_the_network_on_reaches_it(mcp_probe, tenant_a, listener):
    server = MCPServer.objects.for_tenant(tenant_a).get(name="demo")
    mcp_services.server_update(actor=Actor.system(tenant_a), server=server, network=True)
    mcp_client.refresh(MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk))
    assert mcp_probe("whoami", host="127.0.0.1", port=listener) == f"uid={jail.UID} reached=yes"


@pytest.mark.parametrize("shell_runner", ["exec"], indirect=True)
def test_on_the_host_the_same_commands_reach_the_other_tenant(
    shell_runner, owner_a, workspace_a, workspace_b, settings
):
    """The commands above are not refused by a filter: where the operator allows mode host, they reach
    tenant B's file, so what stops them in the default mode is the jail."""
    settings.TOOLGATE_ALLOW_HOST_EXEC = True
    response = owner_a.patch("/api/v1/tenant/", {"settings": {"sandbox": {"mode": "host"}}}, format="json")
    assert response.status_code == 200, response.content
    assert SECRET in shell_runner("cat ../../../../*/agents/*/workspace/secret.txt 2>&1")
    assert SECRET in shell_runner(f"cat {_spelled(workspace_b / 'secret.txt')} 2>&1")
