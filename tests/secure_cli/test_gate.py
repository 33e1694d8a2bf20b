"""The secure-CLI gate on exec's shell path: a restricted CLI (``is_global: false``) that the agent is
not granted cannot be reached through the shell, whatever wraps it; the gate fails closed when the
registry cannot be read."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import OperationalError

from apps.accounts import services as tenant_services
from apps.secure_cli import execution, services
from apps.secure_cli.execution import GATE_UNAVAILABLE
from apps.secure_cli.models import SecureCLIBinary
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.toolkit import registry
from apps.toolkit.workspace import workspace_for
from tests import factories
from tests.secure_cli.support import TOKEN, fake_cli, ran
from tests.secure_cli.test_credentialed_exec import run

pytestmark = pytest.mark.django_db

REFUSED = 'Binary "gh" requires a secure CLI grant. Ask admin to grant access to this agent.'


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def workspace(tenant_a: Tenant, agent: Agent) -> Path:
    return workspace_for(tenant=tenant_a, agent=agent, user_id="")


@pytest.fixture
def restricted_gh(tmp_path: Path, tenant_a: Tenant, agent: Agent) -> SecureCLIBinary:
    path = fake_cli(tmp_path / "bin")
    return services.binary_create(
        actor=Actor.system(tenant_a),
        preset="gh",
        binary_path=str(path),
        env={"GH_TOKEN": TOKEN},
        is_global=False,
    )


@pytest.mark.parametrize(
    "command",
    [
        "gh api user",
        "GH api user",
        "sh -c 'gh api user'",
        "/bin/sh -c 'gh api user'",
        "bash -c \"sh -c 'gh api user'\"",
        "env gh api user",
        "env GH_DEBUG=1 gh api user",
        "/usr/bin/env sh -c 'gh api user'",
        "nohup gh api user",
        "timeout 5 gh api user",
        "stdbuf -oL gh api user",
        "ls && gh api user",
        "echo $(gh api user)",
        "/opt/elsewhere/gh api user",
        "bash -c \"env sh -c 'gh x'\"",
    ],
)
def test_an_ungranted_restricted_cli_is_refused_through_any_wrapper(
    member_a, restricted_gh, workspace, command
):
    body = run(member_a, command)
    assert body["is_error"] is True
    assert body["for_llm"] == REFUSED
    assert not ran(workspace)


def test_nesting_deeper_than_three_wrappers_is_refused(tenant_a, agent, restricted_gh, workspace):
    ctx = factories.call_context(tenant_a, agent, workspace)
    exec_tool = registry.implementation("exec")
    assert exec_tool is not None
    deep = 'sh -c "sh -c \'sh -c \\"sh -c gh\\"\'"'

    result = exec_tool(ctx, {"command": deep})

    # The safeguard refuses it first; the gate would on its own too.
    assert result.is_error is True
    assert "nesting too deep" in result.for_llm
    assert not ran(workspace)
    assert execution.plan(ctx, deep).refusal == execution.TOO_DEEP
    three = exec_tool(ctx, {"command": "sh -c \"sh -c 'sh -c gh'\""})
    assert three.for_llm == REFUSED


def test_a_granted_agent_runs_it_credentialed_and_the_gate_lets_the_shell_pass(
    member_a, restricted_gh, agent, workspace, tenant_a
):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    services.grant_set(actor=Actor.system(tenant_a), binary=restricted_gh, agent=agent)

    direct = run(member_a, "gh api user")
    through_shell = run(member_a, "sh -c 'gh api user'")
    other = run(member_a, "sh -c 'gh api user'", agent="other")

    assert direct["is_error"] is False
    assert "value: [REDACTED]" in direct["for_llm"]
    # Not credentialed through a shell (gh is not on the shell's PATH), but not the gate's refusal.
    assert REFUSED not in through_shell["for_llm"]
    assert other["for_llm"] == REFUSED


def test_a_global_cli_is_not_gated(member_a, restricted_gh, workspace, tenant_a):
    services.binary_update(actor=Actor.system(tenant_a), binary=restricted_gh, is_global=True)
    body = run(member_a, "sh -c 'gh api user; echo shell-ran'")
    assert "shell-ran" in body["for_llm"]
    assert REFUSED not in body["for_llm"]


def test_the_gate_fails_closed_when_the_registry_is_unavailable(
    member_a, restricted_gh, workspace, tenant_a, monkeypatch
):
    def unavailable(tenant):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(SecureCLIBinary.objects, "for_tenant", unavailable)

    for command in ("echo hello > hello.txt", "gh api user", "sh -c 'gh api user'"):
        body = run(member_a, command)
        assert body["is_error"] is True
        assert body["for_llm"] == GATE_UNAVAILABLE
    assert not (workspace / "hello.txt").exists()
    assert not ran(workspace)


def test_plain_commands_still_run_with_clis_registered(member_a, restricted_gh, workspace):
    body = run(member_a, "echo plain > plain.txt && cat plain.txt")
    assert body["is_error"] is False
    assert "plain" in body["for_llm"]


def test_unreadable_user_credentials_fail_closed(member_a, restricted_gh, agent, workspace, tenant_a):
    from django.db import connection

    system = Actor.system(tenant_a)
    services.grant_set(actor=system, binary=restricted_gh, agent=agent)
    services.credential_set(actor=system, binary=restricted_gh, user_id="u1", env={"GH_TOKEN": "user-tok"})
    with connection.cursor() as cursor:
        cursor.execute("UPDATE secure_cli_securecliusercredential SET env_encrypted = 'not a ciphertext'")

    refused = run(member_a, "gh api user", user_id="u1")
    other_user = run(member_a, "gh api user", user_id="u2")

    assert refused["for_llm"] == GATE_UNAVAILABLE
    assert other_user["is_error"] is False


def test_the_lookup_leaves_the_statement_timeout_as_it_was(member_a, restricted_gh, workspace):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        before = cursor.fetchone()[0]
    run(member_a, "gh api user")
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == before
