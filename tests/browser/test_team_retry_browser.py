"""A retry with instructions reaches the agent's session, in a real browser: a member of a team using the
built-in runner is blocked; a human retries the escalation from the inbox with new instructions; the
queued run of the member (run here by hand, as the worker would) starts in the task's session
(``team-task:<task id>``), and that session's page shows the instructions in the message the member got.
Headless Chromium against a real daphne on the test database; no ORM calls while Playwright runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from django_q.models import OrmQ
from playwright.sync_api import expect, sync_playwright

from apps.accounts import services as tenant_services
from apps.llm import services as llm_services
from apps.runs import teamwork
from apps.teams import board
from apps.teams.models import TaskComment
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot
from tests.llm.fake_provider import KEY, PUBLIC_IP, FakeProvider, chat_answer
from tests.local_http import serving
from tests.teams.conftest import make_crew

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

INSTRUCTIONS = 'Use the read replica db-2 <img src=x onerror="window.__xss=1">, then report the count.'


@pytest.fixture
def fake(settings: Any) -> Iterator[FakeProvider]:
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    with serving(PUBLIC_IP) as server:
        yield FakeProvider(server).install()


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_a_retry_with_instructions_reaches_the_agents_session(live: Any, fake: FakeProvider) -> None:
    base = live.daphne()
    tenant = factories.make_tenant("retrying")
    system = Actor.system(tenant)
    tenant_services.tenant_update(actor=system, changes={"settings": {"runner": "builtin"}})
    llm_services.provider_create(
        actor=system, name="main", base_url=fake.base_url, api_key=KEY, models={"chat": "fake-chat"}
    )
    user = factories.make_user(tenant, Role.MEMBER, email="member@retrying.test")
    crew = make_crew(tenant, "Data")
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Count the rows")
    board.assign(crew.team, task.pk, agent=crew.alice, actor=crew.as_lead)
    board.comment(crew.team, task.pk, actor=crew.as_alice, text="No access to the primary", kind="blocker")
    OrmQ.objects.all().delete()
    team_id = str(crew.team.pk)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 900}, base_url=base)
            page.set_default_timeout(10_000)
            log_in(page, base, user.email)
            page.goto(f"/teams/{team_id}/escalations/")
            row = page.locator("table.escalations-table tbody tr").first
            expect(row).to_contain_text(task.identifier)
            row.get_by_label("New instructions (optional)").fill(INSTRUCTIONS)
            row.get_by_role("button", name="Retry").click()
            expect(page.get_by_role("status").filter(has_text=f"{task.identifier} retried")).to_be_visible()
            expect(row.locator("[data-state]")).to_have_text("Retried")
            shot(page, "team-retry-instructions")
        finally:
            browser.close()

    requests: list[dict[str, Any]] = []

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        return chat_answer("Counted 42 rows on the replica.")

    fake.chat = chat
    [job] = [q.task["args"] for q in OrmQ.objects.all()]
    run = teamwork.run_task(*job)  # what the worker does with the queued job
    assert run is not None
    assert INSTRUCTIONS in requests[0]["messages"][-1]["content"]
    session_page = reverse("dashboard:runs_session", args=[run.session_id])
    comments = TaskComment.objects.for_tenant(tenant)
    assert comments.filter(content=f"Retry instructions: {INSTRUCTIONS}").exists()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 900}, base_url=base)
            page.set_default_timeout(10_000)
            log_in(page, base, user.email)
            page.goto(session_page)
            expect(page.get_by_text(f"team-task:{task.pk}").first).to_be_visible()
            expect(page.locator("main")).to_contain_text("=== New instructions for this retry ===")
            expect(page.locator("main")).to_contain_text(INSTRUCTIONS)
            expect(page.locator("main")).to_contain_text("Counted 42 rows on the replica.")
            assert page.locator("main img").count() == 0
            assert page.evaluate("window.__xss") is None
            shot(page, "team-retry-session")
        finally:
            browser.close()
