"""The MCP pages in a real browser: an access request made by a member arrives live in the
administrator's open inbox (so does one made elsewhere, named like markup: shown as text); approving
it there turns it approved, and the member's open "My access requests" page shows the decision live;
the servers list follows the client manager's status and discovery, enabling and new servers live.
Headless Chromium against a real daphne on the test database. The browser thread makes no ORM calls
while Playwright runs: changes made "elsewhere" go through the services in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from playwright.sync_api import expect, sync_playwright

from apps.accounts import services as tenant_services
from apps.mcp_grants import client, services
from apps.mcp_grants.models import AccessRequest, AgentGrant, MCPServer, UserGrant
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot
from tests.mcp.support import make_server

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

MARKUP = 'Need it <img src=x onerror="window.__xss=1">'
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)


def elsewhere(pool: ThreadPoolExecutor, change: Callable[[], Any]) -> Any:
    """Run ``change`` (ORM work) in a worker thread, as another process would, and wait for it."""

    def run() -> Any:
        try:
            return change()
        finally:
            connection.close()

    return pool.submit(run).result(timeout=30)


@needs_chromium
def test_a_request_arrives_live_and_the_requester_sees_the_approval_live(live):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@initech.test")
    member = factories.make_user(tenant, Role.MEMBER, email="member@initech.test")
    system = Actor.system(tenant)
    tenant_services.agent_create(actor=system, key="reporter", name="Reporter")
    pg = make_server(tenant, "pg", ["query", "schema", "drop"], enabled=False)
    server_id = str(pg.pk)

    with sync_playwright() as playwright, ThreadPoolExecutor(1) as pool:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            admin_page = browser.new_context(
                viewport={"width": 1400, "height": 900}, base_url=base
            ).new_page()
            member_page = browser.new_context(
                viewport={"width": 1400, "height": 900}, base_url=base
            ).new_page()
            for page in (admin_page, member_page):
                page.set_default_timeout(10_000)
            log_in(admin_page, base, admin.email)
            log_in(member_page, base, member.email)

            # The administrator opens the inbox: nothing waits.
            admin_page.get_by_role("navigation", name="Sections").get_by_role("link", name="MCP").click()
            admin_page.get_by_role("navigation", name="MCP pages").get_by_role(
                "link", name="Access requests", exact=True
            ).click()
            expect(admin_page.get_by_role("heading", name="MCP access requests")).to_be_visible()
            expect(admin_page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            expect(admin_page.get_by_text("No request waits for a decision.")).to_be_visible()
            admin_page.evaluate("window.__sameDocument = true")

            # The member asks for two tools of pg for themselves.
            member_page.goto("/mcp-requests/mine/")
            member_page.get_by_label("Server").select_option(server_id)  # the chooser opens the form
            expect(member_page.get_by_label("User id")).to_have_value("member@initech.test")
            member_page.get_by_label("query").check()
            member_page.get_by_label("schema").check()
            member_page.get_by_label("Why").fill("nightly reports")
            member_page.get_by_role("button", name="Request access").click()
            expect(
                member_page.get_by_role("status").filter(has_text="Access to pg requested")
            ).to_be_visible()
            mine = member_page.locator("table[data-my-requests] tbody tr")
            expect(mine).to_have_count(1)
            expect(mine.first.locator('[data-field="status"]')).to_have_text("Pending")
            expect(member_page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            member_page.evaluate("window.__sameDocument = true")

            # It arrives in the open inbox without a reload; so does one made elsewhere, as text.
            rows = admin_page.locator("table[data-mcp-requests] tbody tr")
            expect(rows).to_have_count(1, timeout=15_000)
            expect(rows.first).to_contain_text("nightly reports")
            expect(rows.first).to_contain_text("member@initech.test")
            expect(rows.first).to_contain_text("query")
            elsewhere(
                pool,
                lambda: services.request_create(
                    actor=system,
                    server=MCPServer.objects.for_tenant(tenant).get(pk=server_id),
                    scope="user",
                    user_id="u-7",
                    reason=MARKUP,
                ),
            )
            expect(rows).to_have_count(2)
            expect(rows.nth(1)).to_contain_text("Need it <img")
            assert admin_page.locator("table[data-mcp-requests] img").count() == 0
            assert admin_page.evaluate("window.__xss") is None
            assert admin_page.evaluate("window.__sameDocument") is True
            shot(admin_page, "mcp-inbox")

            # The administrator approves the member's request from its row, with a note.
            first = rows.filter(has_text="nightly reports")
            first.get_by_placeholder("Note (optional)").fill("ok for reports")
            first.get_by_role("button", name="Approve").click()
            expect(admin_page.get_by_role("status").filter(has_text="approved")).to_be_visible()
            decided = admin_page.locator("table[data-mcp-decided] tbody tr")
            expect(decided).to_have_count(1)
            expect(decided.first).to_contain_text("Approved")
            expect(decided.first).to_contain_text("ok for reports")
            expect(rows).to_have_count(1)  # the markup one still waits

            # The member's open page shows the decision live.
            expect(mine.first.locator('[data-field="status"]')).to_have_text("Approved", timeout=15_000)
            expect(mine.first.locator('[data-field="review"]')).to_contain_text("admin@initech.test")
            expect(mine.first.locator('[data-field="review"]')).to_contain_text("ok for reports")
            assert member_page.evaluate("window.__sameDocument") is True
            shot(member_page, "mcp-my-requests")

            # The other request is rejected on its review page with a note.
            rows.first.get_by_role("link", name="Review…").click()
            admin_page.get_by_label("Note").fill("ask for specific tools")
            admin_page.get_by_role("button", name="Reject").click()
            # A rejection is confirmed on a page that shows the note the requester will read.
            expect(admin_page.get_by_role("heading", name="Reject this access request?")).to_be_visible()
            expect(admin_page.locator("blockquote")).to_have_text("ask for specific tools")
            admin_page.get_by_role("button", name="Reject the request").click()
            expect(admin_page.get_by_text("No request waits for a decision.")).to_be_visible()
        finally:
            browser.close()

    grant = UserGrant.objects.for_tenant(tenant).get()
    assert (grant.user_id, grant.tool_allow, grant.enabled, grant.granted_by) == (
        "member@initech.test",
        ["query", "schema"],
        True,
        "admin@initech.test",
    )
    requests = AccessRequest.objects.for_tenant(tenant).order_by("created_at")
    assert [(r.status, r.review_note, r.requester_kind) for r in requests] == [
        ("approved", "ok for reports", "user"),
        ("rejected", "ask for specific tools", "system"),
    ]


@needs_chromium
def test_the_servers_list_follows_state_changes_and_new_servers_live(live):
    base = live.daphne()
    tenant = factories.make_tenant("globex")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@globex.test")
    system = Actor.system(tenant)
    pg = make_server(tenant, "pg", ["query"], enabled=False)
    tenant_services.agent_create(actor=system, key="reporter", name="Reporter")
    server_id = str(pg.pk)

    def connected() -> None:
        server = MCPServer.objects.for_tenant(tenant).get(pk=server_id)
        health = {
            "status": "connected",
            "checked_at": "2026-01-05T10:00:00+00:00",
            "error": "",
            "latency_ms": 3.2,
        }
        client.record_status(client.endpoint_for(server), "connected", health, True)

    def discovered() -> None:
        server = MCPServer.objects.for_tenant(tenant).get(pk=server_id)
        found = [
            client.ToolInfo("query", "Run a query", {"type": "object"}),
            client.ToolInfo("schema", "", {}),
        ]
        client.store_tools(client.endpoint_for(server), found)

    with sync_playwright() as playwright, ThreadPoolExecutor(1) as pool:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=base).new_page()
            page.set_default_timeout(10_000)
            log_in(page, base, admin.email)
            page.goto("/mcp-servers/")
            expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            row = page.locator(f'tr[data-id="{server_id}"]')
            expect(row.locator('[data-field="status"]')).to_have_text("Unknown")
            expect(row.locator('[data-field="enabled"]')).to_be_visible()
            page.evaluate("window.__sameDocument = true")

            elsewhere(pool, connected)
            expect(row.locator('[data-field="status"]')).to_have_text("Connected")
            elsewhere(pool, discovered)
            expect(row.locator('[data-field="tools"]')).to_have_text("2")
            elsewhere(
                pool,
                lambda: services.server_update(
                    actor=system, server=MCPServer.objects.for_tenant(tenant).get(pk=server_id), enabled=True
                ),
            )
            expect(row.locator('[data-field="enabled"]')).to_be_hidden()
            elsewhere(
                pool,
                lambda: services.server_create(
                    actor=system,
                    name="search",
                    transport="sse",
                    url="https://93.184.216.34/sse",
                    enabled=False,
                ),
            )
            added = page.locator("table[data-mcp-servers] tbody tr").filter(has_text="search")
            expect(added).to_have_count(1)
            expect(added.locator('[data-field="transport"]')).to_have_text("SSE")
            assert page.evaluate("window.__sameDocument") is True
            shot(page, "mcp-servers")

            # Disabling from the page itself goes through the form.
            row.get_by_role("button", name="Disable").click()
            expect(page.get_by_role("status").filter(has_text="MCP server pg disabled.")).to_be_visible()

            # The server form shows the fields of the transport chosen.
            page.get_by_role("link", name="Add server").click()
            expect(page.get_by_label("Command")).to_be_visible()
            expect(page.get_by_label("URL")).to_be_hidden()
            page.get_by_label("Transport").select_option("sse")
            expect(page.get_by_label("URL")).to_be_visible()
            expect(page.get_by_label("Command")).to_be_hidden()
            expect(page.get_by_label("Environment")).to_be_hidden()

            # The server's page: its tools with their registered names; a grant with the tool picker.
            page.goto(f"/mcp-servers/{server_id}/")
            expect(page.locator("[data-mcp-tools]")).to_contain_text("mcp_pg__query")
            expect(page.locator('[data-mcp-server] [data-field="status"]')).to_have_text("Connected")
            shot(page, "mcp-server")
            page.get_by_role("link", name="Grant to an agent").click()
            page.get_by_label("Agent", exact=True).select_option("reporter")
            page.get_by_label("query").first.check()
            page.get_by_role("button", name="Grant", exact=True).click()
            expect(page.locator('table[data-grants="agent"]')).to_contain_text("reporter")
            shot(page, "mcp-server-granted")
        finally:
            browser.close()

    pg.refresh_from_db()
    assert (pg.status, pg.enabled) == ("connected", False)
    grant = AgentGrant.objects.for_tenant(tenant).get()
    assert (grant.agent.key, grant.tool_allow, grant.granted_by) == (
        "reporter",
        ["query"],
        "admin@globex.test",
    )
