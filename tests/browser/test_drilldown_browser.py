"""The log drill-down in a real browser: a tool-call row opens the call's page, an export downloads
exactly the filtered rows, and a live row carries the same links as a rendered one. Like the other
browser tests, the data is made before the browser starts and checked after it has closed."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from apps.accounts import services
from apps.audit.models import AuditEvent, ToolCall
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]


def _call(tenant, **fields) -> ToolCall:  # type: ignore[no-untyped-def]
    values = {
        "agent_key": "helper",
        "tool": "datetime",
        "decision": "allowed",
        "status": "ok",
        "actor_kind": "system",
        "actor_id": "system",
        "session_key": "chat-1",
        **fields,
    }
    return ToolCall.objects.create(tenant=tenant, **values)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_a_row_opens_its_call_and_an_export_downloads_the_filtered_rows(live, tmp_path):
    base = live.daphne()
    tenant = factories.make_tenant("drill")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@drill.test")
    services.agent_create(actor=Actor.system(tenant), key="helper", name="Helper")
    member_key = factories.make_api_key(tenant, Role.MEMBER, name="agent-loop")
    admin_key = factories.make_api_key(tenant, Role.ADMIN, name="ops")
    wanted = [
        _call(tenant, tool="exec", args={"command": f"echo {i}"}, error="=cmd()", output=f"out {i}")
        for i in range(3)
    ]
    _call(tenant, tool="read_file")
    _call(factories.make_tenant("other"), tool="exec")
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {member_key}"}, timeout=10)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(
                viewport={"width": 1280, "height": 860}, base_url=base, accept_downloads=True
            )
            page = context.new_page()
            page.set_default_timeout(10_000)
            log_in(page, base, admin.email)

            # A cell filters the table: the tool of a row narrows it to that tool.
            page.goto("/tool-calls/")
            rows = page.locator("table.tool-call-table tbody tr")
            expect(rows).to_have_count(4)
            rows.filter(has_text="exec").first.locator("td.tool-cell a").click()
            expect(page).to_have_url(re.compile(r"/tool-calls/\?tool=exec$"))
            expect(rows).to_have_count(3)

            # The export carries the filter: the file holds exactly the three exec calls.
            with page.expect_download() as download_info:
                page.get_by_role("link", name="Export CSV").click()
            download = download_info.value
            target = tmp_path / "calls.csv"
            download.save_as(target)
            table = list(csv.DictReader(io.StringIO(target.read_text())))
            assert sorted(row["id"] for row in table) == sorted(str(c.pk) for c in wanted)
            assert {row["error"] for row in table} == {"'=cmd()"}

            with page.expect_download() as download_info:
                page.get_by_role("link", name="Export NDJSON").click()
            target = tmp_path / "calls.ndjson"
            download_info.value.save_as(target)
            lines = [json.loads(line) for line in target.read_text().splitlines()]
            assert [line["id"] for line in lines] == [str(c.pk) for c in reversed(wanted)]

            # A row opens its call's page.
            rows.first.locator("td.time-cell a").click()
            expect(page).to_have_url(f"{base}/tool-calls/{wanted[-1].pk}/")
            expect(page.get_by_role("heading", name="Tool call exec")).to_be_visible()
            expect(page.locator('[data-field="args"]')).to_contain_text('"command": "echo 2"')
            expect(page.locator('[data-field="output"]')).to_have_text("out 2")
            shot(page, "tool-call-detail")

            # A live row has the same links as a rendered one.
            page.goto("/tool-calls/?session_key=chat-9")
            expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            response = api.post(
                "/api/v1/runtime/execute",
                json={
                    "agent": "helper",
                    "tool": "datetime",
                    "args": {},
                    "context": {"session_key": "chat-9"},
                },
            )
            assert response.status_code == 200, response.text
            expect(rows).to_have_count(1, timeout=15_000)
            expect(rows.first.locator("td.tool-cell a")).to_have_attribute(
                "href", "?session_key=chat-9&tool=datetime"
            )
            rows.first.locator("td.time-cell a").click()
            expect(page).to_have_url(re.compile(r"/tool-calls/[0-9a-f-]{36}/$"))
            expect(page.locator('[data-field="decision"]')).to_contain_text("Allowed")

            # So does a live row of the audit log: its actor filters the log, its time opens the event.
            page.goto("/audit/?verb=agent.created")
            expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            events = page.locator("table.audit-table tbody tr")
            expect(events).to_have_count(1)
            created = api.post(
                "/api/v1/agents/",
                json={"key": "second", "name": "Second"},
                headers={"Authorization": f"Bearer {admin_key}"},
            )
            assert created.status_code == 201, created.text
            expect(events).to_have_count(2)
            expect(events.first.locator("a.actor")).to_contain_text("(ops)")
            expect(events.first.locator("a.actor")).to_have_attribute(
                "href", re.compile(r"^\?verb=agent.created&actor_kind=api_key&actor_id=[0-9a-f-]+$")
            )
            events.first.locator("td.nowrap a").click()
            expect(page).to_have_url(re.compile(r"/audit/[0-9a-f-]{36}/$"))
            expect(page.locator('[data-field="data"]')).to_contain_text('"key": "second"')
            shot(page, "audit-event-detail")
        finally:
            browser.close()
            api.close()

    assert AuditEvent.objects.for_tenant(tenant).filter(verb="tool_calls.exported").count() == 2
