"""Custom tools and credentialed CLIs in the sandbox, and the sandbox's records and schedule, against a
real Docker engine: what runs in a container when the sandbox applies, what is refused (never run on
the host) when it cannot, and what is left behind."""

from __future__ import annotations

import json
import socket
import threading

import pytest
from django.db import connection
from django_q.models import Schedule

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.custom_tools import services as custom_tool_services
from apps.sandbox import manager, tasks
from apps.sandbox.models import SandboxContainer
from apps.secure_cli import services as cli_services
from apps.tenants.actors import Actor
from apps.toolkit.context import CallContext
from apps.toolkit.scrubber import Scrubber
from apps.toolkit.workspace import workspace_for
from tests.sandbox.conftest import configure, containers_of

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sandbox_settings")]

TOKEN = "tok3n-sandbox-Wq52mzLr"


def call(client, tool, args, *, session="s-1"):
    body = {"agent": "bot", "tool": tool, "args": args, "context": {"session_key": session}}
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def engine_down(settings, tmp_path) -> None:
    settings.TOOLGATE_DOCKER_URL = f"unix://{tmp_path}/no-engine.sock"
    manager.reset_client()


# --- custom tools -------------------------------------------------------------------------------------


@pytest.fixture
def greet(tenant_a):
    return custom_tool_services.custom_tool_create(
        actor=Actor.system(tenant_a),
        name="greet",
        parameters={"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
        command="echo {{.word}}; hostname; echo $HOME; echo $TOOL_SECRET | wc -c",
        env={"TOOL_SECRET": "a-custom-tool-secret-value"},
    )


def test_a_custom_tool_runs_in_the_sandbox(owner_a, member_a, agent, greet, engine):
    configure(owner_a, mode="all")
    body = call(member_a, "greet", {"word": "hello; touch /workspace/pwned"})

    assert body["is_error"] is False, body
    lines = body["for_llm"].splitlines()
    assert lines[:3] == ["hello; touch /workspace/pwned", "sandbox", "/workspace"]
    assert lines[3].strip() == str(len("a-custom-tool-secret-value") + 1)  # the secret reached the command
    assert len(containers_of(engine, scope="session")) == 1


def test_a_custom_tool_is_refused_when_the_sandbox_is_unavailable(
    owner_a, member_a, agent, greet, tenant_a, settings, tmp_path
):
    configure(owner_a, mode="all")
    engine_down(settings, tmp_path)
    marker = workspace_for(tenant=tenant_a, agent=agent, user_id="") / "made"
    greet.command = "touch made; echo {{.word}}"
    greet.save()

    body = call(member_a, "greet", {"word": "x"})

    assert body["is_error"] is True
    assert "sandbox unavailable: the Docker engine cannot be reached" in body["for_llm"]
    assert not marker.exists()


def test_a_custom_tool_test_run_uses_the_agents_sandbox(owner_a, admin_a, agent, greet):
    configure(owner_a, mode="all")
    response = admin_a.post(
        f"/api/v1/custom-tools/{greet.pk}/test", {"agent": "bot", "args": {"word": "hi"}}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["output"].splitlines()[:2] == ["hi", "sandbox"]
    assert "sandbox container" in json.dumps(body["steps"])


# --- credentialed CLIs --------------------------------------------------------------------------------


@pytest.fixture
def awk(tenant_a, agent):
    """A credentialed CLI found on the container's PATH (busybox's awk, which can print its
    environment), with a token."""
    return cli_services.binary_create(
        actor=Actor.system(tenant_a), binary_name="awk", env={"GH_TOKEN": TOKEN}, is_global=True
    )


PRINTENV = "awk 'BEGIN { for (k in ENVIRON) print k \"=\" ENVIRON[k] }'"


def test_a_credentialed_cli_runs_in_the_sandbox_with_its_token_scrubbed(
    owner_a, member_a, agent, awk, tenant_a, engine
):
    configure(owner_a, mode="all")
    body = call(member_a, "exec", {"command": PRINTENV})

    assert body["is_error"] is False, body
    out = body["for_llm"]
    assert TOKEN not in json.dumps(body)
    assert any(line.startswith("GH_") and line.endswith("[REDACTED]") for line in out.splitlines())
    assert "HOME=/workspace" in out
    assert "USER=toolgate" in out
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert TOKEN not in json.dumps({f.name: str(getattr(row, f.name)) for f in ToolCall._meta.fields})
    # The token was handed to the one exec, never to the container.
    [container] = containers_of(engine, scope="session")
    assert not any(TOKEN in variable for variable in container.attrs["Config"]["Env"] or [])


def test_a_credentialed_cli_refuses_an_unavailable_sandbox(owner_a, member_a, agent, awk, settings, tmp_path):
    configure(owner_a, mode="all")
    engine_down(settings, tmp_path)
    body = call(member_a, "exec", {"command": PRINTENV})

    assert body["is_error"] is True
    assert body["for_llm"].startswith("[CREDENTIALED EXEC] sandbox unavailable")
    assert "will not fall back to unsandboxed host execution" in body["for_llm"]
    assert TOKEN not in body["for_llm"]


def test_a_credentialed_cli_typed_as_a_path_is_refused_in_the_sandbox(owner_a, member_a, agent, awk):
    configure(owner_a, mode="all")
    body = call(member_a, "exec", {"command": "./" + PRINTENV})
    assert body["is_error"] is True
    assert "binary path mismatch" in body["for_llm"]


def test_a_credentialed_cli_runs_in_the_jail_when_the_container_sandbox_is_off(owner_a, member_a, agent, awk):
    configure(owner_a, mode="off")  # written before the jail existed: read as "jail", never the host
    body = call(member_a, "exec", {"command": "awk 'BEGIN { print ENVIRON[\"HOME\"] }'"})
    assert body["is_error"] is False, body
    assert body["for_llm"].splitlines()[0] == "/workspace"


def test_a_credentialed_cli_runs_on_the_host_only_where_the_operator_allows_it(
    owner_a, member_a, agent, awk, settings
):
    settings.TOOLGATE_ALLOW_HOST_EXEC = True
    configure(owner_a, mode="host")
    body = call(member_a, "exec", {"command": "awk 'BEGIN { print ENVIRON[\"HOME\"] }'"})
    assert body["is_error"] is False, body
    assert body["for_llm"].splitlines()[0].endswith("/workspace")
    assert body["for_llm"].splitlines()[0] != "/workspace"


# --- records, concurrency and the schedule ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_calls_share_one_container(tenant_a, agent, engine):
    services.tenant_update(actor=Actor.system(tenant_a), changes={"settings": {"sandbox": {"mode": "all"}}})
    tenant_a.refresh_from_db()
    ctx = CallContext(
        tenant=tenant_a,
        agent=agent,
        actor=Actor.system(tenant_a),
        call_id="c",
        workspace=workspace_for(tenant=tenant_a, agent=agent, user_id=""),
        scrubber=Scrubber(),
        session_key="same",
        sandbox={"mode": "all"},
    )
    target = manager.target_for(ctx)
    assert target is not None
    outcomes: list[manager.Outcome] = []
    barrier = threading.Barrier(4)

    def first_call() -> None:
        barrier.wait()
        # Each thread as a separate process would be: nothing known yet.
        manager._known.pop(target.name, None)
        try:
            outcome = manager.run(target, ["sh", "-c", "echo ok"], cwd="/workspace", env={}, timeout=30)
            outcomes.append(outcome)
        finally:
            connection.close()  # each thread's own connection

    threads = [threading.Thread(target=first_call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert [o.stdout.text() for o in outcomes] == ["ok\n"] * 4
    assert len(containers_of(engine, scope="session")) == 1
    assert SandboxContainer.objects.for_tenant(tenant_a).count() == 1


def test_a_changed_configuration_replaces_the_container(owner_a, member_a, agent, tenant_a, engine):
    configure(owner_a, mode="all")
    call(member_a, "exec", {"command": "true"})
    [before] = containers_of(engine, scope="session")
    configure(owner_a, mode="all", memory_mb=128)
    body = call(member_a, "exec", {"command": "true"})

    assert body["is_error"] is False
    [after] = containers_of(engine, scope="session")
    assert after.id != before.id
    assert after.attrs["HostConfig"]["Memory"] == 128 * 1024 * 1024
    assert SandboxContainer.objects.for_tenant(tenant_a).get().container_id == after.id


def test_an_open_agents_users_get_their_own_containers_in_agent_scope(owner_a, member_a, tenant_a, engine):
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot", type="open")
    configure(owner_a, mode="all", scope="agent")
    for user in ("ann", "bob"):
        body = {
            "agent": "bot",
            "tool": "exec",
            "args": {"command": f"echo {user} > mine.txt; ls"},
            "context": {"user_id": user},
        }
        response = member_a.post("/api/v1/runtime/execute", body, format="json")
        assert response.json()["for_llm"].splitlines()[0] == "mine.txt"
    assert len(containers_of(engine, scope="agent")) == 2


@pytest.mark.usefixtures("registered_schedules")
def test_the_prune_job_is_scheduled_every_five_minutes():
    schedule = Schedule.objects.get(name=tasks.PRUNE_SCHEDULE)
    assert schedule.func == "apps.sandbox.tasks.prune"
    assert schedule.schedule_type == "I"
    assert schedule.minutes == 5


def test_the_prune_job_removes_orphans_and_vanished_rows(owner_a, member_a, agent, tenant_a, engine):
    configure(owner_a, mode="all")
    call(member_a, "exec", {"command": "true"})
    [container] = containers_of(engine, scope="session")
    container.remove(force=True)  # gone behind Toolgate's back: its row goes at the next prune

    counts = tasks.prune()

    assert counts["gone"] == 1
    assert not SandboxContainer.objects.for_tenant(tenant_a).exists()


def test_the_host_name_is_not_the_sandboxes(owner_a, member_a, agent):
    configure(owner_a, mode="all", scope="agent")
    assert call(member_a, "exec", {"command": "hostname"})["for_llm"].splitlines()[0] != socket.gethostname()
