"""The dashboard in a real browser: headless Chromium against a real daphne on the test database.

Playwright's sync API runs an event loop in this thread while it is open, and Django refuses ORM calls
from a thread with a running loop; so the data is set up before the browser starts and checked in the
database after it has closed.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import WebSocketRoute, expect, sync_playwright

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, ApiKey
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

XSS_NAME = '<img src=x onerror="window.__xss=1">'
RAW_KEY = re.compile(r"tgk_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{43}")


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_owner_manages_agents_and_keys_and_sees_audit_events_live(live):
    base = live.daphne()
    tenant = factories.make_tenant("acme")
    owner = factories.make_user(tenant, Role.OWNER, email="owner@acme.test")
    other_tenant = factories.make_tenant("globex")
    factories.make_user(other_tenant, Role.OWNER, email="owner@globex.test")
    # The owner of acme is also a viewer of globex: the tenant switcher offers both.
    services.membership_create(actor=Actor.system(other_tenant), email=owner.email, role=Role.VIEWER)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=base)
            page = context.new_page()
            page.set_default_timeout(10_000)

            # Log in.
            page.goto("/agents/")
            expect(page).to_have_url(re.compile(r"/login/\?next=/agents/$"))
            shot(page, "login")
            page.get_by_label("Email").fill(owner.email)
            page.get_by_label("Password").fill(factories.PASSWORD)
            page.get_by_role("button", name="Log in").click()
            expect(page).to_have_url(f"{base}/agents/")
            expect(page.get_by_text("No agents yet.")).to_be_visible()

            # Create an agent; bad settings JSON is reported next to the field first.
            page.get_by_role("link", name="New agent").click()
            page.get_by_label("Key", exact=True).fill("support-bot")
            page.get_by_label("Name").fill("Support bot")
            page.get_by_label("Provider").fill("anthropic")
            page.get_by_label("Settings").fill('{"temperature": 0.2,}')
            page.get_by_role("button", name="Create agent").click()
            expect(page.locator("#id_settings_error")).to_contain_text("Not valid JSON")
            shot(page, "agent-form-error")
            page.get_by_label("Settings").fill('{"temperature": 0.2}')
            page.get_by_role("button", name="Create agent").click()
            expect(page).to_have_url(f"{base}/agents/")
            expect(page.get_by_role("status").filter(has_text="Agent support-bot created.")).to_be_visible()
            expect(page.get_by_role("cell", name="support-bot", exact=True)).to_be_visible()
            shot(page, "agents")

            # Create an API key: its secret is shown on the result page and never again.
            page.get_by_role("link", name="API keys").click()
            page.get_by_role("link", name="New API key").click()
            page.get_by_label("Name").fill("automation")
            page.get_by_label("Role").select_option("admin")
            page.get_by_role("button", name="Create key").click()
            secret = page.locator("[data-secret-key]")
            expect(secret).to_be_visible()
            raw = secret.input_value()
            assert RAW_KEY.fullmatch(raw)
            shot(page, "key-created")
            page.get_by_role("link", name="Done").click()
            expect(page).to_have_url(f"{base}/api-keys/")
            expect(page.get_by_role("cell", name="automation", exact=True)).to_be_visible()
            assert raw not in page.content()
            page.goto("/api-keys/")
            assert raw not in page.content()

            # With the audit log open, a change made through the API shows up without a reload.
            page.goto("/audit/")
            expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            page.evaluate("window.__sameDocument = true")
            rows_before = page.locator("table.audit-table tbody tr[data-id]").count()
            response = httpx.post(
                f"{base}/api/v1/agents/",
                json={"key": "api-bot", "name": XSS_NAME},
                headers={"Authorization": f"Bearer {raw}"},
                timeout=10,
            )
            assert response.status_code == 201, response.text
            live_row = page.locator("table.audit-table tbody tr").first
            expect(live_row).to_contain_text("agent.created", timeout=15_000)
            expect(live_row).to_contain_text('"key": "api-bot"')
            # Event data is shown as text, never as markup (the event's own page shows it whole).
            expect(live_row.locator("td.details a")).to_contain_text(json.dumps(XSS_NAME))
            assert page.evaluate("window.__xss") is None
            assert live_row.locator("img").count() == 0
            expect(live_row).to_contain_text("automation")  # the actor label names the key
            expect(live_row).to_contain_text("api_key")
            assert page.evaluate("window.__sameDocument") is True
            assert page.locator("table.audit-table tbody tr[data-id]").count() == rows_before + 1
            shot(page, "audit")

            page.goto("/")
            expect(page.locator('[data-stat="agents"]')).to_have_text("2")
            expect(page.locator('[data-stat="api_keys"]')).to_have_text("1")
            shot(page, "home")
            assert raw not in page.content()

            page.goto("/members/")
            expect(page.get_by_role("cell", name=f"{owner.email} (you)", exact=True)).to_be_visible()
            shot(page, "members")

            # Switch to globex, where this user is only a viewer.
            page.get_by_label(re.compile("^Current tenant")).click()
            shot(page, "tenant-menu")
            page.get_by_role("button", name=re.compile("globex")).click()
            expect(page.get_by_text("Tenant globex · you are viewer")).to_be_visible()
            sections = page.get_by_role("navigation", name="Sections").get_by_role("link")
            expect(sections).to_have_text(
                [
                    "Overview",
                    "Agents",
                    "Tools",
                    "Policy",
                    "Runtime settings",
                    "Teams",
                    "MCP",
                    "Custom tools",
                    "Credentialed CLIs",
                    "Members",
                    "Quotas",
                ]
            )
            expect(page.locator('[data-stat="agents"]')).to_have_text("0")
            page.goto("/audit/")
            expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()

            # Log out through the user menu.
            page.get_by_label(f"Account menu for {owner.email}").click()
            page.get_by_role("button", name="Log out").click()
            expect(page).to_have_url(f"{base}/login/")
            page.goto("/")
            expect(page).to_have_url(f"{base}/login/?next=/")
        finally:
            browser.close()

    agents = dict(Agent.objects.for_tenant(tenant).values_list("key", "settings"))
    assert agents == {"support-bot": {"temperature": 0.2}, "api-bot": {}}
    assert Agent.objects.for_tenant(tenant).get(key="api-bot").name == XSS_NAME
    key = ApiKey.objects.for_tenant(tenant).get(name="automation")
    assert (key.role, key.created_by_id, key.last_used_at is not None) == ("admin", owner.pk, True)
    assert raw.startswith(f"tgk_{key.prefix}_")
    assert AuditEvent.objects.for_tenant(tenant).filter(verb="agent.created").count() == 2
    assert not Agent.objects.for_tenant(other_tenant).exists()


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_live_audit_reconnects_after_a_drop_and_applies_the_page_filters(live):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    owner = factories.make_user(tenant, Role.OWNER, email="owner@initech.test")
    admin_key = factories.make_api_key(tenant, Role.ADMIN, name="deployer")
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {admin_key}"}, timeout=10)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(base_url=base)
            login_page = context.new_page()
            log_in(login_page, base, owner.email)
            # A fresh page: the overview that log_in lands on opens its own socket, which must not be the
            # one dropped below (it could still be opening when the route is set).
            login_page.close()
            page = context.new_page()
            page.set_default_timeout(10_000)

            # The first socket is dropped before it subscribes; the page must retry on its own.
            attempts: list[str] = []

            def drop_the_first(ws: WebSocketRoute) -> None:
                attempts.append(ws.url)
                if len(attempts) == 1:
                    ws.close()
                else:
                    ws.connect_to_server()

            page.route_web_socket(re.compile(r"/ws/events/$"), drop_the_first)
            # Every state the indicator passes through, from the start (a loaded machine may be past the
            # short "reconnecting" state before an assertion looks).
            page.add_init_script(
                "window.__liveStates = [];"
                "setInterval(() => { const el = document.querySelector('[data-live-indicator]');"
                " if (!el) return; const s = el.getAttribute('data-state'); const a = window.__liveStates;"
                " if (a[a.length - 1] !== s) a.push(s); }, 5);"
            )
            page.goto("/audit/?verb=agent.deleted")
            indicator = page.locator("[data-live-indicator]")
            expect(page.get_by_text("No audit events match these filters.")).to_be_visible()
            expect(indicator).to_have_attribute("data-state", "live")
            assert len(attempts) == 2
            assert "reconnecting" in page.evaluate("window.__liveStates")

            assert api.post("/api/v1/agents/", json={"key": "temp", "name": "Temp"}).status_code == 201
            assert api.delete("/api/v1/agents/temp/").status_code == 204

            rows = page.locator("table.audit-table tbody tr")
            expect(rows).to_have_count(1)
            expect(rows.first).to_contain_text("agent.deleted")
            expect(rows.first).to_contain_text("deployer")
            # agent.created was sent first on the same socket, and left out by the verb filter.
            assert page.locator("table.audit-table").inner_text().count("agent.created") == 0
        finally:
            browser.close()
            api.close()


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_a_page_reconnects_after_daphne_is_killed_and_says_what_it_may_have_missed(live):
    base = live.daphne()
    tenant = factories.make_tenant("crashco")
    owner = factories.make_user(tenant, Role.OWNER, email="owner@crashco.test")
    admin_key = factories.make_api_key(tenant, Role.ADMIN, name="deployer")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(base_url=base).new_page()
            page.set_default_timeout(20_000)
            log_in(page, base, owner.email)
            page.goto("/audit/")
            indicator = page.locator("[data-live-indicator]")
            expect(indicator).to_have_attribute("data-state", "live")
            expect(indicator).to_have_text("Live")

            live.kill_daphne()
            expect(indicator).to_have_attribute("data-state", "reconnecting")
            # An event while no process serves the page: it cannot reach it. (Made in a thread of its
            # own: Playwright's event loop runs in this one, where Django refuses database calls.)
            maker = threading.Thread(
                target=factories.make_api_key, args=(tenant, Role.VIEWER, "made-while-down")
            )
            maker.start()
            maker.join()
            assert live.daphne(same_port=True) == base

            expect(indicator).to_have_attribute("data-state", "live", timeout=60_000)
            expect(indicator).to_contain_text("reload to see events missed while offline")
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {admin_key}"}) as api:
                assert api.post("/api/v1/agents/", json={"key": "after", "name": "After"}).status_code == 201
            rows = page.locator("table.audit-table tbody tr")
            expect(rows.first).to_contain_text("agent.created")
            page.reload()
            expect(page.locator("table.audit-table")).to_contain_text("api_key.created")
        finally:
            browser.close()
