"""The Overview in a real browser: the charts and the "needs you" strip load from the aggregate
endpoints, a tool call made through the API moves the count live, the range switch reads the other
range in place, and a member sees their own version. Headless Chromium against a real daphne on the test
database; the data is set up before the browser starts (no ORM calls while Playwright's loop runs).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.mcp_grants.models import MCPServer
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_the_overview_charts_and_needs_you_live(live):
    base = live.daphne()
    tenant = factories.make_tenant("overview")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@overview.test")
    member = factories.make_user(tenant, Role.MEMBER, email="member@overview.test")
    services.agent_create(actor=Actor.system(tenant), key="helper", name="Helper")
    loop_key = factories.make_api_key(tenant, Role.MEMBER, name="agent-loop")
    now = timezone.now()
    for minutes, actor, tool in (
        (2, ("user", str(member.pk)), "member-tool"),
        (3, ("user", str(member.pk)), "member-tool"),
        (4, ("user", str(member.pk)), "member-tool"),
        (60 * 24 * 3, ("system", "system"), "old-tool"),
        (60 * 24 * 3 + 1, ("system", "system"), "old-tool"),
    ):
        call = ToolCall.objects.create(
            tenant=tenant,
            agent_key="helper",
            tool=tool,
            decision="allowed",
            status="ok",
            duration_ms=12.5,
            actor_kind=actor[0],
            actor_id=actor[1],
        )
        ToolCall.objects.for_tenant(tenant).filter(pk=call.pk).update(
            created_at=now - timedelta(minutes=minutes)
        )
    MCPServer.objects.create(
        tenant=tenant,
        name="broken",
        transport="streamable-http",
        url="https://example.com/mcp",
        status=MCPServer.Status.ERROR,
    )
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {loop_key}"}, timeout=10)
    errors: list[str] = []

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=base)
            page = context.new_page()
            page.on(
                "console", lambda m: errors.append(f"{m.text} {m.location}") if m.type == "error" else None
            )
            page.set_default_timeout(10_000)
            log_in(page, base, admin.email)

            charts = page.locator(".overview-charts")
            calls = page.locator('[data-chart="calls"]')
            expect(page.locator("[data-overview-needs]")).to_have_attribute("data-loaded", "true")
            expect(page.locator(".uplot")).to_have_count(3)
            expect(calls).to_have_attribute("data-total", "3")
            expect(calls.locator("[data-summary]")).to_contain_text("3 calls in the last day: 3 ok")
            expect(page.locator('[data-need="mcp_servers_not_connected"] [data-need-value]')).to_have_text(
                "1"
            )
            expect(page.locator('[data-need="approvals_waiting"] [data-need-value]')).to_have_text("0")
            expect(page.locator('[data-top="tools"]')).to_contain_text("member-tool")
            expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            shot(page, "overview")

            # A call through the API moves the count without a reload.
            page.evaluate("window.__sameDocument = true")
            response = api.post(
                "/api/v1/runtime/execute", json={"agent": "helper", "tool": "datetime", "args": {}}
            )
            assert response.status_code == 200, response.text
            expect(calls).to_have_attribute("data-total", "4", timeout=15_000)
            expect(page.locator('[data-top="tools"]')).to_contain_text("datetime")

            # The range switch reads the week in place.
            page.get_by_role("link", name="Last week", exact=True).click()
            expect(charts).to_have_attribute("data-loaded-range", "week")
            expect(calls).to_have_attribute("data-total", "6")
            expect(page.locator('[data-top="tools"]')).to_contain_text("old-tool")
            expect(page.get_by_role("link", name="Last week", exact=True)).to_have_attribute(
                "aria-current", "true"
            )
            assert page.evaluate("window.__sameDocument") is True
            assert page.url.endswith("?range=week")

            # A member sees their own calls only.
            member_page = browser.new_context(
                viewport={"width": 1280, "height": 900}, base_url=base
            ).new_page()
            member_page.set_default_timeout(10_000)
            log_in(member_page, base, member.email)
            member_calls = member_page.locator('[data-chart="calls"]')
            expect(member_calls).to_have_attribute("data-total", "3")
            expect(member_page.locator("[data-overview-status]")).to_contain_text("your own calls")
            expect(member_page.locator('[data-need="mcp_servers_not_connected"]')).to_have_count(0)
            expect(member_page.locator('[data-top="tools"]')).not_to_contain_text("datetime")
            shot(member_page, "overview-member")

            # At phone width the charts and the strip fit their section (no sideways scrolling in it).
            member_page.set_viewport_size({"width": 390, "height": 844})
            member_page.reload()
            expect(member_calls).to_have_attribute("data-total", "3")
            member_page.wait_for_function(
                "document.querySelector('[data-chart=\\'calls\\'] .uplot').offsetWidth"
                " <= document.querySelector('[data-chart=\\'calls\\']').clientWidth"
            )
            for section in (".overview-charts", "[data-overview-needs]"):
                fits = member_page.evaluate(
                    "s => { const n = document.querySelector(s); return n.scrollWidth <= n.clientWidth; }",
                    section,
                )
                assert fits, section
            shot(member_page, "overview-member-phone")
        finally:
            browser.close()
            api.close()

    assert not errors, errors
    assert ToolCall.objects.for_tenant(tenant).count() == 6
