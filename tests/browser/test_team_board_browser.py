"""A team's board and escalations inbox in a real browser: a blocker comment posted through the REST API
fails the task in progress — its card moves to Failed on the open board and the escalation appears in
the open inbox, both without a reload; a human then retries it from the inbox, and the card goes back
to Pending and on to its owner (In progress) live while the escalation shows "Retried". Headless
Chromium against a real daphne on the test database; data is set up before the browser starts and
checked in the database after it has closed (no ORM calls while Playwright runs).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from apps.audit.models import AuditEvent
from apps.teams import board
from apps.teams.models import Escalation, Task, TaskEvent
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot
from tests.teams.conftest import make_crew

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

BLOCKER = 'The staging database refuses our key <img src=x onerror="window.__xss=1">'

# Records every column a task's card is put into, in order (installed in the page before acting).
WATCH_COLUMNS = """(id) => {
  window.__columns = [];
  new MutationObserver((changes) => {
    for (const change of changes) {
      for (const node of change.addedNodes) {
        if (node.dataset && node.dataset.task === id) {
          window.__columns.push(node.closest("section[data-column]").dataset.column);
        }
      }
    }
  }).observe(document.querySelector("[data-team-board]"), {childList: true, subtree: true});
}"""


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_a_blocker_fails_the_task_live_and_a_human_retries_it_from_the_inbox(live):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    user = factories.make_user(tenant, Role.MEMBER, email="member@initech.test")
    crew = make_crew(tenant, "Platform")
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Migrate the billing tables", priority=2)
    task = board.assign(crew.team, task.pk, agent=crew.alice, actor=crew.as_lead)
    agent_key = factories.make_api_key(tenant, Role.MEMBER, name="alice-runner")
    team_id, task_id = str(crew.team.pk), str(task.pk)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1600, "height": 900}, base_url=base)
            page = context.new_page()
            page.set_default_timeout(10_000)
            log_in(page, base, user.email)
            page.get_by_role("navigation", name="Sections").get_by_role("link", name="Teams").click()
            page.get_by_role("link", name="Platform").click()
            expect(page.get_by_role("heading", name="Platform", exact=True)).to_be_visible()
            expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            card = page.locator(f'li.task-card[data-task="{task_id}"]')
            expect(card).to_have_count(1)
            expect(page.locator('section[data-column="in_progress"]').locator(card)).to_contain_text(
                task.identifier
            )
            expect(card).to_contain_text(crew.alice.key)
            page.evaluate("window.__sameDocument = true")
            page.evaluate(WATCH_COLUMNS, task_id)

            inbox = context.new_page()
            inbox.set_default_timeout(10_000)
            inbox.goto(f"/teams/{team_id}/escalations/")
            expect(inbox.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            expect(inbox.get_by_text("No escalations.")).to_be_visible()
            inbox.evaluate("window.__sameDocument = true")

            # The member's runner reports a blocker through the REST API.
            with httpx.Client(
                base_url=base, headers={"Authorization": f"Bearer {agent_key}"}, timeout=30
            ) as api:
                response = api.post(
                    f"/api/v1/teams/{team_id}/tasks/{task_id}/comment",
                    json={"text": BLOCKER, "type": "blocker"},
                )
            assert response.status_code == 201, response.text
            assert response.json()["failed"] is True

            # The board: the card moves to Failed, marked, and the escalation is listed — no reload.
            failed_column = page.locator('section[data-column="failed"]')
            expect(failed_column.locator(card)).to_have_count(1)
            expect(card.locator('[data-mark="blocker"]')).to_be_visible()
            expect(failed_column.locator("[data-count]")).to_have_text("1")
            expect(page.locator('section[data-column="in_progress"] [data-count]')).to_have_text("0")
            expect(page.locator("[data-escalation-list] li")).to_contain_text("The staging database refuses")
            assert page.evaluate("window.__sameDocument") is True
            shot(page, "team-board-failed")

            # The inbox: the escalation arrives live with its blocker, member and task.
            rows = inbox.locator("table.escalations-table tbody tr")
            expect(rows).to_have_count(1)
            expect(rows.first).to_contain_text(BLOCKER)
            expect(rows.first).to_contain_text(crew.alice.key)
            expect(rows.first).to_contain_text(task.identifier)
            expect(rows.first.locator("[data-state]")).to_have_text("Open")
            assert inbox.evaluate("window.__sameDocument") is True
            assert inbox.locator("table.escalations-table img").count() == 0
            assert page.locator("[data-team-board] img, [data-board-escalations] img").count() == 0
            assert inbox.evaluate("window.__xss") is None
            assert page.evaluate("window.__xss") is None
            shot(inbox, "team-escalations-open")

            # A human retries it from the inbox: the task is reopened for its owner.
            rows.first.get_by_role("button", name="Retry").click()
            expect(inbox.get_by_role("status").filter(has_text=f"{task.identifier} retried")).to_be_visible()
            expect(rows.first.locator("[data-state]")).to_have_text("Retried")
            expect(rows.first.get_by_role("button", name="Retry")).to_have_count(0)
            shot(inbox, "team-escalations-retried")

            # The board follows live: back to Pending, then to its owner again; the escalation is gone.
            expect(page.locator('section[data-column="in_progress"]').locator(card)).to_have_count(1)
            expect(card.locator('[data-mark="blocker"]')).to_have_count(0)
            expect(failed_column.locator("[data-count]")).to_have_text("0")
            expect(page.locator("[data-escalation-list] li")).to_have_count(0)
            columns = page.evaluate("window.__columns")
            after_failing = columns[columns.index("failed") + 1 :]
            assert after_failing[0] == "pending", columns
            assert after_failing[-1] == "in_progress", columns
            assert page.evaluate("window.__sameDocument") is True
            shot(page, "team-board-retried")
        finally:
            browser.close()

    task = Task.objects.for_tenant(tenant).get(pk=task_id)
    assert (task.status, task.owner_id, task.result) == ("in_progress", crew.alice.pk, "")
    events = list(
        TaskEvent.objects.for_tenant(tenant).filter(task_id=task_id).values_list("event_type", "actor_id")
    )
    assert events[-5:] == [
        ("commented", "api-key:" + agent_key.split("_")[1]),
        ("failed", "api-key:" + agent_key.split("_")[1]),
        ("retried", user.email),
        ("assigned", user.email),
        ("dispatched", user.email),
    ]
    escalation = Escalation.objects.for_tenant(tenant).get()
    assert (escalation.state, escalation.resolved_by, escalation.blocker) == ("retried", user.email, BLOCKER)
    assert (
        AuditEvent.objects.for_tenant(tenant).filter(verb="team.task.retried", actor_label=user.email).count()
        == 1
    )
