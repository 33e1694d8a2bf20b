"""The MCP pages through the Django test client: servers (list, detail, add, edit, enable, disable,
delete), grants to agents and users with the tool picker, the access-request inbox, and "My access
requests".

Personas: a viewer (reads), a member (also asks for access), an admin and an owner of tenant A (manage),
and tenant B's owner, the outsider, for whom every one of A's servers, grants and requests is 404 with
nothing changed. Secrets (headers, env, API key) never appear in any page.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.mcp_grants import services
from apps.mcp_grants.models import (
    AccessRequest,
    AgentGrant,
    MCPServer,
    MCPServerTool,
    UserCredential,
    UserGrant,
)
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api.tenant_state import tenant_state
from tests.dashboard.personas import login
from tests.mcp.live_servers import stdio_fields
from tests.mcp.support import make_server

pytestmark = pytest.mark.django_db

API_KEY = "sk-live-0123456789abcdefghijklmnop"
HEADER_VALUE = "Bearer hdr-9f8e7d6c5b4a39281706"
ENV_VALUE = "envsecret-5a4b3c2d1e0f9988"
PUBLIC_URL = "https://93.184.216.34/mcp"


@pytest.fixture
def member_user(tenant_a: Tenant) -> Any:
    return factories.make_user(tenant_a, Role.MEMBER, email="member@a.test")


@pytest.fixture
def member(member_user: Any) -> Client:
    return login(member_user)


@pytest.fixture
def pg(tenant_a: Tenant) -> MCPServer:
    return make_server(tenant_a, "pg", ["query", "schema", "drop"], display_name="Postgres")


def body(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


def with_secrets(tenant: Tenant, name: str = "vault") -> MCPServer:
    return services.server_create(
        actor=Actor.system(tenant),
        name=name,
        transport="stdio",
        command="npx",
        args=["-y", "@acme/vault-mcp", f"--token={API_KEY}"],
        env={"VAULT_TOKEN": ENV_VALUE, "NODE_ENV": "production"},
        headers={"Authorization": HEADER_VALUE},
        api_key=API_KEY,
    )


def ask(tenant: Tenant, server: MCPServer, *, actor: Actor | None = None, **fields: Any) -> AccessRequest:
    fields.setdefault("scope", "user")
    if fields["scope"] == "user":
        fields.setdefault("user_id", "u-1")
    return services.request_create(actor=actor or Actor.system(tenant), server=server, **fields)


def server_form(**fields: Any) -> dict[str, Any]:
    data = {"transport": "stdio", "command": "npx", "args": "", "timeout_sec": "60", "settings": "{}"}
    data.update(fields)
    return data


def grant_form(**fields: Any) -> dict[str, Any]:
    # As a browser sends the form untouched: the checkboxes that start checked are on.
    data: dict[str, Any] = {"enabled": "on", "resources": "on", "prompts": "on", "config_overrides": "{}"}
    data.update(fields)
    return data


# --- navigation and servers ---------------------------------------------------------------------------


def test_every_role_has_the_mcp_section(viewer, admin):
    for client in (viewer, admin):
        page = body(client.get(reverse("dashboard:home")))
        nav = page[page.index('<nav class="sidenav"') : page.index("</nav>")]
        assert reverse("dashboard:mcp_servers") in nav


def test_the_server_list_shows_state_and_tools_live_for_admins(admin, tenant_a, tenant_b, pg):
    make_server(tenant_b, "b-secret-server", ["x"])
    page = body(admin.get(reverse("dashboard:mcp_servers")))
    assert f'data-id="{pg.pk}"' in page
    assert "Postgres" in page
    assert 'data-status="unknown"' in page
    assert '<td data-field="tools">3</td>' in page
    assert "b-secret-server" not in page
    assert reverse("dashboard:mcp_server_edit", args=[pg.pk]) in page
    assert reverse("dashboard:mcp_server_enable", args=[pg.pk]) in page
    assert reverse("dashboard:mcp_server_delete", args=[pg.pk]) in page
    assert "data-mcp-servers" in page
    assert "mcp-live.js" in page
    assert "data-live-indicator" in page


def test_the_server_list_counts_pending_requests_for_admins(admin, tenant_a, pg):
    ask(tenant_a, pg)
    assert "1 access request waits for a decision" in body(admin.get(reverse("dashboard:mcp_servers")))


def test_the_list_and_detail_are_read_only_for_viewers(viewer, tenant_a, pg, bot):
    services.agent_grant_set(actor=Actor.system(tenant_a), server=pg, agent=bot, tool_allow=["query"])
    listing = body(viewer.get(reverse("dashboard:mcp_servers")))
    detail = body(viewer.get(reverse("dashboard:mcp_server", args=[pg.pk])))
    for page in (listing, detail):
        assert "pg" in page
        assert reverse("dashboard:mcp_server_edit", args=[pg.pk]) not in page
        assert reverse("dashboard:mcp_server_delete", args=[pg.pk]) not in page
        assert reverse("dashboard:mcp_server_enable", args=[pg.pk]) not in page
        assert reverse("dashboard:mcp_server_create") not in page
        assert reverse("dashboard:mcp_requests") not in page  # the inbox is the administrators'
        assert reverse("dashboard:mcp_my_requests") not in page  # asking is for members and up
        assert "mcp-live.js" not in page  # the mcp topic is the administrators'
    assert "<code>bot</code>" in detail
    assert reverse("dashboard:mcp_agent_grant_create", args=[pg.pk]) not in detail


def test_the_server_page_shows_tools_registered_names_schemas_and_grants(admin, tenant_a, pg, bot):
    MCPServerTool.objects.for_tenant(tenant_a).filter(server=pg, name="query").update(
        description="Run a read-only query", input_schema={"type": "object", "properties": {"sql": {}}}
    )
    system = Actor.system(tenant_a)
    services.agent_grant_set(actor=system, server=pg, agent=bot, tool_allow=["query"], tool_deny=["drop"])
    services.user_grant_set(actor=system, server=pg, user_id="ann@a.test", enabled=False)
    page = body(admin.get(reverse("dashboard:mcp_server", args=[pg.pk])))
    assert "mcp_pg__query" in page
    assert "mcp_pg__drop" in page
    assert "Run a read-only query" in page
    assert "&quot;sql&quot;" in page
    assert "ann@a.test" in page
    assert "all tools" in page  # the user grant allows every tool
    assert "data-server-actions" in page
    assert reverse("dashboard:mcp_agent_grant_create", args=[pg.pk]) in page
    assert reverse("dashboard:mcp_user_grant_create", args=[pg.pk]) in page


def test_adding_a_stdio_server(admin, tenant_a):
    response = admin.post(
        reverse("dashboard:mcp_server_create"),
        server_form(
            name="files",
            display_name="Files",
            args="-y\n@modelcontextprotocol/server-filesystem\n/srv/data\n",
            env=f"ROOT_TOKEN={ENV_VALUE}\nNODE_ENV=production",
            enabled="on",
        ),
    )
    server = MCPServer.objects.for_tenant(tenant_a).get(name="files")
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:mcp_server", args=[server.pk])
    assert (server.transport, server.command, server.display_name) == ("stdio", "npx", "Files")
    assert server.args == ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
    assert server.env == {"ROOT_TOKEN": ENV_VALUE, "NODE_ENV": "production"}
    assert server.enabled is True
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="mcp.server.created")
    assert event.actor_label == "admin@a.test"
    assert ENV_VALUE not in str(event.data)


def test_adding_an_http_server_with_headers_and_an_api_key(admin, tenant_a):
    admin.post(
        reverse("dashboard:mcp_server_create"),
        server_form(
            name="search",
            transport="streamable-http",
            command="npx",  # a field of the other transport: dropped
            args="-y",
            url=PUBLIC_URL,
            headers=f"Authorization: {HEADER_VALUE}\nX-Org: acme",
            api_key=API_KEY,
            tool_prefix="web",
        ),
    )
    server = MCPServer.objects.for_tenant(tenant_a).get(name="search")
    assert (server.transport, server.url, server.command, server.args) == (
        "streamable-http",
        PUBLIC_URL,
        "",
        [],
    )
    assert server.headers == {"Authorization": HEADER_VALUE, "X-Org": "acme"}
    assert server.api_key == API_KEY
    assert server.tool_prefix == "web"
    assert server.enabled is False  # the box was left unchecked


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"command": "bash"}, "&#x27;bash&#x27; is not an allowed command"),
        ({"args": "-e\nconsole.log(1)"}, "runs inline code"),
        ({"args": "; rm -rf /"}, "shell metacharacters"),
        ({"env": "LEAK=env:SECRET_KEY"}, "may not be referenced"),
        ({"env": "no separator here"}, "Line 1: write one entry a line"),
        ({"transport": "sse", "url": "http://169.254.169.254/latest"}, "url"),
        ({"transport": "sse", "url": ""}, "needs a URL"),
        ({"name": "Bad Name"}, "lower-case letters and digits"),
        ({"timeout_sec": "0"}, "greater than or equal to 1"),
        ({"settings": "[1]"}, "Must be a JSON object"),
        ({"tool_prefix": "Web!"}, "tool_prefix"),
    ],
)
def test_an_invalid_registration_is_shown_and_nothing_is_saved(admin, tenant_a, fields, message):
    before = tenant_state(tenant_a)
    page = body(admin.post(reverse("dashboard:mcp_server_create"), server_form(**{"name": "bad", **fields})))
    assert message in page
    assert "has-errors" in page or "form-errors" in page
    assert tenant_state(tenant_a) == before


def test_a_second_server_with_the_same_name_or_prefix_is_refused(admin, tenant_a, pg):
    before = tenant_state(tenant_a)
    page = body(admin.post(reverse("dashboard:mcp_server_create"), server_form(name="pg")))
    assert "already registers its tools as mcp_pg__&lt;tool&gt;" in page
    page = body(
        admin.post(reverse("dashboard:mcp_server_create"), server_form(name="other", tool_prefix="pg"))
    )
    assert "already registers its tools as mcp_pg__&lt;tool&gt;" in page
    assert tenant_state(tenant_a) == before


def test_secrets_are_never_in_any_page(admin, viewer, tenant_a):
    server = with_secrets(tenant_a)
    pages = [
        admin.get(reverse("dashboard:mcp_servers")),
        admin.get(reverse("dashboard:mcp_server", args=[server.pk])),
        admin.get(reverse("dashboard:mcp_server_edit", args=[server.pk])),
        viewer.get(reverse("dashboard:mcp_server", args=[server.pk])),
    ]
    for response in pages:
        page = body(response)
        for secret in (API_KEY, HEADER_VALUE, ENV_VALUE, "hdr-9f8e7d6c5b4a39281706"):
            assert secret not in page
    detail = body(pages[1])
    assert "<code>Authorization</code>" in detail  # names are shown, values are not
    assert "<code>VAULT_TOKEN</code>" in detail
    edit = body(pages[2])
    assert "Stored now: NODE_ENV, VAULT_TOKEN (values hidden)" in edit
    assert "Remove the stored API key" in edit


def test_a_refused_edit_does_not_echo_the_secrets_typed(admin, tenant_a):
    server = with_secrets(tenant_a)
    before = tenant_state(tenant_a)
    new_key = "sk-typed-but-refused-424242424242"
    page = body(
        admin.post(
            reverse("dashboard:mcp_server_edit", args=[server.pk]),
            server_form(
                args="-y",
                timeout_sec="9999",
                api_key=new_key,
                headers="Authorization: Bearer typed-header-value-77",
                env="VAULT_TOKEN=typed-env-value-88",
            ),
        )
    )
    assert "less than or equal to 600" in page
    for typed in (new_key, "typed-header-value-77", "typed-env-value-88"):
        assert typed not in page
    assert tenant_state(tenant_a) == before


def test_editing_keeps_secrets_left_empty_and_the_scrubbed_arguments(admin, tenant_a):
    server = with_secrets(tenant_a)
    edit_url = reverse("dashboard:mcp_server_edit", args=[server.pk])
    form = admin.get(edit_url).context["form"]
    shown_args = form.initial["args"]
    assert API_KEY not in shown_args  # the argument holding the key is shown scrubbed
    response = admin.post(edit_url, server_form(args=shown_args, display_name="Vault", timeout_sec="30"))
    assert response.status_code == 302
    server.refresh_from_db()
    assert server.display_name == "Vault"
    assert server.timeout_sec == 30
    assert server.args == ["-y", "@acme/vault-mcp", f"--token={API_KEY}"]  # untouched: kept as stored
    assert server.api_key == API_KEY
    assert server.headers == {"Authorization": HEADER_VALUE}
    assert server.env == {"VAULT_TOKEN": ENV_VALUE, "NODE_ENV": "production"}


def test_editing_replaces_and_clears_secrets(admin, tenant_a):
    server = with_secrets(tenant_a)
    edit_url = reverse("dashboard:mcp_server_edit", args=[server.pk])
    admin.post(
        edit_url,
        server_form(
            args="-y\n@acme/vault-mcp", api_key="sk-new-key-0000000000", clear_headers="on", clear_env="on"
        ),
    )
    server.refresh_from_db()
    assert server.args == ["-y", "@acme/vault-mcp"]
    assert server.api_key == "sk-new-key-0000000000"
    assert server.headers == {}
    assert server.env == {}
    admin.post(edit_url, server_form(args="-y", clear_api_key="on"))
    server.refresh_from_db()
    assert server.api_key == ""


def test_a_new_value_and_clear_together_are_refused(admin, tenant_a):
    server = with_secrets(tenant_a)
    before = tenant_state(tenant_a)
    page = body(
        admin.post(
            reverse("dashboard:mcp_server_edit", args=[server.pk]),
            server_form(args="-y", api_key="sk-another-000000000000", clear_api_key="on"),
        )
    )
    assert "Enter a new value or remove the stored one, not both." in page
    assert tenant_state(tenant_a) == before


def test_switching_a_server_to_http_drops_its_stdio_fields(admin, tenant_a):
    server = with_secrets(tenant_a)
    admin.post(
        reverse("dashboard:mcp_server_edit", args=[server.pk]),
        server_form(transport="sse", url=PUBLIC_URL, args="-y"),
    )
    server.refresh_from_db()
    assert (server.transport, server.url, server.command, server.args, server.env) == (
        "sse",
        PUBLIC_URL,
        "",
        [],
        {},
    )
    assert server.headers == {"Authorization": HEADER_VALUE}  # shared by every transport: kept


def test_disabling_and_enabling_a_server(admin, tenant_a, pg):
    url = reverse("dashboard:mcp_server_enable", args=[pg.pk])
    response = admin.post(url, {"enabled": "0", "next": "list"})
    assert response["Location"] == reverse("dashboard:mcp_servers")
    pg.refresh_from_db()
    assert pg.enabled is False
    assert "disabled" in body(admin.get(reverse("dashboard:mcp_server", args=[pg.pk])))
    response = admin.post(url, {"enabled": "1"})
    assert response["Location"] == reverse("dashboard:mcp_server", args=[pg.pk])
    pg.refresh_from_db()
    assert pg.enabled is True
    before = tenant_state(tenant_a)
    admin.post(url, {"enabled": "maybe"})
    assert tenant_state(tenant_a) == before
    assert admin.get(url).status_code == 405


def test_deleting_a_server_is_confirmed(owner, tenant_a, pg, bot):
    services.agent_grant_set(actor=Actor.system(tenant_a), server=pg, agent=bot)
    url = reverse("dashboard:mcp_server_delete", args=[pg.pk])
    before = tenant_state(tenant_a)
    assert "Delete MCP server pg?" in body(owner.get(url))
    assert tenant_state(tenant_a) == before
    response = owner.post(url)
    assert response["Location"] == reverse("dashboard:mcp_servers")
    assert not MCPServer.objects.for_tenant(tenant_a).exists()
    assert not AgentGrant.objects.for_tenant(tenant_a).exists()


# --- grants -------------------------------------------------------------------------------------------


def test_granting_picked_tools_to_an_agent_gives_it_those_tools(admin, admin_a, tenant_a, pg, bot):
    page = body(admin.get(reverse("dashboard:mcp_agent_grant_create", args=[pg.pk])))
    for tool in ("query", "schema", "drop"):
        assert f'value="{tool}"' in page
    response = admin.post(
        reverse("dashboard:mcp_agent_grant_create", args=[pg.pk]),
        grant_form(agent="bot", tool_allow=["query", "drop"], tool_deny=["drop"], extra_allow="explain"),
    )
    assert response["Location"] == reverse("dashboard:mcp_server", args=[pg.pk])
    grant = AgentGrant.objects.for_tenant(tenant_a).get()
    assert (grant.agent_id, grant.enabled) == (bot.pk, True)
    assert (grant.tool_allow, grant.tool_deny, grant.granted_by) == (
        ["drop", "explain", "query"],
        ["drop"],
        "admin@a.test",
    )
    listed = admin_a.get("/api/v1/agents/bot/tools").content.decode()
    assert "mcp_pg__query" in listed
    assert "mcp_pg__drop" not in listed
    assert "mcp_pg__schema" not in listed


def test_all_tools_is_an_allow_list_of_null(admin, tenant_a, pg, bot):
    admin.post(
        reverse("dashboard:mcp_agent_grant_create", args=[pg.pk]), grant_form(agent="bot", all_tools="on")
    )
    assert AgentGrant.objects.for_tenant(tenant_a).get().tool_allow is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"agent": "bot"}, "Choose at least one tool, or all tools."),
        ({"agent": "bot", "all_tools": "on", "tool_allow": ["query"]}, "Choose all tools or some tools"),
        ({"agent": "bot", "tool_allow": ["not-a-tool"]}, "Select a valid choice"),
        ({"agent": "ghost", "all_tools": "on"}, "Select a valid choice"),
        ({"agent": "bot", "all_tools": "on", "config_overrides": "nope"}, "Not valid JSON"),
        ({"agent": "bot", "extra_allow": "x" * 300}, "at most 255 characters"),
    ],
)
def test_an_invalid_grant_is_shown_and_nothing_is_saved(admin, tenant_a, pg, bot, fields, message):
    before = tenant_state(tenant_a)
    page = body(admin.post(reverse("dashboard:mcp_agent_grant_create", args=[pg.pk]), grant_form(**fields)))
    assert message in page
    assert tenant_state(tenant_a) == before


def test_agents_with_a_grant_are_not_offered_again(admin, tenant_a, pg, bot):
    services.agent_grant_set(actor=Actor.system(tenant_a), server=pg, agent=bot)
    page = body(admin.get(reverse("dashboard:mcp_agent_grant_create", args=[pg.pk])))
    assert '<option value="bot">' not in page
    assert "Every agent of this tenant has a grant of this server already" in page


def test_an_agent_of_another_tenant_cannot_be_granted(admin, tenant_a, tenant_b, pg, bot):
    tenant_services.agent_create(actor=Actor.system(tenant_b), key="theirs", name="Theirs")
    before = tenant_state(tenant_a)
    page = body(
        admin.post(
            reverse("dashboard:mcp_agent_grant_create", args=[pg.pk]),
            grant_form(agent="theirs", all_tools="on"),
        )
    )
    assert "Select a valid choice" in page
    assert tenant_state(tenant_a) == before


def test_a_user_grant_and_its_duplicate(admin, tenant_a, pg):
    url = reverse("dashboard:mcp_user_grant_create", args=[pg.pk])
    admin.post(url, grant_form(user_id="ann@a.test", tool_allow=["query"], enabled=""))
    grant = UserGrant.objects.for_tenant(tenant_a).get()
    assert (grant.user_id, grant.tool_allow, grant.enabled) == ("ann@a.test", ["query"], False)
    before = tenant_state(tenant_a)
    page = body(admin.post(url, grant_form(user_id="ann@a.test", all_tools="on")))
    assert "has a grant of this server already" in page
    page = body(admin.post(url, grant_form(user_id="system", all_tools="on")))
    assert "synthetic identities" in page
    assert tenant_state(tenant_a) == before


def test_editing_a_grant_keeps_names_not_discovered(admin, tenant_a, pg, bot):
    grant = services.agent_grant_set(
        actor=Actor.system(tenant_a),
        server=pg,
        agent=bot,
        tool_allow=["query", "gone"],
        config_overrides={"a": 1},
    )
    url = reverse("dashboard:mcp_agent_grant_edit", args=[pg.pk, grant.pk])
    page = body(admin.get(url))
    assert 'value="gone"' in page  # a name the grant holds stays pickable
    assert "checked" in page
    admin.post(
        url, grant_form(tool_allow=["gone", "schema"], tool_deny=["drop"], config_overrides='{"a": 2}')
    )
    grant.refresh_from_db()
    assert (grant.tool_allow, grant.tool_deny, grant.config_overrides) == (
        ["gone", "schema"],
        ["drop"],
        {"a": 2},
    )


def test_a_grant_switches_resources_and_prompts_and_the_server_page_says_so(admin, tenant_a, pg, bot):
    grant = services.agent_grant_set(actor=Actor.system(tenant_a), server=pg, agent=bot)
    url = reverse("dashboard:mcp_agent_grant_edit", args=[pg.pk, grant.pk])
    page = body(admin.get(url))
    assert 'name="resources"' in page
    assert 'name="prompts"' in page
    form = grant_form(all_tools="on")
    del form["resources"]  # unchecked
    admin.post(url, form)
    grant.refresh_from_db()
    assert (grant.resources, grant.prompts) == (False, True)
    table = body(admin.get(reverse("dashboard:mcp_server", args=[pg.pk])))
    row = table[table.index(f'data-id="{grant.pk}"') :]
    row = row[: row.index("</tr>")]
    assert '<span class="badge">prompts</span>' in row
    assert '<span class="badge">resources</span>' not in row
    # Disabling and enabling the grant keeps the switches.
    enable = reverse("dashboard:mcp_agent_grant_enable", args=[pg.pk, grant.pk])
    admin.post(enable, {"enabled": "0"})
    admin.post(enable, {"enabled": "1"})
    grant.refresh_from_db()
    assert (grant.enabled, grant.resources, grant.prompts) == (True, False, True)


def test_enabling_and_disabling_a_grant_keeps_its_tools(admin, tenant_a, pg, bot):
    grant = services.agent_grant_set(actor=Actor.system(tenant_a), server=pg, agent=bot, tool_allow=["query"])
    url = reverse("dashboard:mcp_agent_grant_enable", args=[pg.pk, grant.pk])
    admin.post(url, {"enabled": "0"})
    grant.refresh_from_db()
    assert (grant.enabled, grant.tool_allow) == (False, ["query"])
    admin.post(url, {"enabled": "1"})
    grant.refresh_from_db()
    assert grant.enabled is True
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="mcp.agent_grant.updated").count() == 2


def test_deleting_a_grant_is_confirmed(admin, tenant_a, pg):
    grant = services.user_grant_set(actor=Actor.system(tenant_a), server=pg, user_id="ann@a.test")
    url = reverse("dashboard:mcp_user_grant_delete", args=[pg.pk, grant.pk])
    before = tenant_state(tenant_a)
    assert "Delete the grant of pg to user ann@a.test?" in body(admin.get(url))
    assert tenant_state(tenant_a) == before
    admin.post(url)
    assert not UserGrant.objects.for_tenant(tenant_a).exists()


def test_a_grant_is_found_only_on_its_own_server_and_kind(admin, tenant_a, pg, bot):
    other = make_server(tenant_a, "other", [])
    grant = services.agent_grant_set(actor=Actor.system(tenant_a), server=pg, agent=bot)
    before = tenant_state(tenant_a)
    assert admin.get(reverse("dashboard:mcp_agent_grant_edit", args=[other.pk, grant.pk])).status_code == 404
    assert admin.get(reverse("dashboard:mcp_user_grant_edit", args=[pg.pk, grant.pk])).status_code == 404
    assert admin.post(reverse("dashboard:mcp_user_grant_delete", args=[pg.pk, grant.pk])).status_code == 404
    assert tenant_state(tenant_a) == before


# --- the access-request inbox -------------------------------------------------------------------------


def test_the_inbox_lists_pending_requests_and_the_decided_ones(admin, tenant_a, tenant_b, pg, bot):
    waiting = ask(tenant_a, pg, scope="agent", agent=bot, tool_allow=["query"], reason="nightly report")
    decided = ask(tenant_a, pg, user_id="ann@a.test")
    services.request_review(
        actor=Actor.system(tenant_a), request_id=decided.pk, approved=False, note="not now"
    )
    ask(tenant_b, make_server(tenant_b, "b-server", []), reason="b-secret-reason")
    page = body(admin.get(reverse("dashboard:mcp_requests")))
    pending = page[page.index("data-mcp-requests") : page.index("data-mcp-decided")]
    assert f'data-id="{waiting.pk}"' in pending
    assert "nightly report" in pending
    assert "agent <code>bot</code>" in pending
    assert reverse("dashboard:mcp_request_review", args=[waiting.pk]) in pending
    assert f'data-id="{decided.pk}"' not in pending
    rest = page[page.index("data-mcp-decided") :]
    assert f'data-id="{decided.pk}"' in rest
    assert "not now" in rest
    assert "Rejected" in rest
    assert "b-secret-reason" not in page
    assert "mcp-live.js" in page


def test_approving_from_the_inbox_grants_what_was_asked(admin, admin_a, tenant_a, pg, bot):
    req = ask(tenant_a, pg, scope="agent", agent=bot, tool_allow=["query", "schema"])
    response = admin.post(
        reverse("dashboard:mcp_request_review", args=[req.pk]), {"decision": "approve", "note": "ok"}
    )
    assert response["Location"] == reverse("dashboard:mcp_requests")
    req.refresh_from_db()
    assert (req.status, req.reviewed_by, req.review_note) == ("approved", "admin@a.test", "ok")
    grant = AgentGrant.objects.for_tenant(tenant_a).get()
    assert (grant.agent_id, grant.tool_allow, grant.enabled) == (bot.pk, ["query", "schema"], True)
    listed = admin_a.get("/api/v1/agents/bot/tools").content.decode()
    assert "mcp_pg__schema" in listed
    assert "mcp_pg__drop" not in listed


def test_the_review_page_narrows_the_tools(admin, tenant_a, pg, bot):
    req = ask(tenant_a, pg, scope="agent", agent=bot, tool_allow=["query", "schema"])
    url = reverse("dashboard:mcp_request_review", args=[req.pk])
    page = body(admin.get(url))
    assert 'value="query"' in page
    assert 'value="drop"' not in page  # only what was asked for can be granted
    admin.post(
        url, {"decision": "approve", "narrow": "True", "tool_allow": ["schema"], "note": "schema only"}
    )
    assert AgentGrant.objects.for_tenant(tenant_a).get().tool_allow == ["schema"]


def test_a_request_for_all_tools_can_be_narrowed_to_discovered_ones(admin, tenant_a, pg):
    req = ask(tenant_a, pg, user_id="ann@a.test")
    url = reverse("dashboard:mcp_request_review", args=[req.pk])
    assert 'value="drop"' in body(admin.get(url))
    admin.post(url, {"decision": "approve", "narrow": "True", "tool_allow": ["query"]})
    grant = UserGrant.objects.for_tenant(tenant_a).get()
    assert (grant.user_id, grant.tool_allow) == ("ann@a.test", ["query"])


def test_approving_with_no_tool_checked_is_refused(admin, tenant_a, pg, bot):
    req = ask(tenant_a, pg, scope="agent", agent=bot, tool_allow=["query"])
    before = tenant_state(tenant_a)
    page = body(
        admin.post(
            reverse("dashboard:mcp_request_review", args=[req.pk]), {"decision": "approve", "narrow": "True"}
        )
    )
    assert "Choose at least one tool, or reject the request." in page
    assert tenant_state(tenant_a) == before


def test_rejecting_with_a_note_grants_nothing(admin, tenant_a, pg, bot):
    req = ask(tenant_a, pg, scope="agent", agent=bot)
    admin.post(
        reverse("dashboard:mcp_request_review", args=[req.pk]),
        {"decision": "reject", "narrow": "True", "note": "use the read replica", "confirmed": "True"},
    )
    req.refresh_from_db()
    assert (req.status, req.review_note) == ("rejected", "use the read replica")
    assert not AgentGrant.objects.for_tenant(tenant_a).exists()


def test_a_decided_request_cannot_be_decided_again(admin, tenant_a, pg):
    req = ask(tenant_a, pg)
    url = reverse("dashboard:mcp_request_review", args=[req.pk])
    admin.post(url, {"decision": "reject", "note": "no", "confirmed": "True"})
    before = tenant_state(tenant_a)
    response = admin.post(url, {"decision": "approve"}, follow=True)
    assert "not pending" in body(response)
    assert tenant_state(tenant_a) == before
    assert "Back to the requests" in body(admin.get(url))


def test_a_bad_decision_and_an_oversized_note_are_refused(admin, tenant_a, pg):
    req = ask(tenant_a, pg)
    url = reverse("dashboard:mcp_request_review", args=[req.pk])
    before = tenant_state(tenant_a)
    admin.post(url, {"decision": "maybe"})
    admin.post(url, {"decision": "reject", "note": "x" * 2001})
    page = body(admin.post(url, {"decision": "reject", "narrow": "True", "note": "x" * 2001}))
    assert "at most 2000 characters" in page
    assert tenant_state(tenant_a) == before


def test_reject_needs_a_note_then_a_confirmation_and_the_requester_reads_the_note(
    admin, member, member_user, tenant_a, pg
):
    me = Actor(tenant=tenant_a, role=Role.MEMBER, kind="user", user=member_user)
    req = ask(tenant_a, pg, actor=me, user_id="member@a.test")
    url = reverse("dashboard:mcp_request_review", args=[req.pk])
    before = tenant_state(tenant_a)

    # No note: refused on the page, saying why.
    page = body(admin.post(url, {"decision": "reject", "narrow": "True", "note": "  "}))
    assert "Write a note saying why the request is rejected" in page
    # From the inbox's quick form too: nothing is rejected without a note.
    admin.post(url, {"decision": "reject"})
    # With a note: a confirmation page that shows it; still nothing decided.
    page = body(admin.post(url, {"decision": "reject", "narrow": "True", "note": "use the replica <b>"}))
    assert "Reject this access request?" in page
    assert "use the replica &lt;b&gt;" in page
    assert 'name="confirmed" value="True"' in page
    assert tenant_state(tenant_a) == before
    req.refresh_from_db()
    assert req.status == "pending"

    admin.post(url, {"decision": "reject", "narrow": "True", "note": "use the replica", "confirmed": "True"})
    req.refresh_from_db()
    assert (req.status, req.review_note) == ("rejected", "use the replica")
    mine = body(member.get(reverse("dashboard:mcp_my_requests")))
    assert "use the replica" in mine
    assert 'data-status="rejected"' in mine


def test_a_request_approved_with_fewer_tools_shows_what_was_granted_and_left_out(
    admin, member, member_user, tenant_a, pg
):
    me = Actor(tenant=tenant_a, role=Role.MEMBER, kind="user", user=member_user)
    req = ask(tenant_a, pg, actor=me, user_id="member@a.test", tool_allow=["query", "schema", "drop"])
    url = reverse("dashboard:mcp_request_review", args=[req.pk])
    admin.post(url, {"decision": "approve", "narrow": "True", "tool_allow": ["query", "schema"]})
    req.refresh_from_db()
    assert req.granted_tool_allow == ["query", "schema"]
    assert services.request_data(req)["granted_tool_allow"] == ["query", "schema"]

    def tools_cell(page: str) -> str:
        row = page[page.index(f'data-id="{req.pk}"') :]
        return row[row.index('data-field="tools"') : row.index("</td>", row.index('data-field="tools"'))]

    for page in (
        body(admin.get(reverse("dashboard:mcp_requests"))),
        body(member.get(reverse("dashboard:mcp_my_requests"))),
    ):
        cell = tools_cell(page)
        granted, _, left_out = cell.partition("Asked for, not granted")
        assert "Granted" in granted
        assert "<code>query</code>" in granted
        assert "<code>schema</code>" in granted
        assert "<code>drop</code>" not in granted
        assert "<del><code>drop</code></del>" in left_out
    review = body(admin.get(url))
    assert 'data-field="granted"' in review
    assert "<del><code>drop</code></del>" in review


def test_a_request_for_all_tools_approved_with_some_says_so(admin, tenant_a, pg):
    req = ask(tenant_a, pg, user_id="ann@a.test")
    url = reverse("dashboard:mcp_request_review", args=[req.pk])
    admin.post(url, {"decision": "approve", "narrow": "True", "tool_allow": ["query"]})
    page = body(admin.get(reverse("dashboard:mcp_requests")))
    assert "Asked for all tools; only these were granted." in page


# --- my access requests -------------------------------------------------------------------------------


def test_a_member_requests_access_for_a_user(member, member_user, tenant_a, pg):
    url = reverse("dashboard:mcp_my_requests")
    page = body(member.get(url, {"server": str(pg.pk)}))
    assert 'value="member@a.test"' in page  # the user id defaults to the member's email
    assert 'value="schema"' in page
    response = member.post(
        f"{url}?server={pg.pk}",
        {"scope": "user", "user_id": "member@a.test", "tool_allow": ["query"], "reason": "reports"},
    )
    assert response["Location"] == url
    req = AccessRequest.objects.for_tenant(tenant_a).get()
    assert (req.scope, req.user_id, req.tool_allow, req.reason, req.status) == (
        "user",
        "member@a.test",
        ["query"],
        "reports",
        "pending",
    )
    assert (req.requester_kind, req.requester_id, req.requested_by) == (
        "user",
        str(member_user.pk),
        "member@a.test",
    )
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="mcp.request.created").count() == 1


def test_a_member_requests_access_for_an_agent(member, tenant_a, pg, bot):
    member.post(
        f"{reverse('dashboard:mcp_my_requests')}?server={pg.pk}",
        {"scope": "agent", "agent": "bot", "all_tools": "on"},
    )
    req = AccessRequest.objects.for_tenant(tenant_a).get()
    assert (req.scope, req.agent_id, req.user_id, req.tool_allow) == ("agent", bot.pk, "", None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"scope": "agent", "all_tools": "on"}, "Choose the agent that needs access."),
        ({"scope": "user", "user_id": "", "all_tools": "on"}, "Enter the user id that needs access."),
        ({"scope": "user", "user_id": "u"}, "Choose at least one tool, or all tools."),
        ({"scope": "user", "user_id": "system", "all_tools": "on"}, "synthetic identities"),
        (
            {"scope": "user", "user_id": "u", "all_tools": "on", "reason": "x" * 2001},
            "at most 2000 characters",
        ),
        ({"scope": "team", "user_id": "u", "all_tools": "on"}, "Select a valid choice"),
    ],
)
def test_an_invalid_request_is_shown_and_nothing_is_saved(member, tenant_a, pg, bot, fields, message):
    before = tenant_state(tenant_a)
    page = body(member.post(f"{reverse('dashboard:mcp_my_requests')}?server={pg.pk}", fields))
    assert message in page
    assert tenant_state(tenant_a) == before


def test_my_requests_lists_only_my_own_with_their_decisions(member, member_user, tenant_a, pg):
    me = Actor(tenant=tenant_a, role=Role.MEMBER, kind="user", user=member_user)
    mine = ask(tenant_a, pg, actor=me, user_id="member@a.test", reason="mine")
    decided = ask(tenant_a, pg, actor=me, user_id="member@a.test", reason="decided")
    services.request_review(actor=Actor.system(tenant_a), request_id=decided.pk, approved=False, note="no")
    ask(tenant_a, pg, user_id="someone-else", reason="not-mine")
    page = body(member.get(reverse("dashboard:mcp_my_requests")))
    assert f'data-id="{mine.pk}"' in page
    assert f'data-id="{decided.pk}"' in page
    assert "someone-else" not in page
    assert 'data-status="rejected"' in page
    assert "data-my-requests" in page
    assert "mcp-live.js" in page


def test_requesting_without_a_server_or_with_a_foreign_one(member, tenant_a, tenant_b):
    theirs = make_server(tenant_b, "theirs", ["x"])
    url = reverse("dashboard:mcp_my_requests")
    before = tenant_state(tenant_a)
    assert member.post(url, {"scope": "user", "user_id": "u", "all_tools": "on"}).status_code == 302
    assert member.get(url, {"server": str(theirs.pk)}).status_code == 404
    assert member.post(f"{url}?server={theirs.pk}", {"scope": "user", "user_id": "u"}).status_code == 404
    assert member.get(url, {"server": "not-a-uuid"}).status_code == 404
    assert tenant_state(tenant_a) == before


# --- roles and tenants --------------------------------------------------------------------------------


def _routes(tenant: Tenant) -> dict[str, tuple[str, str, dict[str, Any] | None]]:
    """Every MCP route of the dashboard on tenant objects, with a valid request for it."""
    system = Actor.system(tenant)
    pg = make_server(tenant, "pg", ["query"])
    bot = tenant_services.agent_create(actor=system, key="bot", name="Bot")
    agent_grant = services.agent_grant_set(actor=system, server=pg, agent=bot)
    user_grant = services.user_grant_set(actor=system, server=pg, user_id="ann")
    req = ask(tenant, pg)
    services.credential_set(actor=system, server=pg, user_id="ann", api_key="ann-secret-key-123")
    s, a, u = pg.pk, agent_grant.pk, user_grant.pk
    return {
        "servers": ("get", reverse("dashboard:mcp_servers"), None),
        "server": ("get", reverse("dashboard:mcp_server", args=[s]), None),
        "server_create": ("post", reverse("dashboard:mcp_server_create"), server_form(name="new")),
        "server_edit": (
            "post",
            reverse("dashboard:mcp_server_edit", args=[s]),
            server_form(display_name="X"),
        ),
        "server_enable": ("post", reverse("dashboard:mcp_server_enable", args=[s]), {"enabled": "0"}),
        "server_delete": ("post", reverse("dashboard:mcp_server_delete", args=[s]), None),
        "credential_create": (
            "post",
            reverse("dashboard:mcp_credential_create", args=[s]),
            {"user_id": "cid", "api_key": "cid-secret-key-123"},
        ),
        "credential_edit": (
            "post",
            reverse("dashboard:mcp_credential_edit", args=[s, "ann"]),
            {"headers": "X-Token: ann-token-12345"},
        ),
        "credential_delete": ("post", reverse("dashboard:mcp_credential_delete", args=[s, "ann"]), None),
        "server_test": ("post", reverse("dashboard:mcp_server_test", args=[s]), None),
        "server_refresh": ("post", reverse("dashboard:mcp_server_refresh", args=[s]), None),
        "agent_grant_create": (
            "post",
            reverse("dashboard:mcp_agent_grant_create", args=[s]),
            grant_form(agent="bot", all_tools="on"),
        ),
        "agent_grant_edit": (
            "post",
            reverse("dashboard:mcp_agent_grant_edit", args=[s, a]),
            grant_form(tool_allow=["query"]),
        ),
        "agent_grant_enable": (
            "post",
            reverse("dashboard:mcp_agent_grant_enable", args=[s, a]),
            {"enabled": "0"},
        ),
        "agent_grant_delete": ("post", reverse("dashboard:mcp_agent_grant_delete", args=[s, a]), None),
        "user_grant_create": (
            "post",
            reverse("dashboard:mcp_user_grant_create", args=[s]),
            grant_form(user_id="bob", all_tools="on"),
        ),
        "user_grant_edit": (
            "post",
            reverse("dashboard:mcp_user_grant_edit", args=[s, u]),
            grant_form(tool_allow=["query"]),
        ),
        "user_grant_enable": (
            "post",
            reverse("dashboard:mcp_user_grant_enable", args=[s, u]),
            {"enabled": "0"},
        ),
        "user_grant_delete": ("post", reverse("dashboard:mcp_user_grant_delete", args=[s, u]), None),
        "requests": ("get", reverse("dashboard:mcp_requests"), None),
        "request_review": (
            "post",
            reverse("dashboard:mcp_request_review", args=[req.pk]),
            {"decision": "approve"},
        ),
        "my_requests": (
            "post",
            f"{reverse('dashboard:mcp_my_requests')}?server={s}",
            {"scope": "user", "user_id": "u", "all_tools": "on"},
        ),
    }


ADMIN_ROUTES = [
    "server_create",
    "server_edit",
    "server_enable",
    "server_delete",
    "server_test",
    "server_refresh",
    "credential_create",
    "credential_edit",
    "credential_delete",
    "agent_grant_create",
    "agent_grant_edit",
    "agent_grant_enable",
    "agent_grant_delete",
    "user_grant_create",
    "user_grant_edit",
    "user_grant_enable",
    "user_grant_delete",
    "requests",
    "request_review",
]


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_below_admin_every_change_is_refused_and_nothing_changes(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    routes = _routes(tenant_a)
    before = tenant_state(tenant_a)
    for name in ADMIN_ROUTES:
        method, url, data = routes[name]
        assert getattr(client, method)(url, data).status_code == 403, name
    assert tenant_state(tenant_a) == before


def test_viewers_cannot_request_access(viewer, tenant_a):
    _, url, data = _routes(tenant_a)["my_requests"]
    before = tenant_state(tenant_a)
    assert viewer.post(url, data).status_code == 403
    assert viewer.get(reverse("dashboard:mcp_my_requests")).status_code == 403
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize("persona", ["admin", "owner"])
def test_admins_and_owners_can_do_everything(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    routes = _routes(tenant_a)
    # Deletions last: the server's deletion takes its grants and requests with it.
    for name in sorted(routes, key=lambda n: (n.endswith("delete"), n == "server_delete")):
        if name in {"server_test", "server_refresh"}:
            continue  # they connect: tested against a real MCP server below
        method, url, data = routes[name]
        status = getattr(client, method)(url, data).status_code
        assert status in (200, 302), (name, status)
    assert MCPServer.objects.for_tenant(tenant_a).filter(name="new").exists()
    assert not MCPServer.objects.for_tenant(tenant_a).filter(name="pg").exists()  # deleted last of its routes


def test_another_tenants_objects_are_not_found_and_nothing_changes(outsider, tenant_a, tenant_b):
    routes = _routes(tenant_a)
    before = tenant_state(tenant_a)
    before_b = tenant_state(tenant_b)
    for name, (method, url, data) in routes.items():
        if name in {"servers", "requests", "server_create"}:
            continue  # the outsider's own tenant's pages
        response = getattr(outsider, method)(url, data)
        assert response.status_code == 404, name
        assert "tenant-a" not in response.content.decode()
    assert tenant_state(tenant_a) == before
    assert tenant_state(tenant_b) == before_b


def test_the_list_and_inbox_of_another_tenant_show_nothing_of_a(outsider, tenant_a):
    _routes(tenant_a)
    listing = body(outsider.get(reverse("dashboard:mcp_servers")))
    inbox = body(outsider.get(reverse("dashboard:mcp_requests")))
    assert "No MCP servers yet." in listing
    assert "No request waits for a decision." in inbox


def test_the_server_list_query_count_is_bounded(admin, tenant_a, django_assert_max_num_queries):
    for i in range(8):
        make_server(tenant_a, f"s{i}", ["a", "b"])
    with django_assert_max_num_queries(10):
        assert admin.get(reverse("dashboard:mcp_servers")).status_code == 200


def test_the_inbox_query_count_is_bounded(admin, tenant_a, django_assert_max_num_queries):
    pg = make_server(tenant_a, "pg", ["a"])
    bot = tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    for i in range(6):
        ask(tenant_a, pg, user_id=f"u{i}")
        ask(tenant_a, pg, scope="agent", agent=bot)
    with django_assert_max_num_queries(10):
        assert admin.get(reverse("dashboard:mcp_requests")).status_code == 200


def test_no_dashboard_page_is_under_the_mcp_endpoint(tenant_a):
    """``/mcp/<agent key>/`` is Toolgate's MCP endpoint, served before Django: a dashboard page there
    would never be reached."""
    from apps.dashboard import urls_mcp
    from apps.runtime.mcp_endpoint.asgi import PATH_PATTERN

    routes = _routes(tenant_a)
    urls = [url.split("?")[0] for _, url, _ in routes.values()]
    assert len(urls) == len(urls_mcp.urlpatterns)
    for url in urls:
        assert not PATH_PATTERN.match(url), url


def test_the_server_page_query_count_is_bounded(admin, tenant_a, pg, django_assert_max_num_queries):
    system = Actor.system(tenant_a)
    for i in range(5):
        agent = tenant_services.agent_create(actor=system, key=f"a{i}", name=f"A{i}")
        services.agent_grant_set(actor=system, server=pg, agent=agent)
        services.user_grant_set(actor=system, server=pg, user_id=f"u{i}")
    # Each agent grant shows its effective tools: the servers' tools once, and one policy resolution
    # per agent (4 queries), whatever the number of tools.
    with django_assert_max_num_queries(13 + 5 * 4):
        assert admin.get(reverse("dashboard:mcp_server", args=[pg.pk])).status_code == 200


# --- "Test connection" and "Refresh tools", against a real MCP server (the SDK demo over stdio) ---------


@pytest.fixture
def demo(tenant_a: Tenant) -> MCPServer:
    return services.server_create(actor=Actor.system(tenant_a), name="demo", **stdio_fields())


def connect_url(server, action):
    return reverse(f"dashboard:mcp_server_{action}", args=[server.pk])


def test_the_buttons_are_shown_to_admins_only(admin, viewer, demo):
    page = admin.get(reverse("dashboard:mcp_server", args=[demo.pk])).content.decode()
    assert connect_url(demo, "test") in page
    assert connect_url(demo, "refresh") in page
    assert "js/mcp-forms.js" in page
    assert (
        connect_url(demo, "test")
        not in viewer.get(reverse("dashboard:mcp_server", args=[demo.pk])).content.decode()
    )


def test_test_connection_shows_the_tools_and_stores_nothing(admin, tenant_a, demo):
    response = admin.post(connect_url(demo, "test"), follow=True)
    page = response.content.decode()
    assert "Connected: demo answered in" in page
    assert "echo" in page
    assert "pid" in page
    assert not MCPServerTool.objects.for_tenant(tenant_a).filter(server=demo).exists()
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="mcp.server.tested").count() == 1


def test_refresh_stores_the_tools_shown_on_the_page(admin, tenant_a, demo):
    page = admin.post(connect_url(demo, "refresh"), follow=True).content.decode()
    assert "Tools refreshed: demo answered in" in page
    assert "mcp_demo__echo" in page  # the discovered-tools table
    assert MCPServer.objects.for_tenant(tenant_a).get(pk=demo.pk).status == "connected"


def test_an_unreachable_server_is_an_error_message(admin, tenant_a):
    broken = services.server_create(
        actor=Actor.system(tenant_a),
        name="broken",
        **{**stdio_fields(), "args": [stdio_fields()["args"][0], "nowhere"]},
    )
    page = admin.post(connect_url(broken, "test"), follow=True).content.decode()
    assert "Could not connect to broken:" in page


def test_viewers_members_and_other_tenants_cannot(viewer, member, outsider, tenant_a, demo):
    before = tenant_state(tenant_a)
    for client in (viewer, member):
        assert client.post(connect_url(demo, "refresh")).status_code == 403
    assert outsider.post(connect_url(demo, "refresh")).status_code == 404
    assert outsider.post(connect_url(demo, "test")).status_code == 404
    assert outsider.get(connect_url(demo, "test")).status_code in {404, 405}
    assert tenant_state(tenant_a) == before
    assert not MCPServerTool.objects.for_tenant(tenant_a).filter(server=demo).exists()


# --- users' own credentials -----------------------------------------------------------------------------


def test_an_admin_sets_a_users_credentials_write_only(admin, tenant_a):
    server = services.server_create(
        actor=Actor.system(tenant_a), name="remote", transport="streamable-http", url=PUBLIC_URL
    )
    create = reverse("dashboard:mcp_credential_create", args=[server.pk])
    form = body(admin.get(create))
    assert 'name="env"' not in form  # an HTTP server has no environment
    response = admin.post(
        create, {"user_id": "alice@a.test", "api_key": API_KEY, "headers": f"Authorization: {HEADER_VALUE}"}
    )
    assert response.status_code == 302
    stored = UserCredential.objects.for_tenant(tenant_a).get(server=server, user_id="alice@a.test")
    assert stored.api_key == API_KEY
    assert stored.headers == {"Authorization": HEADER_VALUE}
    page = body(admin.get(reverse("dashboard:mcp_server", args=[server.pk])))
    assert "alice@a.test" in page
    assert "<code>Authorization</code>" in page
    edit = reverse("dashboard:mcp_credential_edit", args=[server.pk, "alice@a.test"])
    shown = body(admin.get(edit))
    for secret in (API_KEY, HEADER_VALUE):
        assert secret not in page
        assert secret not in shown
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key, headers_encrypted FROM mcp_grants_usercredential")
        raw = " ".join(map(str, cursor.fetchone()))
    assert API_KEY not in raw
    assert HEADER_VALUE not in raw

    # left empty, a value is kept; a box removes it
    admin.post(edit, {"clear_api_key": "on"})
    stored.refresh_from_db()
    assert stored.api_key == ""
    assert stored.headers == {"Authorization": HEADER_VALUE}
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb__startswith="mcp.user_credential").count() == 2
    assert API_KEY not in str(list(AuditEvent.objects.for_tenant(tenant_a).values_list("data", flat=True)))


def test_removing_credentials_asks_first(admin, tenant_a):
    server = make_server(tenant_a, "pg", ["query"])
    services.credential_set(
        actor=Actor.system(tenant_a), server=server, user_id="bob", env={"TOKEN": ENV_VALUE}
    )
    url = reverse("dashboard:mcp_credential_delete", args=[server.pk, "bob"])
    assert "Remove bob" in body(admin.get(url))
    assert UserCredential.objects.for_tenant(tenant_a).filter(user_id="bob").exists()
    admin.post(url)
    assert not UserCredential.objects.for_tenant(tenant_a).filter(user_id="bob").exists()
    missing = reverse("dashboard:mcp_credential_edit", args=[server.pk, "nobody"])
    assert admin.get(missing).status_code == 404


def test_invalid_credentials_are_shown_and_nothing_is_saved(admin, tenant_a):
    server = make_server(tenant_a, "pg", ["query"])
    before = tenant_state(tenant_a)
    response = admin.post(
        reverse("dashboard:mcp_credential_create", args=[server.pk]),
        {"user_id": "carol", "env": "not a pair"},
    )
    assert response.status_code == 200
    assert "Line 1: write one entry a line" in body(response)
    assert tenant_state(tenant_a) == before
