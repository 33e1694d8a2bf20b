"""The policy editor in a real browser: the live explain of a draft while typing, saving, the notice when
another admin saves the same policy, and rollback from the history. Headless Chromium against a real
daphne on the test database; like the other browser tests, the data is set up before the browser starts
and checked in the database after it has closed (no ORM calls while Playwright's loop runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from apps.accounts import services
from apps.policy import services as policy_services
from apps.policy.models import PolicyDocument, PolicyVersion
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_a_draft_is_explained_live_saved_and_rolled_back(live):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@initech.test")
    services.agent_create(actor=Actor.system(tenant), key="helper", name="Helper")
    policy_services.policy_save(
        Actor.system(tenant), policy_services.target("tenant"), {"deny": ["cron"]}, note="first"
    )
    api_key = factories.make_api_key(tenant, Role.ADMIN, name="other-admin")
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {api_key}"}, timeout=10)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=base)
            page = context.new_page()
            page.set_default_timeout(10_000)
            log_in(page, base, admin.email)

            page.get_by_role("navigation", name="Sections").get_by_role("link", name="Policy").click()
            expect(page.get_by_role("heading", name="Tenant policy")).to_be_visible()
            state = page.locator("[data-explain-state]")
            expect(state).to_have_text("For agent helper: no change")
            document = page.get_by_label("Policy document (JSON)")

            # A typo is reported while typing, with its path and a suggestion; nothing is refused yet.
            document.fill('{"deny": ["cron", "exce"]}')
            expect(state).to_have_text("Draft invalid")
            expect(page.locator("[data-explain-errors]")).to_contain_text(
                "deny[1]: Unknown tool 'exce'; did you mean exec?"
            )

            # Typing the deny entry right shows exec removed, and the step that removed it, before saving.
            document.press("End")
            for _ in range(3):
                document.press("ArrowLeft")
            document.press("Backspace")
            document.press("Backspace")
            document.press_sequentially("ec")
            expect(document).to_have_value('{"deny": ["cron", "exec"]}')
            expect(state).to_have_text("For agent helper: 1 tool change")
            expect(page.locator("[data-explain-removed]")).to_have_text("exec")
            exec_row = page.locator('[data-explain-table] tr[data-tool="exec"]')
            expect(exec_row).to_contain_text("removed (removed by the draft)")
            expect(exec_row).to_contain_text("deny")
            expect(page.locator('[data-explain-table] tr[data-tool="cron"]')).to_contain_text("removed")
            expect(page.locator('[data-explain-table] tr[data-tool="read_file"]')).to_contain_text("allowed")
            shot(page, "policy-explain")

            # The context is part of the explanation: as a subagent, more tools go.
            page.get_by_label("Subagent depth").fill("1")
            expect(page.locator('[data-explain-table] tr[data-tool="spawn"]')).to_contain_text("leaf_deny")
            page.get_by_label("Subagent depth").fill("0")
            expect(state).to_have_text("For agent helper: 1 tool change")

            page.get_by_label("Note").fill("no shell")
            page.get_by_role("button", name="Save policy").click()
            expect(page.get_by_role("status").filter(has_text="Policy saved as version 2.")).to_be_visible()
            expect(document).to_have_value(json.dumps({"deny": ["cron", "exec"]}, indent=2))

            # Another admin saves the same policy through the API: the open editor says so at once.
            expect(page.locator("body")).to_have_attribute("data-policy-live", "live")
            response = api.put(
                "/api/v1/policy/tenant/",
                json={"document": {"deny": ["cron", "exec", "web_fetch"]}, "note": "from the API"},
            )
            assert response.status_code == 200, response.text
            notice = page.locator("[data-policy-changed]")
            expect(notice).to_be_visible()
            expect(notice).to_contain_text("to version 3 (from the API)")
            # Saving over it is refused, and the text typed stays.
            document.fill('{"deny": []}')
            page.get_by_role("button", name="Save policy").click()
            expect(page.locator("[data-policy-form-errors]")).to_contain_text(
                "Not saved: this policy changed since you opened it (now version 3"
            )
            expect(document).to_have_value('{"deny": []}')
            shot(page, "policy-stale")

            # History: back to version 1, after a confirmation.
            page.get_by_role("link", name="History").click()
            expect(page.locator("table.policy-history tbody tr")).to_have_count(3)
            expect(page.locator('tr[data-version="3"]')).to_contain_text("from the API")
            expect(page.locator('tr[data-version="2"]')).to_contain_text("admin@initech.test")
            page.get_by_role("link", name="Version 1", exact=True).click()
            expect(page.locator('tr[data-path="deny"]')).to_contain_text("cron")
            page.get_by_role("link", name="Roll back to version 1").click()
            expect(
                page.get_by_role("heading", name="Roll the tenant policy back to version 1?")
            ).to_be_visible()
            page.get_by_role("button", name="Roll back to version 1").click()
            expect(
                page.get_by_role("status").filter(has_text="Rolled back to version 1 (saved as version 4).")
            ).to_be_visible()
            expect(document).to_have_value(json.dumps({"deny": ["cron"]}, indent=2))
            expect(state).to_have_text("For agent helper: no change")
            shot(page, "policy-rolled-back")
        finally:
            browser.close()
            api.close()

    row = PolicyDocument.objects.for_tenant(tenant).get(scope="tenant")
    assert (row.document, row.version) == ({"deny": ["cron"]}, 4)
    notes = list(PolicyVersion.objects.for_tenant(tenant).order_by("number").values_list("number", "note"))
    assert notes == [(1, "first"), (2, "no shell"), (3, "from the API"), (4, "rollback to v1")]
