"""An agent's knowledge graph page in a real browser: it lists the entities; when another client changes
the graph through the REST API, an administrator's open page says so and offers a reload, without
touching a half-filled New entity form; that form then creates the entity, and the reloaded list shows
it with the other client's.

Headless Chromium against a real daphne on the test database; data is set up before the browser starts
and checked in the database after it has closed (no ORM calls while Playwright runs).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.knowledge.models import Entity
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot
from tests.knowledge.support import ref, relation, upsert

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

DESCRIPTION = "Designed the difference engine.\nCorresponded with Ada."


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_a_change_elsewhere_is_announced_without_losing_the_form_which_then_adds_an_entity(live):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@initech.test")
    agent = tenant_services.agent_create(actor=Actor.system(tenant), key="bot", name="Bot")
    other = tenant_services.agent_create(actor=Actor.system(tenant), key="other", name="Other")
    upsert(
        tenant,
        agent,
        [
            {"type": "person", "name": "Ada Lovelace", "aliases": ["Ada"], "description": "Wrote the notes."},
            {"type": "organization", "name": "Acme Corp"},
            {"type": "project", "name": "Apollo", "description": "The new billing engine."},
        ],
        [relation(ref("person", "Ada Lovelace"), "works_at", ref("organization", "Acme Corp"))],
    )
    upsert(tenant, other, [{"type": "person", "name": "Somebody Else"}])
    api_key = factories.make_api_key(tenant, Role.ADMIN, name="graph-writer")

    with (
        sync_playwright() as playwright,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {api_key}"}, timeout=30) as api,
    ):
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport={"width": 1500, "height": 900}, base_url=base).new_page()
            page.set_default_timeout(10_000)
            log_in(page, base, admin.email)
            page.goto("/agents/bot/knowledge/")
            expect(page.get_by_role("heading", name="Knowledge graph of bot")).to_be_visible()
            expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            rows = page.locator("table[data-knowledge-entities] tbody tr")
            expect(rows).to_have_count(3)
            expect(rows.nth(0)).to_contain_text("Acme Corp")
            expect(rows.nth(1)).to_contain_text("Ada Lovelace")
            expect(rows.nth(1)).to_contain_text("also Ada")
            expect(rows.nth(2)).to_contain_text("The new billing engine.")
            expect(page.get_by_text("Somebody Else")).to_have_count(0)  # another agent's graph
            notice = page.locator("[data-live-notice]")
            expect(notice).to_be_hidden()

            # Half-fill the New entity form.
            form = page.locator("section", has=page.get_by_role("heading", name="New entity"))
            form.get_by_label("Name").fill("Charles Babbage")
            form.get_by_label("Type").fill("person")
            form.get_by_label("Description").fill(DESCRIPTION)
            page.evaluate("window.__sameDocument = true")

            # Another client writes to the graph: the page says so, offering a reload, form untouched.
            written = api.post(
                "/api/v1/agents/bot/knowledge/upsert",
                json={
                    "entities": [
                        {"type": "organization", "name": "Initech", "description": "Makes TPS reports."}
                    ],
                    "relations": [
                        {
                            "source": {"type": "person", "name": "Ada Lovelace"},
                            "type": "advises",
                            "target": {"type": "organization", "name": "Initech"},
                        }
                    ],
                },
            )
            assert written.status_code == 200, written.text
            expect(notice).to_be_visible()
            expect(notice).to_contain_text("The graph has changed since this page was loaded.")
            expect(notice.get_by_role("link", name="Reload")).to_be_visible()
            expect(form.get_by_label("Name")).to_have_value("Charles Babbage")
            expect(form.get_by_label("Type")).to_have_value("person")
            expect(form.get_by_label("Description")).to_have_value(DESCRIPTION)
            expect(rows).to_have_count(3)
            assert page.evaluate("window.__sameDocument") is True
            shot(page, "knowledge-changed")

            # The form still works: the entity is created and shown.
            form.get_by_role("button", name="Save").click()
            expect(page.get_by_role("heading", name="Charles Babbage (person)")).to_be_visible()
            expect(
                page.get_by_role("status").filter(has_text="person Charles Babbage created.")
            ).to_be_visible()
            expect(page.locator("[data-description]")).to_contain_text("Designed the difference engine.")
            expect(page.locator("[data-description]")).to_contain_text("Corresponded with Ada.")

            # Back on the list: both clients' entities are there.
            page.get_by_role("link", name="The knowledge graph of bot").click()
            expect(rows).to_have_count(5)
            expect(page.locator("table[data-knowledge-entities]")).to_contain_text("Initech")
            babbage = rows.filter(has_text="Charles Babbage")
            expect(babbage).to_have_count(1)
            expect(babbage).to_contain_text("person")
            expect(babbage).to_contain_text("shared")
            expect(notice).to_be_hidden()
            shot(page, "knowledge-added")
        finally:
            browser.close()

    created = Entity.objects.for_tenant(tenant).get(agent=agent, name="Charles Babbage")
    assert (created.entity_type, created.description, created.user_id) == ("person", DESCRIPTION, "")
    assert (
        AuditEvent.objects.for_tenant(tenant)
        .filter(verb="knowledge.entity_created", actor_label=admin.email, target_id=str(created.pk))
        .count()
        == 1
    )
