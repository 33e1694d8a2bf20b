"""The credentialed CLIs API: binaries (from scratch and from a preset), grants, users' credentials and
the administrators' test run. Secrets are write-only: no answer, audit row or live event carries a
value, only variable names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.realtime import events
from apps.secure_cli.models import SecureCLIBinary
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.personas import error
from tests.api.tenant_state import tenant_state
from tests.secure_cli.support import GRANT_TOKEN, TOKEN, USER_TOKEN, fake_cli

pytestmark = pytest.mark.django_db

LIST = "/api/v1/secure-cli/"


@pytest.fixture
def agent(tenant_a: Tenant):
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def published(tenant_a: Tenant):
    """What is delivered on tenant A's ``secure_cli`` topic, in order."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "secure_cli"), channel)

    def read() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [events.public(layer.deserialize(bytes(row))["event"]) for row in rows]

    return read


def gh_body(path: Path) -> dict[str, Any]:
    return {"preset": "gh", "binary_path": str(path), "env": {"GH_TOKEN": TOKEN}}


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content
    for token in (TOKEN, GRANT_TOKEN, USER_TOKEN):
        assert token not in response.content.decode()
    return response.json() if response.content else None


def audit(tenant: Tenant) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.for_tenant(tenant).filter(verb__startswith="secure_cli.").order_by("created_at")
    )


def test_register_from_a_preset_change_and_delete_audited_without_secrets(
    admin_a, viewer_a, tenant_a, tmp_path, published
):
    path = fake_cli(tmp_path / "bin")

    created = ok(
        admin_a.post(LIST, gh_body(path), format="json"),
        201,
    )
    assert created["binary_name"] == "gh"
    assert created["preset"] == "gh"
    assert created["env"] == ["GH_TOKEN"]
    assert created["deny_verbose"] == ["--verbose", "-v"]
    assert (created["timeout_seconds"], created["tips"]) == (30, "Use --json flag for structured output")
    assert created["is_global"] is True
    listed = ok(viewer_a.get(LIST))
    assert [b["binary_name"] for b in listed["results"]] == ["gh"]
    changed = ok(
        admin_a.patch(
            f"{LIST}{created['id']}/",
            {"is_global": False, "tips": "Prefer --json", "env": {"GH_TOKEN": TOKEN, "GH_HOST": "gh.io"}},
            format="json",
        )
    )
    assert changed["env"] == ["GH_HOST", "GH_TOKEN"]
    assert changed["is_global"] is False
    assert ok(viewer_a.get(f"{LIST}{created['id']}/"))["tips"] == "Prefer --json"
    ok(admin_a.delete(f"{LIST}{created['id']}/"), 204)
    assert not SecureCLIBinary.objects.for_tenant(tenant_a).exists()

    rows = audit(tenant_a)
    assert [r.verb for r in rows] == [
        "secure_cli.binary.created",
        "secure_cli.binary.updated",
        "secure_cli.binary.deleted",
    ]
    assert rows[1].data["changed"] == ["env", "is_global", "tips"]
    assert [e["type"] for e in published()] == [r.verb for r in rows]
    shown = json.dumps([[r.data for r in rows], published()])
    assert TOKEN not in shown
    assert "GH_TOKEN" in shown


def test_presets_list_the_five_templates(viewer_a):
    presets = ok(viewer_a.get(f"{LIST}presets/"))
    assert [p["name"] for p in presets] == ["gh", "gcloud", "aws", "kubectl", "terraform"]
    aws = presets[2]
    assert [(v["name"], v["optional"]) for v in aws["env"]] == [
        ("AWS_ACCESS_KEY_ID", False),
        ("AWS_SECRET_ACCESS_KEY", False),
        ("AWS_DEFAULT_REGION", True),
    ]
    assert aws["deny_args"] == [r"iam\s+", r"organizations\s+", r"sts\s+assume", r"ec2\s+terminate"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"preset": "aws", "env": {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE"}}, "env"),
        ({"preset": "npm"}, "preset"),
        ({"env": {"X": "y"}}, "binary_name"),
        ({"binary_name": "sh"}, "binary_name"),
        ({"binary_name": "env"}, "binary_name"),
        ({"binary_name": "Bad Name"}, "binary_name"),
        ({"binary_name": "gh", "binary_path": "bin/gh"}, "binary_path"),
        ({"binary_name": "gh", "binary_path": "/bin/sh"}, "binary_path"),
        ({"binary_name": "gh", "binary_path": "/nonexistent/gh"}, "binary_path"),
        ({"binary_name": "gh", "deny_args": ["(unclosed"]}, "deny_args"),
        ({"binary_name": "gh", "deny_verbose": "-v"}, "deny_verbose"),
        ({"binary_name": "gh", "deny_args": ["x"] * 51}, "deny_args"),
        ({"binary_name": "gh", "env": {"LD_PRELOAD": "/tmp/x.so"}}, "env"),
        ({"binary_name": "gh", "env": {"PATH": "/tmp"}}, "env"),
        ({"binary_name": "gh", "env": {"1BAD": "x"}}, "env"),
        ({"binary_name": "gh", "env": {"GH_TOKEN": 7}}, "env"),
        ({"binary_name": "gh", "env": ["GH_TOKEN"]}, "env"),
        ({"binary_name": "gh", "timeout_seconds": 0}, "timeout_seconds"),
        ({"binary_name": "gh", "timeout_seconds": 3601}, "timeout_seconds"),
        ({"binary_name": "gh", "timeout_seconds": True}, "timeout_seconds"),
        ({"binary_name": "gh", "is_global": "yes"}, "is_global"),
        ({"binary_name": "gh", "tips": "x" * 4001}, "tips"),
        ({"binary_name": "gh", "secret": "x"}, "secret"),
        ({"binary_name": 7}, "binary_name"),
    ],
)
def test_invalid_registrations_are_refused_by_field(admin_a, tenant_a, body, field):
    before = tenant_state(tenant_a)
    envelope = error(admin_a.post(LIST, body, format="json"), 400, "invalid")
    assert field in envelope["details"], envelope
    assert tenant_state(tenant_a) == before


