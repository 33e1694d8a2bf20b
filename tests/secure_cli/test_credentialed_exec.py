"""Credentialed exec through the API agent loops use (POST /api/v1/runtime/execute), with real
processes: a fake ``gh`` prints its arguments and environment, its token included.

SPEC B §5.4's cases: operators outside quotes refused and quoted ones passed on as arguments, ``-vv``
blocked and ``--version`` not, a spoofed ``./gh`` refused, the token scrubbed from the output, the
``ToolCall`` record, the audit log, the logs and every API answer, and the database holding only
ciphertext."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent, ToolCall
from apps.secure_cli import services
from apps.secure_cli.models import SecureCLIBinary
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.toolkit.workspace import workspace_for
from tests.secure_cli.support import GRANT_TOKEN, TOKEN, USER_TOKEN, fake_cli, ran

pytestmark = pytest.mark.django_db

PREFIX = "[CREDENTIALED EXEC]"


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def workspace(tenant_a: Tenant, agent: Agent) -> Path:
    return workspace_for(tenant=tenant_a, agent=agent, user_id="")


@pytest.fixture
def gh(tmp_path: Path, tenant_a: Tenant, agent: Agent) -> SecureCLIBinary:
    """The gh preset (deny lists, tips) on a fake gh outside every PATH, with a token."""
    path = fake_cli(tmp_path / "bin")
    return services.binary_create(
        actor=Actor.system(tenant_a), preset="gh", binary_path=str(path), env={"GH_TOKEN": TOKEN}
    )


def run(client, command: str, agent: str = "bot", **context) -> dict:
    body = {"agent": agent, "tool": "exec", "args": {"command": command}}
    if context:
        body["context"] = context
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    assert TOKEN not in response.content.decode()
    result: dict = response.json()
    return result


def test_a_cli_runs_without_a_shell_and_its_token_never_leaves(
    member_a, admin_a, gh, workspace, tenant_a, caplog
):
    caplog.set_level(logging.DEBUG)

    body = run(member_a, "gh api user --jq .login")

    assert body["is_error"] is False, body
    out = body["for_llm"]
    assert "argc=4" in out
    assert "arg=[api]\narg=[user]\narg=[--jq]\narg=[.login]" in out
    assert "value: [REDACTED]" in out
    assert f"token length {len(TOKEN)}" in out  # the real token reached the program
    names = {line[4:] for line in out.splitlines() if line.startswith("env:")}
    assert {"PATH", "HOME", "LANG", "USER", "GH_TOKEN"} <= names
    assert names <= {"PATH", "HOME", "LANG", "USER", "GH_TOKEN", "PWD", "SHLVL", "_"}
    assert "user: toolgate" in out
    assert "home: /workspace" in out  # the workspace, as the jail shows it
    assert ran(workspace)
    # Nowhere else either: the record, the audit log, the logs, the API's answers.
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert row.decision == "allowed"
    assert row.status == "ok"
    assert TOKEN not in json.dumps(
        {f.name: str(getattr(row, f.name)) for f in ToolCall._meta.fields}, default=str
    )
    audit = list(AuditEvent.objects.for_tenant(tenant_a).values())
    assert audit
    assert TOKEN not in json.dumps(audit, default=str)
    assert TOKEN not in caplog.text
    for url in ("/api/v1/tool-calls/", f"/api/v1/tool-calls/{body['call_id']}/", "/api/v1/audit/events/"):
        response = admin_a.get(url)
        assert response.status_code == 200
        assert TOKEN not in response.content.decode()


def test_a_token_the_agent_writes_into_the_arguments_is_scrubbed_from_the_record(member_a, gh, tenant_a):
    body = run(member_a, f"gh api user -f note={TOKEN}")
    assert "arg=[note=[REDACTED]]" in body["for_llm"]
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert TOKEN not in json.dumps(row.args)


def test_the_database_holds_only_ciphertext(gh, agent, tenant_a):
    system = Actor.system(tenant_a)
    services.grant_set(actor=system, binary=gh, agent=agent, env={"GH_TOKEN": GRANT_TOKEN})
    services.credential_set(actor=system, binary=gh, user_id="u1", env={"GH_TOKEN": USER_TOKEN})
    with connection.cursor() as cursor:
        stored = []
        for table in ("secureclibinary", "securecliagentgrant", "securecliusercredential"):
            cursor.execute(f"SELECT env_encrypted FROM secure_cli_{table}")  # noqa: S608  # fixed names
            stored += [row[0] for row in cursor.fetchall()]
    assert len(stored) == 3
    for raw in stored:
        assert raw
        assert "GH_TOKEN" not in raw
        assert not any(token in raw for token in (TOKEN, GRANT_TOKEN, USER_TOKEN))


@pytest.mark.parametrize(
    ("command", "argument"),
    [
        ("gh api repos --jq '.[0] | .name'", "arg=[.[0] | .name]"),
        ("gh issue create --body 'a; b && c > d'", "arg=[a; b && c > d]"),
        ('gh api "x & y $(whoami) `id`"', "arg=[x & y $(whoami) `id`]"),
    ],
)
def test_operators_inside_quotes_are_plain_arguments(member_a, gh, command, argument):
    body = run(member_a, command)
    assert body["is_error"] is False, body
    assert argument in body["for_llm"]


@pytest.mark.parametrize(
    ("command", "detected"),
    [
        ("gh api foo | jq .", "|"),
        ("gh --jq '.x' | cat", "|"),
        ("gh api x; id", ";"),
        ("gh api x && id", "&"),
        ("gh api $(id)", "$("),
        ("gh api `id`", "`"),
        ("gh api x > out.txt", ">"),
        ("gh api < /etc/passwd", "<"),
        ("gh api ${HOME}", "${"),
        ('gh api \\"foo | bar\\"', "|"),
        ("gh api x\nid", "\n"),
    ],
)
def test_operators_outside_quotes_are_refused_before_anything_runs(
    member_a, gh, workspace, command, detected
):
    body = run(member_a, command)
    assert body["is_error"] is True
    assert body["for_llm"].startswith(f"{PREFIX} Shell operators not supported. Detected: ")
    assert detected in body["for_llm"]
    assert not ran(workspace)


@pytest.mark.parametrize("flag", ["-v", "-vv", "-vvv", "--verbose", "--verbose=true", "-v=1"])
def test_verbose_flags_are_blocked(member_a, gh, workspace, flag):
    body = run(member_a, f"gh api user {flag}")
    assert body["is_error"] is True
    assert body["for_llm"].startswith(f"{PREFIX} Command blocked by security policy")
    assert "Matched deny pattern: " in body["for_llm"]
    assert not ran(workspace)


@pytest.mark.parametrize("flag", ["--version", "version", "--help"])
def test_flags_that_only_start_alike_are_not_blocked(member_a, gh, workspace, flag):
    body = run(member_a, f"gh {flag}")
    assert body["is_error"] is False, body
    assert f"arg=[{flag}]" in body["for_llm"]
    assert ran(workspace)


@pytest.mark.parametrize(
    ("command", "pattern"),
    [
        ("gh repo delete me/app --yes", r"repo\s+delete"),
        ("gh auth    token", r"auth\s+"),
        ("gh secret set X", r"secret\s+"),
        ("gh ssh-key list", "ssh-key"),
    ],
)
def test_deny_args_match_the_joined_arguments(member_a, gh, workspace, command, pattern):
    body = run(member_a, command)
    assert body["is_error"] is True
    assert body["for_llm"].endswith(f"Matched deny pattern: {pattern}")
    assert not ran(workspace)
    assert run(member_a, "gh repo view me/app")["is_error"] is False


def test_a_deny_pattern_that_runs_away_refuses_the_command_in_time(member_a, gh, workspace, tenant_a):
    services.binary_update(actor=Actor.system(tenant_a), binary=gh, deny_args=["(a|aa)+$"])
    started = time.monotonic()
    body = run(member_a, "gh " + "a" * 40 + "!")
    assert time.monotonic() - started < 5
    assert body["is_error"] is True
    assert body["for_llm"].endswith("Matched deny pattern: (a|aa)+$")
    assert not ran(workspace)


def test_a_spoofed_gh_in_the_workspace_is_refused(member_a, gh, workspace, tmp_path):
    fake_cli(workspace, "gh", extra=': > "$HOME/spoof-ran"')
    elsewhere = fake_cli(tmp_path / "elsewhere", "gh", extra=': > "$HOME/spoof-ran"')

    for command in ("./gh api user", f"{workspace}/gh api user", f"{elsewhere} api user"):
        body = run(member_a, command)
        assert body["is_error"] is True, command
        assert body["for_llm"].startswith(f"{PREFIX} binary path mismatch"), body
        assert not (workspace / "spoof-ran").exists()
    # The registered program itself, named by its own path, is fine.
    assert run(member_a, f"{gh.binary_path} api user")["is_error"] is False


def test_without_a_configured_path_only_the_safe_path_is_searched(member_a, agent, workspace, tenant_a):
    services.binary_create(actor=Actor.system(tenant_a), binary_name="toolgate-absent-cli", env={"T": TOKEN})
    fake_cli(workspace, "toolgate-absent-cli")

    body = run(member_a, "toolgate-absent-cli api")

    assert body["is_error"] is True
    assert "is not installed on this server" in body["for_llm"]
    assert not ran(workspace, "toolgate-absent-cli")


def test_exit_codes_and_the_timeout(member_a, agent, workspace, tenant_a, tmp_path):
    system = Actor.system(tenant_a)
    failing = fake_cli(tmp_path / "a", "failing", extra="exit 3")
    services.binary_create(actor=system, binary_name="failing", binary_path=str(failing))
    slow = fake_cli(tmp_path / "b", "slow", extra="sleep 30")
    services.binary_create(actor=system, binary_name="slow", binary_path=str(slow), timeout_seconds=1)

    failed = run(member_a, "failing now")
    timed_out = run(member_a, "slow now")

    assert failed["is_error"] is True
    assert failed["for_llm"].endswith("[exit code: 3]")
    assert timed_out["is_error"] is True
    assert "[command timed out after 1s and was killed with all its processes" in timed_out["for_llm"]
    assert timed_out["duration_ms"] < 10_000


def test_grant_and_user_environments_override_the_binary_s(member_a, gh, agent, tenant_a):
    system = Actor.system(tenant_a)
    tenant_services.agent_create(actor=system, key="other", name="Other")
    services.grant_set(
        actor=system,
        binary=gh,
        agent=agent,
        env={"GH_TOKEN": GRANT_TOKEN},
        deny_verbose=[],
        timeout_seconds=5,
    )
    services.credential_set(actor=system, binary=gh, user_id="u1", env={"GH_TOKEN": USER_TOKEN})

    as_user = run(member_a, "gh api", user_id="u1")
    as_agent = run(member_a, "gh api")
    as_other = run(member_a, "gh api", agent="other", user_id="u1")
    verbose_for_bot = run(member_a, "gh api -v")
    verbose_for_other = run(member_a, "gh api -v", agent="other")

    assert f"token length {len(USER_TOKEN)}" in as_user["for_llm"]
    assert f"token length {len(GRANT_TOKEN)}" in as_agent["for_llm"]
    # The user's credentials replace the binary's for any agent acting for that user.
    assert f"token length {len(USER_TOKEN)}" in as_other["for_llm"]
    for body in (as_user, as_agent, as_other):
        assert "value: [REDACTED]" in body["for_llm"]
        assert GRANT_TOKEN not in json.dumps(body)
        assert USER_TOKEN not in json.dumps(body)
    assert verbose_for_bot["is_error"] is False  # the grant's empty deny_verbose replaces the preset's
    assert verbose_for_other["for_llm"].startswith(f"{PREFIX} Command blocked by security policy")


def test_a_disabled_binary_or_grant_is_not_credentialed(member_a, gh, agent, workspace, tenant_a):
    system = Actor.system(tenant_a)
    services.grant_set(actor=system, binary=gh, agent=agent, enabled=False)
    body = run(member_a, "gh api")
    assert not ran(workspace)
    assert "credentialed" not in json.dumps(body)

    services.grant_delete(actor=system, grant=gh.grants.get())
    services.binary_update(actor=system, binary=gh, enabled=False)
    run(member_a, "gh api")
    assert not ran(workspace)


def _exec_approval(tenant: Tenant, **values: Any) -> None:
    from apps.policy import services as policy_services

    target = policy_services.target("tenant")
    saved = policy_services.current(tenant, target)
    document = {**(saved.document if saved is not None else {}), "execApproval": values}
    policy_services.policy_save(Actor.system(tenant), target, document)
    tenant.refresh_from_db()


def test_quoted_arguments_ask_for_no_approval(member_a, gh, workspace, tenant_a):
    from apps.policy.approval_models import PendingApproval

    # The approval looks at the program alone: allowlisted, it asks no one, whatever its arguments say
    # (as a shell command, "pip install" would ask).
    _exec_approval(tenant_a, security="allowlist", ask="on-miss", allowlist=["gh"])

    body = run(member_a, "gh issue create --body 'run pip install requests first'")

    assert body["is_error"] is False, body
    assert "arg=[run pip install requests first]" in body["for_llm"]
    assert not PendingApproval.objects.for_tenant(tenant_a).exists()


def test_ask_always_still_asks_a_human_for_a_credentialed_cli(member_a, gh, workspace, tenant_a):
    from apps.policy.approval_models import PendingApproval

    _exec_approval(tenant_a, security="full", ask="always")
    response = member_a.post(
        "/api/v1/runtime/execute",
        {"agent": "bot", "tool": "exec", "args": {"command": "gh api user"}, "context": {"wait": False}},
        format="json",
    )
    assert response.status_code == 202, response.content
    pending = PendingApproval.objects.for_tenant(tenant_a).get()
    assert pending.command == "gh api user"  # the human sees the whole command
    assert not ran(workspace)


def test_exec_security_deny_still_refuses_credentialed_clis(member_a, gh, workspace, tenant_a):
    _exec_approval(tenant_a, security="deny")
    body = run(member_a, "gh api user")
    assert body["is_error"] is True
    assert "security: deny" in body["for_llm"]
    assert not ran(workspace)


# --- the credentialed_exec tool -------------------------------------------------------------------------


def tool(client, binary: Any, args: Any = None, **extra: Any) -> dict:
    payload: dict[str, Any] = {"binary": binary, **extra}
    if args is not None:
        payload["args"] = args
    response = client.post(
        "/api/v1/runtime/execute",
        {"agent": "bot", "tool": "credentialed_exec", "args": payload},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert TOKEN not in response.content.decode()
    result: dict = response.json()
    return result


def test_credentialed_exec_runs_a_registered_cli_with_arguments_never_interpreted(member_a, gh, workspace):
    body = tool(member_a, "gh", ["api", "user", "--jq", ".[0] | .name; rm -rf /", "$(whoami)"])
    assert body["is_error"] is False, body
    out = body["for_llm"]
    assert "argc=5" in out
    assert "arg=[.[0] | .name; rm -rf /]\narg=[$(whoami)]" in out  # plain arguments: no shell ran them
    assert "value: [REDACTED]" in out


def test_credentialed_exec_keeps_the_clis_rules(member_a, gh, workspace):
    blocked = tool(member_a, "gh", ["auth", "token"])
    assert blocked["is_error"] is True
    assert "Command blocked by security policy" in blocked["for_llm"]
    assert not ran(workspace)


@pytest.mark.parametrize(
    ("binary", "args", "expected"),
    [
        ("curl", ["https://example.com"], "curl is not a registered CLI this agent may use"),
        ("./gh", [], "without a path"),
        ("gh api", [], "without a path, spaces"),
        ("gh", "api user", "is not of type 'array'"),
        ("gh", ["x\x00y"], "contain a NUL character"),
    ],
)
def test_credentialed_exec_refuses_what_is_not_a_registered_cli_call(
    member_a, gh, workspace, binary, args, expected
):
    body = tool(member_a, binary, args)
    assert body["is_error"] is True
    assert expected in body["for_llm"]
    assert not ran(workspace)
