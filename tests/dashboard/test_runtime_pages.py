"""The runtime pages of the dashboard (Tools, Runtime settings, Tool calls), through the Django test client.

Personas: an owner, admin, member and viewer of tenant A (logged-in users); tenant B's tool calls must never
show up for them.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.accounts import services
from apps.audit.models import AuditEvent, ToolCall
from apps.policy import services as policy_services
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from apps.toolkit.registry import implemented
from apps.tools.catalog import ALIASES, CATALOG, PROFILES
from tests import factories
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.ADMIN))


@pytest.fixture
def member(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.MEMBER))


@pytest.fixture
def viewer(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.VIEWER))


def make_agent(tenant: Tenant, key: str = "bot", **fields) -> Agent:  # type: ignore[no-untyped-def]
    return services.agent_create(actor=Actor.system(tenant), key=key, name=key, **fields)


def make_call(tenant: Tenant, agent: Agent | None = None, **fields) -> ToolCall:  # type: ignore[no-untyped-def]
    """A tool-call record as the pipeline writes it (the pipeline itself is tested in tests/runtime)."""
    values = {
        "agent": agent,
        "agent_key": agent.key if agent else "bot",
        "tool": "datetime",
        "resolved_tool": "datetime",
        "args": {},
        "decision": ToolCall.Decision.ALLOWED,
        "status": ToolCall.Status.OK,
        "duration_ms": 1.25,
        "for_llm_bytes": 40,
        "for_user_bytes": 0,
        "session_key": "s-1",
        "origin": "user",
        "actor_kind": "api_key",
        "actor_id": "k",
        **fields,
    }
    return ToolCall.objects.create(tenant=tenant, **values)


def audit_count(tenant: Tenant) -> int:
    return AuditEvent.objects.for_tenant(tenant).count()


def fresh(tenant: Tenant) -> Tenant:
    return Tenant.objects.get(pk=tenant.pk)


# The complete runtime form as an admin would submit it unchanged (defaults).
DEFAULT_FORM = {"sandbox_mode": "jail", "tools": "{}"}


def save_policy(tenant: Tenant, document: dict, agent: Agent | None = None) -> None:  # type: ignore[type-arg]
    target = policy_services.target("agent" if agent else "tenant", agent=agent)
    policy_services.policy_save(Actor.system(tenant), target, document)


# --- roles ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url_name", "lowest", "refused"),
    [
        ("dashboard:tools", "viewer", None),
        ("dashboard:runtime_settings", "viewer", None),
        ("dashboard:tool_calls", "member", "viewer"),
    ],
)
def test_each_page_renders_for_its_roles_and_is_refused_below(request, url_name, lowest, refused):
    order = ["viewer", "member", "admin", "owner"]
    for persona in order[order.index(lowest) :]:
        response = request.getfixturevalue(persona).get(reverse(url_name))
        assert response.status_code == 200, (persona, url_name)
        assert 'href="/static/css/dashboard.css"' in response.content.decode()
    if refused:
        response = request.getfixturevalue(refused).get(reverse(url_name))
        assert response.status_code == 403
        assert f"your role is {refused}" in response.content.decode()


def test_navigation_shows_the_new_sections_by_role(viewer, member, owner):
    def sections(client: Client) -> list[str]:
        body = client.get(reverse("dashboard:home")).content.decode()
        return re.findall(r">([^<]+)</a>", body[body.index('<nav class="sidenav"') : body.index("</nav>")])

    assert sections(viewer) == [
        "Overview",
        "Agents",
        "Tools",
        "Policy",
        "Runtime settings",
        "Teams",
        "MCP",
        "Custom tools",
        "Credentialed CLIs",
        "Members",
        "Quotas",
    ]
    assert sections(member) == [
        "Overview",
        "Agents",
        "Tools",
        "Policy",
        "Runtime settings",
        "Teams",
        "MCP",
        "Custom tools",
        "Credentialed CLIs",
        "Runs",
        "Scheduled jobs",
        "Tool calls",
        "Members",
        "Quotas",
    ]
    assert "Tool calls" in sections(owner)
    tool_calls = owner.get(reverse("dashboard:tool_calls")).content.decode()
    nav = tool_calls[tool_calls.index('<nav class="sidenav"') : tool_calls.index("</nav>")]
    assert re.findall(r'aria-current="page">([^<]+)<', nav) == ["Tool calls"]


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_only_admins_change_runtime_settings(request, persona, tenant_a):
    client = request.getfixturevalue(persona)
    services.tenant_update(actor=Actor.system(tenant_a), changes={"settings": {"sandbox": {"mode": "all"}}})
    before = (fresh(tenant_a).settings, audit_count(tenant_a))

    page = client.get(reverse("dashboard:runtime_settings")).content.decode()
    edit = client.post(reverse("dashboard:runtime_settings_edit"), {**DEFAULT_FORM, "sandbox_mode": "jail"})
    reset = client.post(reverse("dashboard:runtime_settings_reset"), {"key": "sandbox"})

    assert "Only admins can change these settings." in page
    assert "Save settings" not in page
    assert "Reset to default" not in page
    assert (edit.status_code, reset.status_code) == (403, 403)
    assert (fresh(tenant_a).settings, audit_count(tenant_a)) == before


def test_the_edit_and_reset_urls_take_only_post(admin):
    assert admin.get(reverse("dashboard:runtime_settings_edit")).status_code == 405
    assert admin.get(reverse("dashboard:runtime_settings_reset")).status_code == 405
    assert admin.post(reverse("dashboard:runtime_settings")).status_code == 405
    assert admin.post(reverse("dashboard:tool_calls")).status_code == 405


# --- tools ------------------------------------------------------------------------------------------


def test_the_tools_page_lists_every_catalog_tool_and_marks_unavailable_ones(viewer):
    body = viewer.get(reverse("dashboard:tools")).content.decode()

    listed = re.findall(r'<li class="tool[^"]*" id="tool-([^"]+)" data-tool=', body)
    assert sorted(listed) == sorted(CATALOG)
    done = implemented()
    assert "datetime" in done
    for name, spec in CATALOG.items():
        item = body[body.index(f'id="tool-{name}"') :]
        item = item[: item.index("</li>")]
        assert spec.description.replace("'", "&#x27;") in item, name
        if name in done:
            assert 'class="availability available"' in item, name
        else:
            reason = spec.unavailable_reason or "not available"
            assert f"unavailable: {reason}" in item, name
            assert (
                "is-unavailable"
                in body[body.index(f'id="tool-{name}"') - 40 : body.index(f'id="tool-{name}"')]
            )


def test_the_tools_page_shows_parameters_profiles_and_aliases(viewer):
    body = viewer.get(reverse("dashboard:tools")).content.decode()

    read_file = body[body.index('id="tool-read_file"') :]
    read_file = read_file[: read_file.index("</li>")]
    assert "<summary>Parameters (3)</summary>" in read_file
    assert re.search(
        r"<code>path</code></td>\s*<td[^>]*>string</td>\s*<td><strong>required</strong>", read_file
    )
    assert re.search(
        r"<code>limit</code></td>\s*<td[^>]*>integer</td>\s*<td><span class=\"muted\">optional", read_file
    )
    assert "How many lines to read (default 2000). From 1 to 10000." in read_file
    assert "<summary>JSON Schema</summary>" in read_file
    assert "&quot;additionalProperties&quot;: false" in read_file
    assert 'id="group-fs"' in body
    assert "<code>group:toolgate</code> is the composite of all" in body
    assert "<code>group:goclaw</code> is accepted as its alias" in body
    for profile in PROFILES:
        assert f"<td><code>{profile}</code></td>" in body
    assert "every tool (no restriction)" in body
    for alias, target in ALIASES.items():
        assert f'<tr><td><code>{alias}</code></td><td><a href="#tool-{target}">' in body


# --- runtime settings -------------------------------------------------------------------------------


def source_of(body: str, key: str, kind: str = "setting") -> str:
    match = re.search(rf'data-{kind}="{key}" data-source="(\w+)"', body)
    assert match, key
    return match.group(1)


def row_of(body: str, key: str, kind: str = "setting") -> str:
    row = body[body.index(f'data-{kind}="{key}"') :]
    return row[: row.index("</tr>")]


def test_the_settings_page_marks_defaults_and_tenant_values(viewer, tenant_a):
    services.tenant_update(actor=Actor.system(tenant_a), changes={"settings": {"sandbox": {"mode": "all"}}})

    body = viewer.get(reverse("dashboard:runtime_settings")).content.decode()

    assert source_of(body, "sandbox") == "tenant"
    assert source_of(body, "tools") == "default"
    assert body.count('<span class="source source-tenant">set for this tenant</span>') == 1
    assert "mode: all" in row_of(body, "sandbox")


def test_the_settings_page_shows_the_policy_values_read_only(viewer, admin, tenant_a):
    save_policy(
        tenant_a,
        {"profile": "coding", "rate_limit_per_hour": 20, "shellDenyGroups": {"package_install": False}},
    )

    for client in (viewer, admin):
        body = client.get(reverse("dashboard:runtime_settings")).content.decode()
        assert source_of(body, "profile", "policy") == "tenant"
        assert source_of(body, "rate_limit_per_hour", "policy") == "tenant"
        assert source_of(body, "shellDenyGroups", "policy") == "tenant"
        for key in ("scrub_credentials", "execApproval", "originDeny"):
            assert source_of(body, key, "policy") == "default", key
        assert "coding" in row_of(body, "profile", "policy")
        assert "20 calls per session per hour" in row_of(body, "rate_limit_per_hour", "policy")
        assert "allowed: package_install" in row_of(body, "shellDenyGroups", "policy")
        assert "security: full · ask: off" in row_of(body, "execApproval", "policy")
        assert "on" in row_of(body, "scrub_credentials", "policy")
        assert body.count("set in the tenant policy") == 3
        # Read-only: no reset buttons for policy rows, and the form has no policy fields.
        assert "Reset to default<span" not in body[body.index("policy-title") : body.index("effective-title")]
        assert 'name="tool_profile"' not in body
        assert 'name="rate_limit_per_hour"' not in body


def test_admin_saves_runtime_settings_and_it_is_audited(admin, tenant_a):
    before = audit_count(tenant_a)
    form = {**DEFAULT_FORM, "sandbox_mode": "docker", "tools": '{"exec": {"timeout": 120}}'}

    response = admin.post(reverse("dashboard:runtime_settings_edit"), form)

    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:runtime_settings")
    assert fresh(tenant_a).settings == {"sandbox": {"mode": "docker"}, "tools": {"exec": {"timeout": 120}}}
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="tenant.updated")
    assert event.actor_kind == "user"
    assert event.data["changes"]["settings.sandbox"] == {"from": None, "to": {"mode": "docker"}}
    assert audit_count(tenant_a) == before + 1

    page = admin.get(reverse("dashboard:runtime_settings")).content.decode()
    assert "Runtime settings saved (sandbox, per-tool settings)." in page
    assert source_of(page, "sandbox") == "tenant"
    assert source_of(page, "tools") == "tenant"
    # The form shows what is saved.
    assert re.search(r'<option value="docker" selected>', page)
    assert "&quot;timeout&quot;: 120" in page


def test_an_unchanged_form_changes_nothing(admin, tenant_a):
    before = audit_count(tenant_a)

    response = admin.post(reverse("dashboard:runtime_settings_edit"), DEFAULT_FORM, follow=True)

    assert "Nothing changed." in response.content.decode()
    assert fresh(tenant_a).settings == {}
    assert audit_count(tenant_a) == before


def test_policy_fields_posted_to_the_settings_form_change_nothing(admin, tenant_a):
    before = (tenant_state(tenant_a), audit_count(tenant_a))

    response = admin.post(
        reverse("dashboard:runtime_settings_edit"),
        {**DEFAULT_FORM, "tool_profile": "minimal", "rate_limit_per_hour": "1", "scrub_credentials": ""},
        follow=True,
    )

    assert "Nothing changed." in response.content.decode()
    assert (tenant_state(tenant_a), audit_count(tenant_a)) == before


def test_a_partial_value_set_through_the_api_is_not_rewritten_by_an_untouched_form(admin, tenant_a):
    services.tenant_update(
        actor=Actor.system(tenant_a), changes={"settings": {"sandbox": {"memory_mb": 1024}}}
    )
    before = audit_count(tenant_a)

    admin.post(reverse("dashboard:runtime_settings_edit"), DEFAULT_FORM)

    assert fresh(tenant_a).settings == {"sandbox": {"memory_mb": 1024}}
    assert audit_count(tenant_a) == before


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"sandbox_mode": "everything"}, "sandbox_mode", "Select a valid choice."),
        ({"sandbox_mode": "host"}, "sandbox_mode", "Select a valid choice."),  # not allowed here
        ({"tools": '{"exec": {"timeout": 1},}'}, "tools", "Not valid JSON"),
        ({"tools": "[1, 2]"}, "tools", "Must be a JSON object"),
        ({"tools": '{"no_such_tool": {}}'}, "tools", "Unknown tools: no_such_tool."),
        ({"tools": '{"exec": 5}'}, "tools", "Must be an object of tool name"),
        (
            {"tools": '{"exec": {"deny_groups": {"package_install": false}}}'},
            "tools",
            "tools.exec.deny_groups is now the policy&#x27;s shellDenyGroups: PUT /api/v1/policy/tenant/",
        ),
    ],
)
def test_bad_settings_are_shown_inline_and_nothing_changes(admin, tenant_a, change, field, message):
    before = audit_count(tenant_a)

    response = admin.post(
        reverse("dashboard:runtime_settings_edit"), {**DEFAULT_FORM, "sandbox_mode": "docker", **change}
    )

    assert response.status_code == 200
    body = response.content.decode()
    errors = re.search(rf'<ul class="errorlist" id="id_{field}_error">(.*?)</ul>', body, re.S)
    assert errors, body
    assert message in errors.group(1)
    assert fresh(tenant_a).settings == {}
    assert audit_count(tenant_a) == before


def test_reset_to_default_removes_one_key(admin, tenant_a):
    services.tenant_update(
        actor=Actor.system(tenant_a),
        changes={
            "settings": {"sandbox": {"mode": "all"}, "tools": {"exec": {"timeout": 5}}, "theme": "dark"}
        },
    )
    before = audit_count(tenant_a)
    page = admin.get(reverse("dashboard:runtime_settings")).content.decode()
    assert page.count("Reset to default<span") == 2

    response = admin.post(reverse("dashboard:runtime_settings_reset"), {"key": "sandbox"})

    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:runtime_settings") + "#setting-sandbox"
    assert fresh(tenant_a).settings == {"tools": {"exec": {"timeout": 5}}, "theme": "dark"}
    event = AuditEvent.objects.for_tenant(tenant_a).filter(verb="tenant.updated").latest("created_at")
    assert event.data["changes"] == {"settings.sandbox": {"from": {"mode": "all"}, "to": None}}
    assert audit_count(tenant_a) == before + 1
    page = admin.get(reverse("dashboard:runtime_settings")).content.decode()
    assert "Sandbox reset to its default." in page
    assert source_of(page, "sandbox") == "default"


def test_resetting_a_default_or_unknown_key_changes_nothing(admin, tenant_a):
    before = audit_count(tenant_a)

    default = admin.post(reverse("dashboard:runtime_settings_reset"), {"key": "sandbox"}, follow=True)
    unknown = admin.post(reverse("dashboard:runtime_settings_reset"), {"key": "theme"}, follow=True)
    moved = admin.post(reverse("dashboard:runtime_settings_reset"), {"key": "tool_profile"}, follow=True)

    assert "Sandbox already uses its default." in default.content.decode()
    assert "Unknown runtime setting." in unknown.content.decode()
    assert "Unknown runtime setting." in moved.content.decode()
    assert fresh(tenant_a).settings == {}
    assert audit_count(tenant_a) == before


def test_the_agent_page_shows_its_effective_runtime_settings_and_policy(admin, tenant_a):
    services.tenant_update(actor=Actor.system(tenant_a), changes={"settings": {"sandbox": {"mode": "all"}}})
    agent = make_agent(tenant_a, "bot", settings={"tools": {"exec": {"timeout": 5}}})
    other = make_agent(tenant_a, "other")
    save_policy(tenant_a, {"profile": "coding", "execApproval": {"security": "allowlist"}})
    save_policy(tenant_a, {"execApproval": {"ask": "always"}}, agent=agent)
    save_policy(tenant_a, {"shellDenyGroups": {"env_dump": False}}, agent=other)

    body = admin.get(reverse("dashboard:agent_edit", args=["bot"])).content.decode()

    section = body[body.index("Runtime settings in effect") :]
    assert source_of(section, "sandbox") == "tenant"
    assert source_of(section, "tools") == "agent"
    assert "agent sets: exec" in section
    assert source_of(section, "profile", "policy") == "tenant"
    assert source_of(section, "execApproval", "policy") == "agent"
    assert source_of(section, "shellDenyGroups", "policy") == "default"  # the other agent's stays its own
    assert "security: allowlist · ask: always" in row_of(section, "execApproval", "policy")
    assert "coding" in row_of(section, "profile", "policy")
    assert "set in this agent&#x27;s policy" in section
    assert "Reset to default" not in section


# --- tool calls -------------------------------------------------------------------------------------


def rows(body: str) -> list[str]:
    return re.findall(r'<tr data-id="([0-9a-f-]+)">', body)


def test_tool_calls_show_their_fields(member, tenant_a):
    agent = make_agent(tenant_a, "bot")
    call = make_call(
        tenant_a,
        agent,
        tool="bash",
        resolved_tool="exec",
        decision=ToolCall.Decision.SAFEGUARD,
        status=ToolCall.Status.ERROR,
        error="blocked: <rm -rf />",
        args={"command": "rm -rf /", "token": "[REDACTED]"},
        duration_ms=2345.0,
        for_llm_bytes=2048,
        session_key="chat-42",
        origin="comm",
    )

    body = member.get(reverse("dashboard:tool_calls")).content.decode()

    assert rows(body) == [str(call.pk)]
    row = body[body.index(f'<tr data-id="{call.pk}">') :]
    row = row[: row.index("</tr>")]
    assert re.search(r'<code>bash</code></a><div class="small">.*→</span> <code>exec</code></div>', row)
    assert "Blocked by the safeguard" in row
    assert "status-error" in row
    assert "2.35 s" in row
    assert "2.0 KB / 0 B" in row
    assert "chat-42" in row
    assert "comm" in row
    assert "blocked: &lt;rm -rf /&gt;" in row
    assert '<details class="args">' in row
    assert "&quot;token&quot;: &quot;[REDACTED]&quot;" in row
    assert "data-tool-calls-live" in body
    assert "tool-calls-live.js" in body
    assert "live-table.js" in body


def test_tool_calls_filter(member, tenant_a):
    bot, other = make_agent(tenant_a, "bot"), make_agent(tenant_a, "other")
    ok = make_call(tenant_a, bot, session_key="s-1")
    denied = make_call(
        tenant_a, bot, tool="exec", resolved_tool="exec", decision="denied", status="error", session_key="s-2"
    )
    others = make_call(tenant_a, other, tool="read_file", resolved_tool="read_file")
    ToolCall.objects.for_tenant(tenant_a).filter(pk=others.pk).update(
        created_at=timezone.now() - timedelta(days=2)
    )

    def listed(**query: str) -> set[str]:
        return set(rows(member.get(reverse("dashboard:tool_calls"), query).content.decode()))

    assert listed() == {str(ok.pk), str(denied.pk), str(others.pk)}
    assert listed(agent="other") == {str(others.pk)}
    assert listed(tool="exec") == {str(denied.pk)}
    assert listed(decision="denied") == {str(denied.pk)}
    assert listed(status="ok") == {str(ok.pk), str(others.pk)}
    assert listed(session_key="s-1") == {str(ok.pk), str(others.pk)}
    since = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert listed(since=since) == {str(ok.pk), str(denied.pk)}
    assert listed(until=since) == {str(others.pk)}
    body = member.get(reverse("dashboard:tool_calls"), {"agent": "nobody"}).content.decode()
    assert "No tool calls match these filters." in body


def test_the_live_config_carries_the_page_filters(member, tenant_a):
    body = member.get(
        reverse("dashboard:tool_calls"), {"agent": "bot", "decision": "denied", "since": "2024-01-01T00:00"}
    ).content.decode()
    until = member.get(reverse("dashboard:tool_calls"), {"until": "2030-01-01T00:00"}).content.decode()

    config = re.search(r'<script id="tool-calls-live-config" type="application/json">(.*?)</script>', body)
    assert config
    assert '"filters": {"agent": "bot", "decision": "denied"}' in config.group(1)
    assert '"allowed": "Allowed"' in config.group(1)
    assert "data-tool-calls-live" not in until
    assert "tool-calls-live.js" not in until


def test_an_invalid_tool_call_filter_is_reported(member, tenant_a):
    make_call(tenant_a)

    body = member.get(reverse("dashboard:tool_calls"), {"decision": "maybe"}).content.decode()

    assert re.search(r'id="id_decision_error">\s*<li>Select a valid choice', body)
    assert rows(body) == []  # never the rows the filter was meant to leave out


def test_tool_calls_are_paginated(member, tenant_a, django_assert_max_num_queries):
    for i in range(55):
        make_call(tenant_a, session_key=f"s-{i}")

    with django_assert_max_num_queries(10):
        first = member.get(reverse("dashboard:tool_calls")).content.decode()
    second = member.get(reverse("dashboard:tool_calls"), {"page": 2}).content.decode()

    assert len(rows(first)) == 50
    assert "Page 1 of 2 · 55 calls" in first
    assert len(rows(second)) == 5
    assert "data-tool-calls-live" not in second


def test_another_tenants_tool_calls_never_appear(owner, tenant_a, tenant_b):
    mine = make_call(tenant_a, session_key="shared")
    theirs = make_call(tenant_b, agent_key="their-secret-bot", session_key="shared")

    everything = owner.get(reverse("dashboard:tool_calls")).content.decode()
    by_agent = owner.get(reverse("dashboard:tool_calls"), {"agent": "their-secret-bot"}).content.decode()
    by_session = owner.get(reverse("dashboard:tool_calls"), {"session_key": "shared"}).content.decode()

    assert rows(everything) == [str(mine.pk)]
    assert "their-secret-bot" not in everything
    assert str(theirs.pk) not in everything + by_session
    assert rows(by_agent) == []
    assert rows(by_session) == [str(mine.pk)]
