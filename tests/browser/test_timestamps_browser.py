"""Timestamps show the browser's local time, the UTC time on hover: a browser in Asia/Tokyo sees a task's
creation time 9 hours ahead of UTC, in the one format ("YYYY-MM-DD HH:MM:SS"), with the UTC time in the
element's title; a <time> a live script inserts later is converted the same way. Headless Chromium against
a real daphne on the test database; no ORM calls while Playwright runs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect, sync_playwright

from apps.teams import board
from apps.teams.models import Task
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in
from tests.teams.conftest import make_crew

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

INSERT_LIVE_TIME = """(iso) => {
  const node = document.createElement("time");
  node.id = "inserted";
  node.setAttribute("datetime", iso);
  node.textContent = "raw";
  document.querySelector("main").append(node);
}"""


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_a_timestamp_shows_local_time_with_utc_on_hover(live: Any) -> None:
    base = live.daphne()
    tenant = factories.make_tenant("clocks")
    user = factories.make_user(tenant, Role.VIEWER, email="viewer@clocks.test")
    crew = make_crew(tenant, "Clocks")
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Wind the clocks")
    # 20:30:05 UTC is 05:30:05 the next day in Tokyo (UTC+9, no daylight saving).
    Task.objects.for_tenant(tenant).filter(pk=task.pk).update(
        created_at=dt.datetime(2026, 11, 28, 20, 30, 5, tzinfo=dt.UTC)
    )
    path = f"/teams/{crew.team.pk}/tasks/{task.pk}/"

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(base_url=base, timezone_id="Asia/Tokyo")
            page = context.new_page()
            page.set_default_timeout(10_000)
            log_in(page, base, user.email)
            page.goto(path)
            created = page.locator('time[datetime="2026-11-28T20:30:05Z"]')
            expect(created).to_have_text("2026-11-29 05:30:05")
            expect(created).to_have_attribute("title", "2026-11-28 20:30:05 UTC")

            page.evaluate(INSERT_LIVE_TIME, "2026-01-02T03:04:05.678Z")
            inserted = page.locator("#inserted")
            expect(inserted).to_have_text("2026-01-02 12:04:05")
            expect(inserted).to_have_attribute("title", "2026-01-02 03:04:05 UTC")
            helper = page.evaluate(
                "() => window.toolgateWhen(document.createElement('time'), '2026-06-30T23:00:00Z').outerHTML"
            )
            assert 'datetime="2026-06-30T23:00:00Z"' in helper
            assert 'title="2026-06-30 23:00:00 UTC"' in helper
            assert ">2026-07-01 08:00:00</time>" in helper
        finally:
            browser.close()
