"""The custom tools pages through the Django test client: the list, a tool's page, adding, editing,
enabling, disabling and deleting a tool, and the test-run page (real ``sh -c`` runs).

Personas: a viewer and a member of tenant A (read), an admin and an owner (change and test-run), and
tenant B's owner, the outsider, for whom every one of A's tools is 404 with nothing changed. Env values
never appear in any page, not even in the command they were pasted into.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.custom_tools import services
from apps.custom_tools.models import CustomTool
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.tenant_state import tenant_state
from tests.custom_tools.support import DNS_LOOKUP

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-dash-value-5c1e8f"


def body(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


def make_tool(tenant: Tenant, **fields: Any) -> CustomTool:
    values = {**DNS_LOOKUP, **fields}
    return services.custom_tool_create(actor=Actor.system(tenant), **values)


def with_secret(tenant: Tenant) -> CustomTool:
    """A tool whose env value is also pasted into its command."""
    return make_tool(
        tenant,
        name="secretive",
        command=f"getent hosts {{{{.domain}}}} && echo {SECRET} && echo $API_TOKEN",
        env={"API_TOKEN": SECRET},
    )


def tool_form(**fields: Any) -> dict[str, Any]:
    data = {
        "name": "dns_lookup",
        "description": "Look up a host.",
        "scope": "",
        "parameters": json.dumps(DNS_LOOKUP["parameters"]),
        "command": "getent hosts {{.domain}}",
        "working_dir": "",
        "timeout_seconds": "10",
        "enabled": "on",
    }
    data.update(fields)
    return data


# --- list and detail --------------------------------------------------------------------------------------


def test_every_role_has_the_section(viewer, admin):
    for client in (viewer, admin):
        page = body(client.get(reverse("dashboard:home")))
        nav = page[page.index('<nav class="sidenav"') : page.index("</nav>")]
        assert reverse("dashboard:custom_tools") in nav


def test_the_list_shows_scope_state_and_timeout_live_for_admins(admin, tenant_a, tenant_b, bot):
    shared = make_tool(tenant_a)
    own = make_tool(tenant_a, agent=bot, enabled=False, timeout_seconds=30)
    make_tool(tenant_b, name="b_secret_tool")
    page = body(admin.get(reverse("dashboard:custom_tools")))
    assert f'data-id="{shared.pk}"' in page
    assert f'data-id="{own.pk}"' in page
    assert "agent <code>bot</code>" in page
    assert '<td data-field="scope">global</td>' in page
    assert "30 s" in page
    assert 'data-enabled="false"' in page
    assert "b_secret_tool" not in page
    for name in ("custom_tool_edit", "custom_tool_enable", "custom_tool_delete", "custom_tool_test"):
        assert reverse(f"dashboard:{name}", args=[shared.pk]) in page
    assert reverse("dashboard:custom_tool_create") in page
    assert "tool-lists-live.js" in page
    assert '"topic": "custom_tools"' in page
    assert "data-live-indicator" in page


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_the_list_and_detail_are_read_only_below_admin(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    tool = make_tool(tenant_a)
    listing = body(client.get(reverse("dashboard:custom_tools")))
    detail = body(client.get(reverse("dashboard:custom_tool", args=[tool.pk])))
    for page in (listing, detail):
        assert "dns_lookup" in page
        for name in ("custom_tool_edit", "custom_tool_enable", "custom_tool_delete", "custom_tool_test"):
            assert reverse(f"dashboard:{name}", args=[tool.pk]) not in page
        assert reverse("dashboard:custom_tool_create") not in page
        assert "tool-lists-live.js" not in page  # the custom_tools topic is the administrators'
    assert "getent hosts {{.domain}}" in detail
    assert "&quot;domain&quot;" in detail


def test_env_values_are_never_in_any_page(admin, viewer, tenant_a, bot):
    tool = with_secret(tenant_a)
    pages = [
        body(admin.get(reverse("dashboard:custom_tools"))),
        body(admin.get(reverse("dashboard:custom_tool", args=[tool.pk]))),
        body(admin.get(reverse("dashboard:custom_tool_edit", args=[tool.pk]))),
        body(admin.get(reverse("dashboard:custom_tool_test", args=[tool.pk]))),
        body(viewer.get(reverse("dashboard:custom_tool", args=[tool.pk]))),
        body(
            admin.post(
                reverse("dashboard:custom_tool_test", args=[tool.pk]),
                {"agent": "bot", "args": '{"domain": "localhost"}'},
            )
        ),
        body(
            admin.post(
                reverse("dashboard:custom_tool_test", args=[tool.pk]),
                {"agent": "bot", "args": json.dumps({"domain": SECRET})},
            )
        ),
    ]
    for page in pages:
        assert SECRET not in page
    assert "<code>API_TOKEN</code>" in pages[1]
    assert "Stored now: API_TOKEN (values hidden); leave empty to keep them." in pages[2]
    assert "echo [REDACTED]" in pages[1]  # the command, with the value masked
    assert "&quot;domain&quot;: &quot;[REDACTED]&quot;" in pages[-1]  # the arguments shown again


# --- adding and editing ----------------------------------------------------------------------------------


def test_adding_a_global_tool(admin, tenant_a):
    response = admin.post(
        reverse("dashboard:custom_tool_create"), tool_form(env=f"API_TOKEN={SECRET}\nREGION=eu")
    )
    tool = CustomTool.objects.for_tenant(tenant_a).get(name="dns_lookup")
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:custom_tool", args=[tool.pk])
    assert tool.agent is None
    assert tool.parameters == DNS_LOOKUP["parameters"]
    assert tool.command == "getent hosts {{.domain}}"
    assert tool.timeout_seconds == 10
    assert tool.env == {"API_TOKEN": SECRET, "REGION": "eu"}
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="custom_tool.created")
    assert event.data["env"] == ["API_TOKEN", "REGION"]
    assert SECRET not in json.dumps(event.data)
    page = body(admin.get(response["Location"]))
    assert "Custom tool dns_lookup defined." in page


def test_adding_an_agents_own_tool(admin, tenant_a, bot):
    admin.post(reverse("dashboard:custom_tool_create"), tool_form(scope="bot"))
    tool = CustomTool.objects.for_tenant(tenant_a).get(name="dns_lookup")
    assert tool.agent == bot


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"parameters": "{not json"}, "Not valid JSON"),
        ({"parameters": "[1, 2]"}, "The parameters must be a JSON object"),
        ({"parameters": '{"type": "string"}'}, "the schema must describe an object"),
        (
            {"parameters": '{"type": "object", "properties": {"domain": {"type": "nonsense"}}}'},
            "not a valid JSON Schema at properties/domain/type",
        ),
        ({"command": "getent hosts {{.host}}"}, "the placeholder {{.host}} names no parameter"),
        ({"name": "Bad Name"}, "a lower-case letter"),
        ({"name": "exec"}, "is a built-in tool"),
        ({"working_dir": "../up"}, "must stay inside the agent"),
        ({"working_dir": "/etc"}, "relative to the agent"),
        ({"timeout_seconds": "601"}, "less than or equal to 600"),
        ({"env": "LD_PRELOAD=/tmp/x.so"}, "cannot be set"),
        ({"env": "no pair here"}, "Line 1: write one entry a line"),
        ({"scope": "nobody"}, "Select a valid choice"),
        ({"command": ""}, "This field is required"),
    ],
)
def test_an_invalid_tool_is_shown_on_the_form_and_nothing_is_saved(admin, tenant_a, bot, fields, message):
    before = tenant_state(tenant_a)
    response = admin.post(reverse("dashboard:custom_tool_create"), tool_form(**fields))
    page = body(response)
    assert message in page
    assert 'class="field has-errors"' in page or "form-errors" in page
    assert tenant_state(tenant_a) == before


def test_a_name_in_use_in_the_same_scope_is_refused(admin, tenant_a, bot):
    make_tool(tenant_a)
    before = tenant_state(tenant_a)
    assert "in use in this scope" in body(admin.post(reverse("dashboard:custom_tool_create"), tool_form()))
    assert tenant_state(tenant_a) == before
    # the same name for one agent overrides the global one: allowed
    assert admin.post(reverse("dashboard:custom_tool_create"), tool_form(scope="bot")).status_code == 302


def test_a_refused_form_does_not_echo_the_env_typed(admin, tenant_a):
    page = body(
        admin.post(
            reverse("dashboard:custom_tool_create"), tool_form(name="Bad Name", env=f"API_TOKEN={SECRET}")
        )
    )
    assert SECRET not in page


def test_editing_keeps_the_env_and_the_masked_command(admin, tenant_a, bot):
    tool = with_secret(tenant_a)
    url = reverse("dashboard:custom_tool_edit", args=[tool.pk])
    page = body(admin.get(url))
    assert "echo [REDACTED]" in page
    response = admin.post(
        url,
        tool_form(
            name="secretive",
            command="getent hosts {{.domain}} && echo [REDACTED] && echo $API_TOKEN",
            description="changed",
            timeout_seconds="20",
        ),
    )
    assert response.status_code == 302
    tool.refresh_from_db()
    assert tool.description == "changed"
    assert tool.timeout_seconds == 20
    assert SECRET in tool.command  # the command came back as shown: kept as stored
    assert tool.env == {"API_TOKEN": SECRET}
    changed = AuditEvent.objects.for_tenant(tenant_a).filter(verb="custom_tool.updated").get()
    assert changed.data["changed"] == ["description", "timeout_seconds"]


def test_editing_replaces_and_clears_the_env_and_moves_the_scope(admin, tenant_a, bot):
    tool = with_secret(tenant_a)
    url = reverse("dashboard:custom_tool_edit", args=[tool.pk])
    base = tool_form(name="secretive", command="echo {{.domain}}")
    admin.post(url, {**base, "env": "OTHER=value-1234"})
    tool.refresh_from_db()
    assert tool.env == {"OTHER": "value-1234"}
    assert tool.command == "echo {{.domain}}"
    admin.post(url, {**base, "clear_env": "on", "scope": "bot"})
    tool.refresh_from_db()
    assert tool.env == {}
    assert tool.agent == bot


def test_a_new_env_and_clear_together_are_refused(admin, tenant_a):
    tool = with_secret(tenant_a)
    before = tenant_state(tenant_a)
    page = body(
        admin.post(
            reverse("dashboard:custom_tool_edit", args=[tool.pk]),
            tool_form(name="secretive", clear_env="on", env="X=1"),
        )
    )
    assert "Enter new variables or remove the stored ones, not both." in page
    assert tenant_state(tenant_a) == before


def test_disabling_and_enabling(admin, tenant_a):
    tool = make_tool(tenant_a)
    url = reverse("dashboard:custom_tool_enable", args=[tool.pk])
    response = admin.post(url, {"enabled": "0", "next": "list"})
    assert response["Location"] == reverse("dashboard:custom_tools")
    tool.refresh_from_db()
    assert tool.enabled is False
    admin.post(url, {"enabled": "1"})
    tool.refresh_from_db()
    assert tool.enabled is True
    before = tenant_state(tenant_a)
    admin.post(url, {"enabled": "maybe"})
    assert tenant_state(tenant_a) == before
    assert admin.get(url).status_code == 405


def test_deleting_is_confirmed(owner, tenant_a):
    tool = make_tool(tenant_a)
    url = reverse("dashboard:custom_tool_delete", args=[tool.pk])
    before = tenant_state(tenant_a)
    assert "Delete the custom tool dns_lookup?" in body(owner.get(url))
    assert tenant_state(tenant_a) == before
    response = owner.post(url)
    assert response["Location"] == reverse("dashboard:custom_tools")
    assert not CustomTool.objects.for_tenant(tenant_a).exists()
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="custom_tool.deleted").count() == 1


# --- test run -------------------------------------------------------------------------------------------


def test_a_test_run_shows_the_output_the_rendered_command_and_the_decision_path(admin, tenant_a, bot):
    tool = with_secret(tenant_a)
    url = reverse("dashboard:custom_tool_test", args=[tool.pk])
    form = body(admin.get(url))
    assert "data-run-busy" in form
    assert "tool-test-run.js" in form
    page = body(admin.post(url, {"agent": "bot", "args": '{"domain": "localhost"}'}))
    assert "succeeded" in page
    assert "getent hosts &#x27;localhost&#x27; &amp;&amp; echo [REDACTED]" in page
    assert "localhost" in page[page.index('data-field="output"') :]
    for step in ("schema", "render", "working_dir", "safeguard", "deny_groups", "run"):
        assert f"<strong>{step}</strong>" in page
    assert SECRET not in page
    tested = AuditEvent.objects.for_tenant(tenant_a).get(verb="custom_tool.tested")
    assert tested.data["ok"] is True


def test_an_injection_attempt_runs_harmlessly(admin, tenant_a, bot, tmp_path):
    tool = make_tool(tenant_a)
    marker = tmp_path / "pwned"
    args = json.dumps({"domain": f"x; touch {marker}"})
    page = body(
        admin.post(reverse("dashboard:custom_tool_test", args=[tool.pk]), {"agent": "bot", "args": args})
    )
    assert f"getent hosts &#x27;x; touch {marker}&#x27;" in page
    assert not marker.exists()


def test_a_refused_run_names_the_step(admin, tenant_a, bot):
    tool = make_tool(tenant_a)
    url = reverse("dashboard:custom_tool_test", args=[tool.pk])
    denied = body(admin.post(url, {"agent": "bot", "args": '{"domain": "sudo.example"}'}))
    assert "refused at deny_groups" in denied
    assert "privilege_escalation" in denied
    bad = body(admin.post(url, {"agent": "bot", "args": '{"domain": 5}'}))
    assert "refused at schema" in bad


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"agent": "bot", "args": "{oops"}, "Not valid JSON"),
        ({"agent": "bot", "args": "[1]"}, "The arguments must be a JSON object"),
        ({"agent": "nobody", "args": "{}"}, "Select a valid choice"),
        ({"agent": "bot", "args": "{}", "user_id": "u" * 300}, "at most 255 characters"),
    ],
)
def test_invalid_test_input_is_shown_and_nothing_runs(admin, tenant_a, bot, data, message):
    tool = make_tool(tenant_a)
    before = tenant_state(tenant_a)
    page = body(admin.post(reverse("dashboard:custom_tool_test", args=[tool.pk]), data))
    assert message in page
    assert "data-run-result" not in page
    assert tenant_state(tenant_a) == before


def test_an_agents_own_tool_is_tested_with_its_agent_only(admin, tenant_a, bot):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    tool = make_tool(tenant_a, agent=bot, command="echo mine {{.domain}}")
    url = reverse("dashboard:custom_tool_test", args=[tool.pk])
    form = body(admin.get(url))
    assert '<option value="bot"' in form
    assert '<option value="other"' not in form
    assert "Select a valid choice" in body(admin.post(url, {"agent": "other", "args": "{}"}))
    assert "mine" in body(admin.post(url, {"agent": "bot", "args": '{"domain": "d"}'}))


# --- roles and tenants ------------------------------------------------------------------------------------


def _routes(tenant: Tenant) -> dict[str, tuple[str, str, dict[str, Any] | None]]:
    """Every custom tools route of the dashboard, with a valid request for it."""
    tenant_services.agent_create(actor=Actor.system(tenant), key="bot", name="Bot")
    tool = make_tool(tenant, name="tool_a")
    t = tool.pk
    return {
        "list": ("get", reverse("dashboard:custom_tools"), None),
        "detail": ("get", reverse("dashboard:custom_tool", args=[t]), None),
        "create": ("post", reverse("dashboard:custom_tool_create"), tool_form(name="new_tool")),
        "edit": (
            "post",
            reverse("dashboard:custom_tool_edit", args=[t]),
            tool_form(name="tool_a", description="x"),
        ),
        "enable": ("post", reverse("dashboard:custom_tool_enable", args=[t]), {"enabled": "0"}),
        "test": (
            "post",
            reverse("dashboard:custom_tool_test", args=[t]),
            {"agent": "bot", "args": '{"domain": "localhost"}'},
        ),
        "delete": ("post", reverse("dashboard:custom_tool_delete", args=[t]), None),
    }


ADMIN_ROUTES = ["create", "edit", "enable", "test", "delete"]


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_below_admin_every_change_is_refused_and_nothing_changes(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    routes = _routes(tenant_a)
    before = tenant_state(tenant_a)
    for name in ADMIN_ROUTES:
        method, url, data = routes[name]
        assert getattr(client, method)(url, data).status_code == 403, name
        assert client.get(url).status_code in {403, 405}, name
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize("persona", ["admin", "owner"])
def test_admins_and_owners_can_do_everything(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    routes = _routes(tenant_a)
    for name, (method, url, data) in routes.items():
        status = getattr(client, method)(url, data).status_code
        assert status in (200, 302), (name, status)
    assert CustomTool.objects.for_tenant(tenant_a).filter(name="new_tool").exists()
    assert not CustomTool.objects.for_tenant(tenant_a).filter(name="tool_a").exists()
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="custom_tool.tested").count() == 1


def test_another_tenants_tools_are_not_found_and_nothing_changes(outsider, tenant_a, tenant_b):
    routes = _routes(tenant_a)
    before = tenant_state(tenant_a)
    before_b = tenant_state(tenant_b)
    for name, (method, url, data) in routes.items():
        if name in {"list", "create"}:
            continue  # the outsider's own tenant's pages
        for verb in {method, "get"}:
            response = getattr(outsider, verb)(url, data if verb == method else None)
            assert response.status_code in ({404, 405} if verb == "get" and name == "enable" else {404}), name
            assert "tool_a" not in response.content.decode()
    assert "No custom tools yet." in body(outsider.get(reverse("dashboard:custom_tools")))
    assert tenant_state(tenant_a) == before
    assert tenant_state(tenant_b) == before_b


def test_the_list_query_count_is_bounded(admin, tenant_a, bot, django_assert_max_num_queries):
    for i in range(8):
        make_tool(tenant_a, name=f"tool_{i}", agent=bot if i % 2 else None)
    with django_assert_max_num_queries(8):
        assert admin.get(reverse("dashboard:custom_tools")).status_code == 200
