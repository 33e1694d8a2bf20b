"""Consequences shown where MCP decisions are made, in a real browser: a grant whose tools the agent's
policy removes shows its effective tools and a warning naming the removed ones (with a link to the
policy); a server's tool list follows discovery without a reload; a request approved with fewer tools
than asked shows the granted ones, live on the requester's page and on both pages after a reload.
Headless Chromium against a real daphne on the test database; changes made "elsewhere" go through the
services in a worker thread (the browser thread makes no ORM calls while Playwright runs)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from apps.accounts import services as tenant_services
from apps.mcp_grants import client, services
from apps.mcp_grants.models import AccessRequest, MCPServer
from apps.policy import services as policy_services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot
from tests.browser.test_mcp_browser import elsewhere
from tests.mcp.support import make_server

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)


@needs_chromium
def test_a_grant_whose_tools_the_policy_removes_shows_the_warning_and_discovered_tools_appear_live(live):
    base = live.daphne()
    tenant = factories.make_tenant("umbrella")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@umbrella.test")
    system = Actor.system(tenant)
    reporter = tenant_services.agent_create(actor=system, key="reporter", name="Reporter")
    auditor = tenant_services.agent_create(actor=system, key="auditor", name="Auditor")
    pg = make_server(tenant, "pg", ["query", "schema", "drop"])
    services.agent_grant_set(actor=system, server=pg, agent=reporter)
    services.agent_grant_set(actor=system, server=pg, agent=auditor, tool_allow=["query"])
    policy_services.policy_save(
        system, policy_services.target("agent", agent=reporter), {"deny": ["mcp_pg__drop", "mcp_pg__schema"]}
    )
    server_id = str(pg.pk)

    def discovered() -> None:
        server = MCPServer.objects.for_tenant(tenant).get(pk=server_id)
        found = [
            client.ToolInfo("query", "Run a <b>query</b>", {"type": "object"}),
            client.ToolInfo("explain", "Explain a plan", {}),
        ]
        client.store_tools(client.endpoint_for(server), found)

    with sync_playwright() as playwright, ThreadPoolExecutor(1) as pool:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=base).new_page()
            page.set_default_timeout(10_000)
            log_in(page, base, admin.email)
            page.goto(f"/mcp-servers/{server_id}/")
            grants = page.locator('table[data-grants="agent"]')
            reporter_row = grants.locator("tr").filter(has_text="reporter")
            effective = reporter_row.locator('[data-field="effective"]')
            expect(effective).to_contain_text("Effective tools:")
            expect(effective.locator(".effective-tools code")).to_have_text(["mcp_pg__query"])
            warning = effective.locator("[data-policy-removes]")
            expect(warning).to_be_visible()
            expect(warning).to_contain_text("Warning: Policy removes 2 of 3 tools:")
            expect(warning.locator("code")).to_have_text(["mcp_pg__drop", "mcp_pg__schema"])
            # The policy leaves the other agent's one tool alone: no warning on its grant.
            auditor_row = grants.locator("tr").filter(has_text="auditor")
            expect(auditor_row.locator(".effective-tools code")).to_have_text(["mcp_pg__query"])
            expect(auditor_row.locator("[data-policy-removes]")).to_have_count(0)
            expect(warning.get_by_role("link", name="Open the policy of reporter")).to_have_attribute(
                "href", "/policy/agents/reporter/"
            )
            shot(page, "mcp-grant-policy-warning")

            # Discovery changes the tools: the list follows without a reload, as text.
            page.evaluate("window.__sameDocument = true")
            expect(page.locator('[data-field="tool-count"]')).to_have_text("3")
            elsewhere(pool, discovered)
            tools = page.locator("[data-mcp-tools] tbody tr")
            expect(tools).to_have_count(2)
            expect(page.locator('[data-field="tool-count"]')).to_have_text("2")
            expect(page.locator('tr[data-tool="explain"]')).to_contain_text("mcp_pg__explain")
            expect(page.locator('tr[data-tool="query"]')).to_contain_text("Run a <b>query</b>")
            expect(page.locator("[data-mcp-tools] b")).to_have_count(0)
            expect(page.locator("[data-tools-changed]")).to_be_visible()
            assert page.evaluate("window.__sameDocument") is True

            # After a reload, each grant's effective tools follow the new tools: the policy's denied
            # ones are gone, so the warning is too.
            page.reload()
            expect(reporter_row.locator(".effective-tools code")).to_have_text(
                ["mcp_pg__explain", "mcp_pg__query"]
            )
            expect(reporter_row.locator("[data-policy-removes]")).to_have_count(0)
        finally:
            browser.close()


@needs_chromium
def test_an_approved_with_fewer_request_shows_the_granted_tools(live):
    base = live.daphne()
    tenant = factories.make_tenant("hooli")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@hooli.test")
    member = factories.make_user(tenant, Role.MEMBER, email="member@hooli.test")
    system = Actor.system(tenant)
    tenant_services.agent_create(actor=system, key="reporter", name="Reporter")
    server_id = str(make_server(tenant, "pg", ["query", "schema", "drop"]).pk)

    with sync_playwright() as playwright, ThreadPoolExecutor(1) as pool:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            member_page = browser.new_context(
                viewport={"width": 1400, "height": 900}, base_url=base
            ).new_page()
            member_page.set_default_timeout(10_000)
            log_in(member_page, base, member.email)
            member_page.goto("/mcp-requests/mine/")
            member_page.get_by_label("Server").select_option(server_id)  # the chooser opens the form
            expect(member_page.get_by_label("User id")).to_have_value("member@hooli.test")
            for tool in ("query", "schema", "drop"):
                member_page.get_by_label(tool, exact=True).check()
            member_page.get_by_role("button", name="Request access").click()
            row = member_page.locator("table[data-my-requests] tbody tr").first
            expect(row.locator('[data-field="status"]')).to_have_text("Pending")
            expect(row.locator('[data-field="tools"] code')).to_have_text(["drop", "query", "schema"])
            expect(member_page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            member_page.evaluate("window.__sameDocument = true")

            def approve_fewer() -> None:
                req = AccessRequest.objects.for_tenant(tenant).get()
                services.request_review(
                    actor=Actor.system(tenant),
                    request_id=req.pk,
                    approved=True,
                    note="read first",
                    tool_allow=["query"],
                )

            elsewhere(pool, approve_fewer)
            expect(row.locator('[data-field="status"]')).to_have_text("Approved")
            tools = row.locator('[data-field="tools"]')
            expect(tools.locator(".granted-tools")).to_contain_text("Granted")
            expect(tools.locator(".granted-tools code")).to_have_text(["query"])
            expect(tools.locator(".left-out-tools")).to_contain_text("Asked for, not granted")
            expect(tools.locator(".left-out-tools del code")).to_have_text(["drop", "schema"])
            assert member_page.evaluate("window.__sameDocument") is True
            shot(member_page, "mcp-request-granted-live")

            # After a reload, the page says the same.
            member_page.reload()
            tools = member_page.locator('table[data-my-requests] tbody tr [data-field="tools"]').first
            expect(tools.locator(".granted-tools code")).to_have_text(["query"])
            expect(tools.locator(".left-out-tools del code")).to_have_text(["drop", "schema"])

            # The administrator's inbox lists it as decided, with the granted tools.
            admin_page = browser.new_context(
                viewport={"width": 1400, "height": 900}, base_url=base
            ).new_page()
            admin_page.set_default_timeout(10_000)
            log_in(admin_page, base, admin.email)
            admin_page.goto("/mcp-requests/")
            decided = admin_page.locator("table[data-mcp-decided] tbody tr").first
            expect(decided.locator(".request-status")).to_have_text("Approved")
            expect(decided.locator(".granted-tools code")).to_have_text(["query"])
            expect(decided.locator(".left-out-tools del code")).to_have_text(["drop", "schema"])
        finally:
            browser.close()
