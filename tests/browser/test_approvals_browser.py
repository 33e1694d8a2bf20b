"""The approvals inbox in a real browser: an exec call made through the API waits, its approval arrives
live in the open inbox and the navigation badge counts it; deciding it from the page completes the
waiting call. Headless Chromium against a real daphne on the test database; data is set up before the
browser starts and checked in the database after it has closed (no ORM calls while Playwright runs).
"""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.policy import services as policy_services
from apps.policy.approval_models import PendingApproval
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

MARKUP = '<img src=x onerror="window.__xss=1">'


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_an_approval_arrives_live_and_deciding_it_completes_the_waiting_call(live):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@initech.test")
    services.agent_create(actor=Actor.system(tenant), key="helper", name="Helper")
    policy_services.policy_save(
        Actor.system(tenant), policy_services.target("tenant"), {"execApproval": {"ask": "on-miss"}}
    )
    member_key = factories.make_api_key(tenant, Role.MEMBER, name="agent-loop")

    def execute(command: str) -> dict[str, object]:
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {member_key}"}, timeout=60
        ) as api:
            response = api.post(
                "/api/v1/runtime/execute",
                json={"agent": "helper", "tool": "exec", "args": {"command": command}},
            )
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    with sync_playwright() as playwright, ThreadPoolExecutor(2) as pool:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=base)
            page = context.new_page()
            page.set_default_timeout(10_000)
            log_in(page, base, admin.email)
            page.get_by_role("navigation", name="Sections").get_by_role("link", name="Approvals").click()
            expect(page.get_by_role("heading", name="Approvals", exact=True)).to_be_visible()
            expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            expect(page.get_by_text("Nothing waits for a decision.")).to_be_visible()
            badge = page.locator('[data-nav-badge="approvals"]')
            expect(badge).to_be_hidden()
            page.evaluate("window.__sameDocument = true")

            # A waiting call: its approval shows up without a reload, and the badge counts it.
            waiting = pool.submit(execute, "touch from-the-browser && echo approved-in-the-browser")
            rows = page.locator("table.approvals-table tbody tr")
            expect(rows).to_have_count(1, timeout=15_000)
            expect(rows.first).to_contain_text("touch from-the-browser")
            expect(rows.first).to_contain_text("helper")
            expect(badge).to_have_text("1")
            expect(badge).to_be_visible()
            assert page.evaluate("window.__sameDocument") is True

            # A second one, named like markup: text, never markup.
            refused = pool.submit(execute, f"touch '{MARKUP}'")
            expect(rows).to_have_count(2)
            expect(badge).to_have_text("2")
            assert page.locator("table.approvals-table img").count() == 0
            assert page.evaluate("window.__xss") is None
            shot(page, "approvals-inbox")

            # Allow once from the row: the waiting call completes with the command's output.
            first = rows.filter(has_text="from-the-browser")
            first.get_by_placeholder("Reason (optional)").fill("checked the diff")
            first.get_by_role("button", name="Allow once").click()
            expect(page.get_by_role("status").filter(has_text="allowed once")).to_be_visible()
            result = waiting.result(timeout=15)
            assert result["is_error"] is False, result
            assert "approved-in-the-browser" in str(result["for_llm"])
            expect(badge).to_have_text("1")

            # Deny goes through a confirmation with a reason; the other call is refused with it.
            rows.filter(has_text="touch '<img").get_by_role("link", name="Deny…").click()
            expect(page.get_by_role("heading", name="Deny this command?")).to_be_visible()
            page.get_by_label("Reason (shown to the agent)").fill("no markup files")
            page.get_by_role("button", name="Deny", exact=True).click()
            expect(page.get_by_text("Nothing waits for a decision.")).to_be_visible()
            denied = refused.result(timeout=15)
            assert denied["is_error"] is True
            assert "no markup files" in str(denied["for_llm"])
            expect(badge).to_be_hidden()
            shot(page, "approvals-resolved")
        finally:
            browser.close()

    approvals = PendingApproval.objects.for_tenant(tenant)
    assert sorted(approvals.values_list("status", "decided_by_label")) == [
        ("allowed", "admin@initech.test"),
        ("denied", "admin@initech.test"),
    ]
    decisions = sorted(ToolCall.objects.for_tenant(tenant).values_list("decision", flat=True))
    assert decisions == ["allowed", "approval_denied"]


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_a_pending_row_stops_being_actionable_at_its_expiry(live):
    base = live.daphne()
    tenant = factories.make_tenant("initrode")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@initrode.test")
    agent = services.agent_create(actor=Actor.system(tenant), key="helper", name="Helper")
    _ask(tenant, agent, "touch expiring.txt", 12)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=base)
            page = context.new_page()
            page.set_default_timeout(10_000)
            log_in(page, base, admin.email)
            page.goto(f"{base}/approvals/")
            row = page.locator("table.approvals-table tbody tr", has_text="touch expiring.txt")
            expect(row).to_have_count(1)
            allow = row.get_by_role("button", name="Allow once")
            expect(allow).to_be_enabled()
            expect(allow).to_be_disabled(timeout=20_000)
            expect(row.get_by_role("button", name="Allow always")).to_be_disabled()
            deny = row.locator("a.button.danger")
            expect(deny).to_have_attribute("aria-disabled", "true")
            assert deny.get_attribute("href") is None
            expect(row).to_contain_text("expired")
            shot(page, "approvals-expired-row")
        finally:
            browser.close()