def test_a_name_in_use_is_409(admin_a, tenant_a):
    ok(admin_a.post(LIST, {"binary_name": "kubectl"}, format="json"), 201)
    before = tenant_state(tenant_a)
    same = {"preset": "kubectl", "env": {"KUBECONFIG": "/k"}}
    error(admin_a.post(LIST, same, format="json"), 409, "conflict")
    assert tenant_state(tenant_a) == before


def test_grants_and_user_credentials_are_write_only(admin_a, tenant_a, agent, published):
    binary = ok(admin_a.post(LIST, {"binary_name": "mycli", "env": {"MY_TOKEN": TOKEN}}, format="json"), 201)
    base = f"{LIST}{binary['id']}/"

    grant = ok(
        admin_a.put(
            f"{base}grants/bot/",
            {"deny_args": [r"drop\s+"], "timeout_seconds": 12, "env": {"MY_TOKEN": GRANT_TOKEN}},
            format="json",
        ),
        201,
    )
    assert grant["agent"] == "bot"
    assert grant["env"] == ["MY_TOKEN"]
    assert (grant["deny_args"], grant["deny_verbose"], grant["timeout_seconds"]) == ([r"drop\s+"], None, 12)
    # PUT replaces the grant; the environment left out is kept.
    again = ok(admin_a.put(f"{base}grants/bot/", {"enabled": False}, format="json"))
    assert (again["enabled"], again["deny_args"], again["env"]) == (False, None, ["MY_TOKEN"])
    assert ok(admin_a.get(f"{base}grants/"))[0]["agent"] == "bot"
    assert ok(admin_a.get(f"{base}grants/bot/"))["enabled"] is False
    error(admin_a.put(f"{base}grants/bot/", {"timeout_seconds": -1}, format="json"), 400, "invalid")
    error(admin_a.put(f"{base}grants/nobody/", {}, format="json"), 404, "not_found")

    mine = f"{base}credentials/u1/"
    credential = ok(admin_a.put(mine, {"env": {"MY_TOKEN": USER_TOKEN}}, format="json"), 201)
    assert (credential["user_id"], credential["env"]) == ("u1", ["MY_TOKEN"])
    assert ok(admin_a.put(mine, {"env": {"OTHER": USER_TOKEN}}, format="json"))["env"] == ["OTHER"]
    assert [c["user_id"] for c in ok(admin_a.get(f"{base}credentials/"))["results"]] == ["u1"]
    error(admin_a.put(f"{base}credentials/system/", {"env": {}}, format="json"), 400, "invalid")
    ok(admin_a.delete(f"{base}credentials/u1/"), 204)
    ok(admin_a.delete(f"{base}grants/bot/"), 204)
    error(admin_a.delete(f"{base}grants/bot/"), 404, "not_found")

    verbs = [r.verb for r in audit(tenant_a)]
    assert verbs == [
        "secure_cli.binary.created",
        "secure_cli.grant.created",
        "secure_cli.grant.updated",
        "secure_cli.credential.created",
        "secure_cli.credential.updated",
        "secure_cli.credential.deleted",
        "secure_cli.grant.deleted",
    ]
    shown = json.dumps([[r.data for r in audit(tenant_a)], published()])
    for token in (TOKEN, GRANT_TOKEN, USER_TOKEN):
        assert token not in shown


