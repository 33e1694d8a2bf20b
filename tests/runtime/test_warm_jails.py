"""Warm jails (apps.toolkit.warm_jails): an ``exec`` command may run in the jail an earlier command of the
same workspace ran in, and then finds it as a new jail would be: nothing the earlier command started, no
file in /tmp, nothing changed on the jail's own file systems, no IPC object, and no way into the helper
that runs the commands. Other workspaces, tenants and network settings never share a jail.

Through POST /api/v1/runtime/execute, with the settings a new tenant gets, on real processes. Which jail a
command ran in is read from inside it: its pid namespace (a start time could be shared by two jails)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.accounts import services as tenant_services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from apps.toolkit import jail, warm_jails
from tests import factories
from tests.processes import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

JAIL_ID = "readlink /proc/self/ns/pid"  # the jail's pid namespace: one per jail
# The helper's pid: its command line holds its source ([D] keeps grep's own from matching), and so does
# bubblewrap's init (pid 1), which holds the helper's whole command line.
HELPER = "grep -a -l 'PR_SET_[D]UMPABLE' /proc/[0-9]*/cmdline | cut -d/ -f3 | grep -v '^1$'"
PROCESSES = r"for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done"

Run = Callable[..., str]


def _runner(client, agent: str = "bot") -> Run:  # type: ignore[no-untyped-def]
    def run(command: str, **args: object) -> str:
        response = client.post(
            "/api/v1/runtime/execute",
            {"agent": agent, "tool": "exec", "args": {"command": command, **args}},
            format="json",
        )
        assert response.status_code == 200, response.content
        body = response.json()
        assert body.get("rule") is None, body
        return str(body["for_llm"])

    return run


@pytest.fixture
def run_a(member_a, agent_a) -> Run:  # type: ignore[no-untyped-def]
    """Agent bot's exec, its workspace's warm jail started: a workspace's first command runs in a new
    jail while the warm one starts, and the next waits for it."""
    run = _runner(member_a)
    run("true")
    return run


def jail_of(run: Run) -> str:
    return run(JAIL_ID).splitlines()[0]


def test_commands_of_a_workspace_share_a_jail_that_keeps_nothing_of_them(run_a: Run) -> None:
    first = run_a(f"{JAIL_ID}; echo kept > /tmp/note-7c1e; d=/dev; mkdir -p $d/shm; "
                  "echo x > $d/shm/seg-7c1e; sleep 1007 & echo started")  # fmt: skip
    assert first.splitlines()[1:2] == ["started"], first
    second = run_a(f"{JAIL_ID}; ls -A /tmp /dev/shm; {PROCESSES}; echo end")
    assert second.splitlines()[0] == first.splitlines()[0]  # the same jail …
    assert "note-7c1e" not in second  # … with /tmp …
    assert "seg-7c1e" not in second  # … and /dev/shm emptied
    assert "sleep 1007" not in second  # … and nothing the first command left running
    assert "end" in second


def test_a_command_cannot_reach_the_helper_that_runs_it(run_a: Run) -> None:
    out = run_a(
        # The helper's command line holds its source; [D] keeps grep's own from matching.
        f"helper=$({HELPER}); "
        "echo helper=$helper; e=envi; cat /proc/$helper/${e}ron 2>&1 | head -c 200; echo; "
        "ls -l /proc/$helper/fd/ 2>&1 | grep -c 'cannot read symbolic link'; "
        "head -c 16 /proc/$helper/mem 2>&1 | head -c 200; "
        "echo; cat /proc/$helper/maps 2>&1 | head -c 200; echo; echo end"
    )
    lines = out.splitlines()
    assert lines[0].startswith("helper="), out
    assert lines[0][7:].isdigit(), out  # the helper is there …
    assert out.count("Permission denied") == 3, out  # … but its environment and memory are not …
    assert int(lines[3]) >= 3, out  # … nor where its open files lead (its socket among them)
    assert "socket:" not in out
    assert "PATH=" not in out


def test_a_jail_changed_by_a_command_is_not_used_again(run_a: Run) -> None:
    before = jail_of(run_a)
    assert jail_of(run_a) == before  # the warm jail
    run_a("ln -s /workspace /planted; echo planted")
    after = run_a(f"{JAIL_ID}; ls -d /planted 2>&1")
    assert after.splitlines()[0] != before
    assert "No such file or directory" in after
    again = jail_of(run_a)
    assert jail_of(run_a) == again  # the new warm jail, unchanged, is kept


def test_a_sysv_ipc_object_retires_the_jail(run_a: Run) -> None:
    before = jail_of(run_a)
    assert "Shared memory id" in run_a("ipcmk -M 4096 2>&1")
    after = run_a(f"{JAIL_ID}; ipcs -m | grep -c 0x || true")
    assert after.splitlines()[0] != before
    assert after.splitlines()[1] == "0", after


def test_a_timeout_ends_the_jail_and_the_next_command_gets_another(run_a: Run) -> None:
    before = jail_of(run_a)
    timed_out = run_a("sleep 30", timeout=1)
    assert "timed out after 1s" in timed_out
    assert jail_of(run_a) != before


def test_a_command_that_kills_the_helper_ends_only_its_jail(run_a: Run) -> None:
    before = jail_of(run_a)
    out = run_a(f"kill -s KILL $({HELPER}); sleep 1; echo unreachable")
    assert "unreachable" not in out
    assert jail_of(run_a) != before
    assert run_a("echo fine").splitlines()[0] == "fine"


def test_workspaces_tenants_and_network_settings_never_share_a_jail(
    run_a: Run, member_a, owner_a, tenant_a: Tenant, tenant_b: Tenant
) -> None:  # type: ignore[no-untyped-def]
    mine = jail_of(run_a)
    assert jail_of(run_a) == mine
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    assert jail_of(_runner(member_a, "other")) != mine  # another agent: another workspace
    tenant_services.agent_create(actor=Actor.system(tenant_b), key="bot", name="B's bot")
    member_b = factories.key_client(factories.make_api_key(tenant_b, Role.MEMBER))
    assert jail_of(_runner(member_b)) != mine
    response = owner_a.patch("/api/v1/tenant/", {"settings": {"sandbox": {"network": True}}}, format="json")
    assert response.status_code == 200, response.content
    run_a("true")  # the first command with the network on: a new jail, the warm one started
    networked = jail_of(run_a)
    assert networked != mine
    assert jail_of(run_a) == networked


def test_a_workspace_made_again_gets_a_new_jail(run_a: Run, workspace_a: Path) -> None:
    before = jail_of(run_a)
    shutil.rmtree(workspace_a)
    workspace_a.mkdir(parents=True)
    (workspace_a / "fresh.txt").write_text("new")
    out = run_a(f"{JAIL_ID}; cat fresh.txt")
    assert out.splitlines()[1] == "new"
    assert out.splitlines()[0] != before


def test_without_warm_jails_every_command_gets_its_own(run_a: Run, settings) -> None:  # type: ignore[no-untyped-def]
    settings.TOOLGATE_JAIL_WARM = 0
    assert jail_of(run_a) != jail_of(run_a)


def test_limits_and_confinement_hold_in_a_reused_jail(run_a: Run, owner_a) -> None:  # type: ignore[no-untyped-def]
    response = owner_a.patch(
        "/api/v1/tenant/", {"settings": {"sandbox": {"cpu_seconds": 37, "open_files": 200}}}, format="json"
    )
    assert response.status_code == 200, response.content
    run_a("true")  # new limits: a new jail, the warm one started
    mine = jail_of(run_a)
    out = run_a(
        f"{JAIL_ID}; grep -E 'cpu time|open files|msgqueue' /proc/self/limits; id -u; "
        "grep CapEff /proc/self/status; ls /proc | grep -c '^[0-9]'"
    )
    rows = out.splitlines()
    assert rows[0] == mine  # a reused jail
    assert rows[1].split()[3:5] == ["37", "37"], out
    assert rows[2].split()[3:5] == ["200", "200"], out
    assert rows[3].split()[3:5] == ["0", "0"], out
    assert rows[4] == str(jail.UID)
    assert rows[5] == "CapEff:\t0000000000000000"
    assert int(rows[6]) < 10, out


def test_suspending_the_tenant_ends_its_idle_jails(run_a: Run, workspace_a: Path, tenant_a: Tenant) -> None:
    jail_of(run_a)
    root = workspace_a.parents[2]  # the tenant's tree
    assert _bwraps_under(root) >= 1  # the warm jail waits for the next command
    out = StringIO()
    call_command("suspend_tenant", tenant_a.slug, "--reason", "unpaid", stdout=out)
    assert wait_until(lambda: _bwraps_under(root) == 0, timeout=10)  # killed at once, gone as it ends
    assert "1 jails stopped" in out.getvalue(), out.getvalue()  # one jail, counted once


def _bwraps_under(root: Path) -> int:
    found = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            argv
            and os.path.basename(argv[0]) == b"bwrap"
            and any(part.startswith(str(root).encode()) for part in argv)
        ):
            found += 1
    return found


def test_a_helper_that_does_not_start_leaves_each_command_a_jail_of_its_own(
    member_a, tenant_a: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(warm_jails, "_helper_source", lambda: "raise SystemExit(3)")
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="fresh", name="Fresh")
    run = _runner(member_a, "fresh")
    first, second, third = (run(f"{JAIL_ID}; echo ran") for _ in range(3))
    assert first.splitlines()[1] == second.splitlines()[1] == third.splitlines()[1] == "ran"  # jailed …
    assert len({first.splitlines()[0], second.splitlines()[0], third.splitlines()[0]}) == 3  # … anew
    assert warm_jails.close_all() == 0  # and no warm jail is kept for the workspace


def test_a_workspaces_first_command_runs_in_a_new_jail_and_the_next_in_its_warm_one(
    member_a, tenant_a: Tenant
) -> None:  # type: ignore[no-untyped-def]
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="first", name="First")
    run = _runner(member_a, "first")
    ids = [jail_of(run) for _ in range(3)]
    assert ids[0] != ids[1]  # the first in a jail of its own, while the warm one started
    assert ids[1] == ids[2]