def _ask(tenant, agent, command: str, seconds: float) -> PendingApproval:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from apps.policy import approval_services

    approval = approval_services.approval_request(
        actor=Actor.system(tenant),
        agent=agent,
        call_id=uuid.uuid4().hex,
        tool="exec",
        command=command,
        cwd="",
        shapes=[{"command": command, "binary_path": "/usr/bin/touch", "shape": "/usr/bin/touch *"}],
        reason="approval required",
        package_install=False,
        origin="user",
        session_key="s-1",
        user_id="",
        wait=True,  # nobody waits: the page alone notices the expiry
    )
    expires = approval_services.database_now() + timedelta(seconds=seconds)
    PendingApproval.objects.for_tenant(tenant).filter(pk=approval.pk).update(expires_at=expires)
    return approval


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_rows_count_down_and_leave_at_expiry_and_allow_always_confirms_its_rule(live):
    from apps.policy.approval_models import ApprovalRule

    base = live.daphne()
    tenant = factories.make_tenant("umbrella")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@umbrella.test")
    agent = services.agent_create(actor=Actor.system(tenant), key="helper", name="Helper")
    short = _ask(tenant, agent, "touch soon-gone.txt", 16)
    kept = _ask(tenant, agent, "touch kept.txt", 600)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=base)
            page = context.new_page()
            page.set_default_timeout(10_000)
            log_in(page, base, admin.email)
            page.goto(f"{base}/approvals/")
            pending = page.locator("table.approvals-table tbody tr")
            expect(pending).to_have_count(2)

            # Allow always shows the exact rule first; nothing is stored until it is confirmed.
            pending.filter(has_text="kept.txt").get_by_role("button", name="Allow always").click()
            expect(page.get_by_role("heading", name="Allow always: confirm the rule")).to_be_visible()
            preview = page.locator("table.rule-preview tbody tr")
            expect(preview).to_have_count(1)
            expect(preview).to_contain_text("/usr/bin/touch *")
            expect(preview).to_contain_text("agent helper")
            expect(preview).to_contain_text("admin@umbrella.test")
            expect(preview).to_contain_text("new rule")
            page.get_by_role("button", name="Create the rule and allow").click()
            expect(page.get_by_role("status").filter(has_text="allowed always")).to_be_visible()

            # The other counts down in text, then stops being actionable and leaves the list, live.
            row = pending.filter(has_text="soon-gone.txt")
            countdown = row.locator("[data-countdown-text]")
            expect(countdown).to_have_text(re.compile(r"^\d+ s left$"))
            first = countdown.text_content()
            expect(countdown).not_to_have_text(first or "")
            recent = page.locator("[data-approvals-recent] tbody tr")
            shot(page, "approvals-countdown")
            expect(row).to_contain_text("expired", timeout=25_000)
            expect(row.get_by_role("button", name="Allow once")).to_be_disabled()
            expect(pending).to_have_count(1)  # the empty-list row
            expect(page.get_by_text("Nothing waits for a decision.")).to_be_visible()
            moved = recent.filter(has_text="soon-gone.txt")
            expect(moved.locator('[data-outcome="timed_out"]')).to_have_text("⊘ Timed out")
            expect(page.locator("[data-approvals-announce]")).to_contain_text("expired and was refused")
            allowed = recent.filter(has_text="kept.txt")
            expect(allowed.locator('[data-outcome="allowed"]')).to_contain_text("Allowed")
            shot(page, "approvals-left-at-expiry")
        finally:
            browser.close()

    rule = ApprovalRule.objects.for_tenant(tenant).get()
    assert (rule.shape, rule.binary_path, rule.created_by_label) == (
        "/usr/bin/touch *",
        "/usr/bin/touch",
        "admin@umbrella.test",
    )
    assert rule.source_id == kept.pk
    short.refresh_from_db()
    assert short.status == "pending"  # nothing timed it out on the server: the page did it alone
