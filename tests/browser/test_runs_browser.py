"""The runs pages in a real browser: the runs list follows an external run live as its runner claims and
finishes it through the REST API, and a run started elsewhere gets a row at the top; a run's page shows
its transcript grow live while the built-in runner works (the user's message, the model's tool call, the
tool's result, the answer) and drops Cancel once it has finished; Cancel asks first and cancels a queued
run; a viewer has no runs pages at all; the scheduled jobs and sessions pages list what exists.

Headless Chromium against a real daphne on the test database. The browser thread makes no ORM calls
while Playwright runs: the built-in runner works in a worker thread, as a django-q2 worker would,
against the scripted provider on 127.0.0.2.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection
from playwright.sync_api import Browser, Page, expect, sync_playwright

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.llm import services as llm_services
from apps.runs import cron, runner
from apps.runs import services as run_services
from apps.runs.models import Run
from apps.sessions import services as session_services
from apps.sessions.models import SessionMessage
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot
from tests.llm.fake_provider import KEY, FakeProvider, chat_answer
from tests.runs.conftest import fake  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)
MARKUP = 'It is noon <img src=x onerror="window.__xss=1">'


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def open_page(browser: Browser, base: str, email: str) -> Page:
    page = browser.new_context(viewport={"width": 1500, "height": 900}, base_url=base).new_page()
    page.set_default_timeout(10_000)
    log_in(page, base, email)
    return page


def make_agent(tenant: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant), key="bot", name="Bot")


def start_external(raw_key: str, session_key: str, message: str) -> str:
    """An external run of ``bot`` started through the API (before the browser opens)."""
    response = factories.key_client(raw_key).post(
        "/api/v1/agents/bot/runs",
        {"session_key": session_key, "message": message, "runner": "external", "wait": False},
        format="json",
    )
    assert response.status_code == 202, response.content
    return str(response.json()["id"])


@needs_chromium
def test_the_runs_list_follows_a_run_its_runner_claims_and_finishes_and_shows_a_new_one(live):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    member = factories.make_user(tenant, Role.MEMBER, email="member@initech.test")
    make_agent(tenant)
    runner_key = factories.make_api_key(tenant, Role.MEMBER, name="external-runner")
    run_id = start_external(runner_key, "ops-1", "Rotate the staging certificates.")

    with (
        chromium() as browser,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {runner_key}"}, timeout=30) as api,
    ):
        page = open_page(browser, base, member.email)
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Runs").click()
        expect(page.get_by_role("heading", name="Runs", exact=True)).to_be_visible()
        expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
        rows = page.locator("table[data-runs-live] tbody tr")
        expect(rows).to_have_count(1)
        row = page.locator(f'tr[data-id="{run_id}"]')
        expect(row.locator('[data-field="status"]')).to_have_text("queued")
        expect(row).to_contain_text("Rotate the staging certificates.")
        page.evaluate("window.__sameDocument = true")

        # The runner claims the run: it is running, on the open page.
        claimed = api.post(f"/api/v1/runs/{run_id}/claim")
        assert claimed.status_code == 200, claimed.text
        expect(row.locator('[data-field="status"]')).to_have_text("running")
        expect(row.locator('[data-field="status"]')).to_have_class("status status-running")

        # It reports the end: status and counters change in the row.
        finished = api.post(
            f"/api/v1/runs/{run_id}/finish",
            json={
                "status": "completed",
                "output": "Rotated.",
                "iterations": 3,
                "tool_calls": 2,
                "input_tokens": 1200,
                "output_tokens": 85,
            },
        )
        assert finished.status_code == 200, finished.text
        expect(row.locator('[data-field="status"]')).to_have_text("completed")
        expect(row.locator('[data-field="iterations"]')).to_have_text("3")
        expect(row.locator('[data-field="tool_calls"]')).to_have_text("2")
        expect(row.locator('[data-field="tokens"]')).to_have_text("1200 / 85")

        # A run started elsewhere gets a row at the top, linked to its page.
        created = api.post(
            "/api/v1/agents/bot/runs",
            json={
                "session_key": "ops-2",
                "message": "Check the backups.",
                "runner": "external",
                "wait": False,
            },
        )
        assert created.status_code == 202, created.text
        new_id = created.json()["id"]
        expect(rows).to_have_count(2)
        expect(rows.first).to_have_attribute("data-id", new_id)
        expect(rows.first.locator('[data-field="status"]')).to_have_text("queued")
        expect(rows.first).to_contain_text("bot")
        expect(rows.first).to_contain_text("chat")
        expect(rows.first).to_contain_text("Check the backups.")
        assert page.evaluate("window.__sameDocument") is True
        shot(page, "runs-list-live")

        rows.first.get_by_role("link", name="queued").click()
        expect(page.get_by_role("heading", name="Run of bot")).to_be_visible()
        expect(page.locator("[data-run] [data-field='status']")).to_have_text("queued")
        assert api.get(f"/api/v1/runs/{run_id}/").json()["status"] == "completed"


def gated(*answers: dict[str, Any], hold_before: int) -> tuple[Any, threading.Event]:
    """A chat script answering ``answers`` in order that holds the answer numbered ``hold_before``
    (from 1) until the returned event is set."""
    release = threading.Event()
    asked: list[dict[str, Any]] = []

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        if len(asked) == hold_before and not release.wait(timeout=30):
            raise AssertionError("the test never released the model's answer")
        return answers[min(len(asked), len(answers)) - 1]

    return chat, release


def in_worker(pool: ThreadPoolExecutor, work: Any) -> Future[Any]:
    """Start ``work`` (ORM work) in a worker thread, as another process would."""

    def run() -> Any:
        try:
            return work()
        finally:
            connection.close()

    return pool.submit(run)


@needs_chromium
def test_a_run_page_shows_the_transcript_grow_live_with_tool_calls_and_results(
    live,
    fake: FakeProvider,  # noqa: F811
):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    member = factories.make_user(tenant, Role.MEMBER, email="member@initech.test")
    agent = make_agent(tenant)
    llm_services.provider_create(
        actor=Actor.system(tenant),
        name="main",
        base_url=fake.base_url,
        api_key=KEY,
        models={"chat": "fake-chat"},
    )
    clock_call = {
        "id": "call_clock_1",
        "type": "function",
        "function": {"name": "datetime", "arguments": json.dumps({"timezone": "Asia/Tokyo"})},
    }
    fake.chat, release = gated(
        chat_answer("Let me look at the clock.", tool_calls=[clock_call]),
        chat_answer(MARKUP),
        hold_before=2,
    )
    actor = Actor(tenant=tenant, role=Role.MEMBER, kind="user", user=member)
    run = run_services.run_create(
        actor=actor, agent=agent, session_key="chat-1", message="What time is it in Tokyo?", user_id="alice"
    )
    run_id, tenant_id = str(run.pk), str(tenant.pk)

    with chromium() as browser, ThreadPoolExecutor(1) as pool:
        page = open_page(browser, base, member.email)
        page.goto(f"/runs/{run_id}/")
        expect(page.get_by_role("heading", name="Run of bot")).to_be_visible()
        expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
        status = page.locator("[data-run] [data-field='status']")
        expect(status).to_have_text("queued")
        expect(page.get_by_text("No messages yet.")).to_be_visible()
        expect(page.get_by_role("link", name="Cancel run…")).to_be_visible()
        page.evaluate("window.__sameDocument = true")

        working = in_worker(pool, lambda: runner.execute(run_id, tenant_id))
        try:
            # The runner is held before the model's second answer: what it did so far is on the page.
            messages = page.locator("ol[data-transcript] > li")
            expect(messages).to_have_count(3)
            expect(status).to_have_text("running")
            expect(page.get_by_text("No messages yet.")).to_have_count(0)
            user, assistant, result = messages.nth(0), messages.nth(1), messages.nth(2)
            expect(user).to_have_attribute("data-role", "user")
            expect(user).to_contain_text("What time is it in Tokyo?")
            expect(assistant).to_have_attribute("data-role", "assistant")
            expect(assistant).to_contain_text("Let me look at the clock.")
            call = assistant.locator('[data-tool-call="call_clock_1"]')
            expect(call.locator('[data-field="tool-name"]')).to_have_text("datetime")
            expect(call).to_contain_text('"timezone": "Asia/Tokyo"')
            expect(result).to_have_attribute("data-role", "tool")
            expect(result).to_contain_text("tool datetime")
            expect(result.locator('[data-field="tool-call-id"]')).to_have_text("call_clock_1")
            expect(result).to_contain_text("JST (UTC+09:00)")
            expect(page.get_by_role("link", name="Cancel run…")).to_be_visible()
            # The counters follow the run as it works: one tool call, the model's name, not finished.
            expect(page.locator("[data-run] [data-field='tool_calls']")).to_have_text("1")
            expect(page.locator("[data-run] [data-field='model']")).to_have_text("fake-chat-2026")
            expect(page.locator("[data-run] [data-field='finished']")).to_have_text("—")
            shot(page, "run-transcript-working")
        finally:
            release.set()
        working.result(timeout=30)

        # The answer arrives, shown as text; the run has finished, so Cancel goes.
        expect(messages).to_have_count(4)
        answer = messages.nth(3)
        expect(answer).to_have_attribute("data-role", "assistant")
        expect(answer).to_contain_text(MARKUP)
        expect(status).to_have_text("completed")
        expect(page.locator("[data-run] [data-field='iterations']")).to_have_text("2")
        expect(page.locator("[data-run] [data-field='tool_calls']")).to_have_text("1")
        expect(page.get_by_role("link", name="Cancel run…")).to_have_count(0)
        expect(page.locator("[data-run] [data-field='finished']")).to_have_text(
            re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")
        )
        assert page.locator("ol[data-transcript] img").count() == 0
        assert page.evaluate("window.__xss") is None
        assert page.evaluate("window.__sameDocument") is True
        live_roles = messages.evaluate_all("(items) => items.map((item) => item.dataset.role)")
        shot(page, "run-transcript-finished")

        # What was shown live is what the page shows when loaded.
        page.reload()
        expect(messages).to_have_count(4)
        assert messages.evaluate_all("(items) => items.map((item) => item.dataset.role)") == live_roles
        expect(messages.nth(1).locator('[data-tool-call="call_clock_1"]')).to_contain_text("datetime")
        expect(messages.nth(3)).to_contain_text(MARKUP)

    rows = SessionMessage.objects.for_tenant(tenant).filter(source=f"run:{run_id}").order_by("seq")
    assert [(m.role, m.name, m.tool_call_id) for m in rows] == [
        ("user", "", ""),
        ("assistant", "", ""),
        ("tool", "datetime", "call_clock_1"),
        ("assistant", "", ""),
    ]
    assert Run.objects.for_tenant(tenant).get(pk=run_id).status == Run.Status.COMPLETED


@needs_chromium
def test_cancel_asks_first_and_cancels_the_run_and_a_viewer_has_no_runs_pages(live):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    member = factories.make_user(tenant, Role.MEMBER, email="member@initech.test")
    viewer = factories.make_user(tenant, Role.VIEWER, email="viewer@initech.test")
    make_agent(tenant)
    runner_key = factories.make_api_key(tenant, Role.MEMBER, name="external-runner")
    run_id = start_external(runner_key, "ops-1", "Rotate the staging certificates.")

    with (
        chromium() as browser,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {runner_key}"}, timeout=30) as api,
    ):
        # A viewer: no Runs section, and the run's page and its Cancel step are refused plainly.
        seen = open_page(browser, base, viewer.email)
        sections = seen.get_by_role("navigation", name="Sections")
        expect(sections.get_by_role("link", name="Agents")).to_be_visible()
        expect(sections.get_by_role("link", name="Runs")).to_have_count(0)
        for path in (f"/runs/{run_id}/", f"/runs/{run_id}/cancel/"):
            response = seen.goto(path)
            assert response is not None
            assert response.status == 403
            expect(seen.get_by_role("heading", name="Not allowed")).to_be_visible()
            expect(seen.get_by_text("This page needs the member role in")).to_contain_text(
                "your role is viewer"
            )
            expect(seen.get_by_role("link", name="Cancel run…")).to_have_count(0)
            expect(seen.get_by_role("button", name="Cancel run")).to_have_count(0)
        assert api.get(f"/api/v1/runs/{run_id}/").json()["status"] == "queued"

        # A member: Cancel asks first; backing out changes nothing.
        page = open_page(browser, base, member.email)
        page.goto(f"/runs/{run_id}/")
        status = page.locator("[data-run] [data-field='status']")
        expect(status).to_have_text("queued")
        page.get_by_role("link", name="Cancel run…").click()
        expect(page.get_by_role("heading", name="Cancel this chat run of bot?")).to_be_visible()
        expect(page.get_by_text("A queued run is cancelled at once")).to_be_visible()
        page.get_by_role("link", name="Cancel", exact=True).click()
        expect(page).to_have_url(f"{base}/runs/{run_id}/")
        expect(status).to_have_text("queued")
        assert api.get(f"/api/v1/runs/{run_id}/").json()["status"] == "queued"

        # Confirmed: the run is cancelled and its page says so.
        page.get_by_role("link", name="Cancel run…").click()
        page.get_by_role("button", name="Cancel run").click()
        expect(page).to_have_url(f"{base}/runs/{run_id}/")
        expect(page.get_by_role("status").filter(has_text="Run cancelled.")).to_be_visible()
        expect(status).to_have_text("cancelled")
        expect(page.get_by_role("link", name="Cancel run…")).to_have_count(0)
        shot(page, "run-cancelled")
        answer = api.get(f"/api/v1/runs/{run_id}/").json()
        assert (answer["status"], answer["cancel_requested"]) == ("cancelled", True)
        refused = api.post(f"/api/v1/runs/{run_id}/claim")
        assert refused.status_code == 409, refused.text

    events = AuditEvent.objects.for_tenant(tenant).filter(verb="run.cancelled", target_id=run_id)
    assert list(events.values_list("actor_label", flat=True)) == [member.email]


@needs_chromium
def test_the_scheduled_jobs_page_lists_the_jobs(live):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    member = factories.make_user(tenant, Role.MEMBER, email="member@initech.test")
    agent = make_agent(tenant)
    system = Actor.system(tenant)
    cron.job_create(
        actor=system,
        agent=agent,
        name="morning-report",
        schedule="0 9 * * 1-5",
        message="Summarise the night.",
    )
    cron.job_create(
        actor=system,
        agent=agent,
        name="cache-sweep",
        schedule="every 15m",
        message="Sweep the caches.",
        enabled=False,
    )

    with chromium() as browser:
        page = open_page(browser, base, member.email)
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Scheduled jobs").click()
        expect(page.get_by_role("heading", name="Scheduled jobs")).to_be_visible()
        rows = page.locator("table[data-cron-jobs] tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.nth(0)).to_contain_text("cache-sweep")
        expect(rows.nth(0)).to_contain_text("every 15m")
        expect(rows.nth(0).locator('[data-field="enabled"]')).to_have_text("disabled")
        expect(rows.nth(1)).to_contain_text("morning-report")
        expect(rows.nth(1)).to_contain_text("0 9 * * 1-5")
        expect(rows.nth(1).locator('[data-field="enabled"]')).to_have_text("enabled")
        expect(page.get_by_role("link", name="New scheduled job")).to_have_count(0)  # members read
        rows.nth(1).get_by_role("link", name="morning-report").click()
        expect(page.get_by_text("Summarise the night.")).to_be_visible()
        shot(page, "cron-job")


@needs_chromium
def test_the_sessions_page_lists_the_sessions_and_opens_one(live):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    member = factories.make_user(tenant, Role.MEMBER, email="member@initech.test")
    agent = make_agent(tenant)
    system = Actor.system(tenant)
    session, _ = session_services.session_open(actor=system, agent=agent, key="support-42", user_id="alice")
    session_services.message_append(
        actor=system, session=session, role="user", content="My invoice is wrong.", source="api"
    )
    session_services.message_append(
        actor=system, session=session, role="assistant", content="Let me check it.", source="api"
    )
    session_services.session_open(actor=system, agent=agent, key="empty-1", user_id="")

    with chromium() as browser:
        page = open_page(browser, base, member.email)
        page.goto("/runs/")
        page.get_by_role("link", name="Sessions", exact=True).click()
        expect(page.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()
        rows = page.locator("table[data-sessions] tbody tr")
        expect(rows).to_have_count(2)
        row = page.locator(f'tr[data-id="{session.pk}"]')
        expect(row).to_contain_text("support-42")
        expect(row).to_contain_text("alice")
        expect(row.locator("td.num").first).to_have_text("2")
        row.get_by_role("link", name="support-42").click()
        history = page.locator("li.transcript-message")
        expect(history).to_have_count(2)
        expect(history.nth(0)).to_contain_text("My invoice is wrong.")
        expect(history.nth(1)).to_contain_text("Let me check it.")
        shot(page, "session")
