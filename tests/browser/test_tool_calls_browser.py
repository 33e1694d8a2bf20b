"""The runtime pages in a real browser: the tool catalog, the runtime settings form, and the tool-call log
updated live while a call is made through the API. Headless Chromium against a real daphne on the test
database; like tests/browser/test_dashboard_browser.py, the data is set up before the browser starts and
checked in the database after it has closed (no ORM calls while Playwright's loop runs).
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

XSS_TOOL = '<img src=x onerror="window.__xss=1">'


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_a_tool_call_made_through_the_api_appears_live(live):
    base = live.daphne()
    tenant = factories.make_tenant("umbrella")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@umbrella.test")
    services.agent_create(actor=Actor.system(tenant), key="helper", name="Helper")
    member_key = factories.make_api_key(tenant, Role.MEMBER, name="agent-loop")
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {member_key}"}, timeout=10)

    def execute(tool: str, args: dict[str, str], session_key: str) -> dict[str, object]:
        response = api.post(
            "/api/v1/runtime/execute",
            json={"agent": "helper", "tool": tool, "args": args, "context": {"session_key": session_key}},
        )
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=base)
            page = context.new_page()
            page.set_default_timeout(10_000)
            log_in(page, base, admin.email)

            # The catalog: every tool of this deployment runs (none says unavailable); a tool's parameters
            # open in place.
            page.get_by_role("navigation", name="Sections").get_by_role(
                "link", name="Tools", exact=True
            ).click()
            expect(page.get_by_role("heading", name="Tools", exact=True)).to_be_visible()
            expect(page.locator("#tool-credentialed_exec")).to_be_visible()
            expect(page.locator("[data-unavailable]")).to_have_count(0)
            page.screenshot(path=str(SCREENSHOTS / "dashboard-tools-top.png"))
            page.locator("#tool-read_file summary").first.click()
            expect(page.locator("#tool-read_file table")).to_contain_text("required")
            shot(page, "tools")
            page.locator("#group-fs").screenshot(path=str(SCREENSHOTS / "dashboard-tools-fs.png"))
            page.locator("#profiles").screenshot(path=str(SCREENSHOTS / "dashboard-tools-profiles.png"))

            # Runtime settings: a bad value is shown next to its field; a good one is saved.
            page.get_by_role("link", name="Runtime settings").click()
            page.get_by_label("Per-tool settings").fill('{"no_such_tool": {}}')
            page.get_by_role("button", name="Save settings").click()
            expect(page.locator("#id_tools_error")).to_contain_text("Unknown tools: no_such_tool.")
            shot(page, "runtime-settings-error")
            page.get_by_label("Per-tool settings").fill('{"exec": {"timeout": 60}}')
            page.get_by_role("button", name="Save settings").click()
            expect(page.get_by_role("status").filter(has_text="Runtime settings saved")).to_be_visible()
            row = page.locator('[data-setting="tools"]')
            expect(row).to_contain_text('{"exec": {"timeout": 60}}')
            expect(row).to_contain_text("set for this tenant")
            expect(page.locator('[data-policy="rate_limit_per_hour"]')).to_contain_text(
                "150 calls per session per hour"
            )
            shot(page, "runtime-settings")

            # The agent page shows what is in effect for the agent, and where each value comes from.
            page.goto("/agents/helper/edit/")
            agent_row = page.locator('[data-setting="tools"]')
            expect(agent_row).to_contain_text("set for this tenant")
            expect(page.locator('[data-policy="profile"]')).to_contain_text("default")
            shot(page, "agent-runtime")

            # With the tool-call log open, a call made through the API shows up without a reload.
            page.get_by_role("link", name="Tool calls").click()
            expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            expect(page.get_by_text("No tool calls.")).to_be_visible()
            page.evaluate("window.__sameDocument = true")

            result = execute("datetime", {"timezone": "Europe/Paris"}, "chat-1")
            assert result["is_error"] is False, result
            rows = page.locator("table.tool-call-table tbody tr")
            expect(rows).to_have_count(1, timeout=15_000)
            first = rows.first
            expect(first).to_have_attribute("data-id", re.compile(r"^[0-9a-f-]{32,36}$"))
            expect(first).to_contain_text("datetime")
            expect(first).to_contain_text("Allowed")
            expect(first).to_contain_text("chat-1")
            expect(first).to_contain_text("helper")
            first.locator("details.args summary").click()
            expect(first.locator("details.args pre")).to_contain_text('"timezone": "Europe/Paris"')

            # An unknown tool named like markup: shown as text, never run as markup.
            execute(XSS_TOOL, {}, "chat-1")
            expect(rows).to_have_count(2)
            expect(rows.first).to_contain_text("Unknown tool")
            expect(rows.first.locator("td.tool-cell code")).to_have_text(XSS_TOOL)
            assert rows.first.locator("img").count() == 0
            assert page.evaluate("window.__xss") is None
            assert page.evaluate("window.__sameDocument") is True
            shot(page, "tool-calls")

            # The page's filters apply to live rows too: a session filter leaves other sessions out.
            page.get_by_label("Session key").fill("chat-2")
            page.get_by_role("button", name="Filter").click()
            expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            expect(page.get_by_text("No tool calls match these filters.")).to_be_visible()
            execute("datetime", {}, "chat-1")
            execute("datetime", {}, "chat-2")
            expect(rows).to_have_count(1)
            expect(rows.first).to_contain_text("chat-2")
            assert "chat-1" not in page.locator("table.tool-call-table").inner_text()
        finally:
            browser.close()
            api.close()

    calls = ToolCall.objects.for_tenant(tenant)
    assert calls.count() == 4
    assert calls.filter(tool="datetime", decision=ToolCall.Decision.ALLOWED).count() == 3
    assert tenant.__class__.objects.get(pk=tenant.pk).settings == {"tools": {"exec": {"timeout": 60}}}