def test_the_test_run_shows_scrubbed_output_masked_command_and_decisions(admin_a, tenant_a, agent, tmp_path):
    path = fake_cli(tmp_path / "bin")
    binary = ok(
        admin_a.post(LIST, gh_body(path), format="json"),
        201,
    )
    url = f"{LIST}{binary['id']}/test"

    run = ok(admin_a.post(url, {"agent": "bot", "args": ["api", "user", f"--note={TOKEN}"]}, format="json"))
    blocked = ok(admin_a.post(url, {"agent": "bot", "args": ["repo", "delete", "x"]}, format="json"))
    piped = ok(admin_a.post(url, {"agent": "bot", "args": ["api", "x | y"]}, format="json"))

    assert run["ok"] is True
    assert run["exit_code"] == 0
    assert run["command"] == "gh api user --note=[REDACTED]"
    assert "value: [REDACTED]" in run["output"]
    steps = [(d["step"], d["outcome"]) for d in run["decision"]]
    assert steps == [
        ("lookup", "credentialed"),
        ("operators", "passed"),
        ("path", "passed"),
        ("deny_args", "passed"),
        ("deny_verbose", "passed"),
        ("env", "injected"),
        ("timeout", "set"),
        ("run", "finished"),
    ]
    assert run["decision"][5]["detail"] == "GH_TOKEN (binary)"
    assert blocked["ok"] is False
    assert blocked["decision"][-1] == {"step": "deny_args", "outcome": "refused", "detail": r"repo\s+delete"}
    assert r"Matched deny pattern: repo\s+delete" in blocked["output"]
    assert piped["ok"] is True  # an argument holding "|" is quoted, not an operator
    assert "arg=[x | y]" in piped["output"]
    rows = [r for r in audit(tenant_a) if r.verb == "secure_cli.binary.tested"]
    assert len(rows) == 3
    assert rows[0].data["command"] == "gh api user --note=[REDACTED]"
    assert "output" not in rows[0].data
    assert TOKEN not in json.dumps([r.data for r in rows])


def test_the_test_run_for_an_agent_without_access(admin_a, tenant_a, agent):
    binary = ok(admin_a.post(LIST, {"binary_name": "mycli", "is_global": False}, format="json"), 201)
    url = f"{LIST}{binary['id']}/test"

    refused = ok(admin_a.post(url, {"agent": "bot"}, format="json"))

    assert refused["ok"] is False
    assert refused["output"] == (
        'Binary "mycli" requires a secure CLI grant. Ask admin to grant access to this agent.'
    )
    error(admin_a.post(url, {"agent": "nobody"}, format="json"), 404, "not_found")
    error(admin_a.post(url, {"agent": "bot", "args": "api"}, format="json"), 400, "invalid")
    error(admin_a.post(url, {"agent": "bot", "args": ["x\x00"]}, format="json"), 400, "invalid")


def test_the_list_is_bounded_in_queries(viewer_a, tenant_a, django_assert_max_num_queries):
    from apps.secure_cli import services

    for index in range(5):
        services.binary_create(actor=Actor.system(tenant_a), binary_name=f"cli{index}", env={"T": TOKEN})
    with django_assert_max_num_queries(4):
        body = ok(viewer_a.get(LIST))
    assert len(body["results"]) == 5


def test_changes_reach_the_next_call(admin_a, member_a, tenant_a, agent, tmp_path):
    path = fake_cli(tmp_path / "bin")
    binary = ok(admin_a.post(LIST, {"binary_name": "gh", "binary_path": str(path)}, format="json"), 201)
    call = {"agent": "bot", "tool": "exec", "args": {"command": "gh api -v"}}

    first = member_a.post("/api/v1/runtime/execute", call, format="json").json()
    ok(admin_a.patch(f"{LIST}{binary['id']}/", {"deny_verbose": ["-v"]}, format="json"))
    second = member_a.post("/api/v1/runtime/execute", call, format="json").json()

    assert first["is_error"] is False
    assert second["for_llm"].startswith("[CREDENTIALED EXEC] Command blocked by security policy")


def test_tips_are_served_to_agents_with_their_tools(admin_a, member_a, tenant_a, agent):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    ok(admin_a.post(LIST, {"preset": "gh", "env": {"GH_TOKEN": TOKEN}}, format="json"), 201)
    kube = ok(
        admin_a.post(
            LIST, {"preset": "kubectl", "env": {"KUBECONFIG": "/etc/k"}, "is_global": False}, format="json"
        ),
        201,
    )
    ok(admin_a.put(f"{LIST}{kube['id']}/grants/bot/", {"tips": "Namespace: prod only."}, format="json"), 201)

    bot = ok(member_a.get("/api/v1/agents/bot/tools"))["guidance"]
    other = ok(member_a.get("/api/v1/agents/other/tools"))["guidance"]

    assert bot.startswith("## Credentialed CLIs")
    assert "### gh\nUse --json flag for structured output" in bot
    assert "### kubectl\nNamespace: prod only." in bot
    assert "### gh" in other
    assert "kubectl" not in other
    assert TOKEN not in bot


def test_no_guidance_without_credentialed_clis(member_a, agent):
    assert ok(member_a.get("/api/v1/agents/bot/tools"))["guidance"] == ""
