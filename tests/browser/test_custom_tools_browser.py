"""The custom tools and credentialed CLIs pages in a real browser.

An administrator defines the seed's ``dns_lookup`` tool (``getent hosts {{.domain}}`` with a ``domain``
string parameter), sees it arrive live in the tools list open in another tab, opens its test-run page
and runs it with ``{"domain": "localhost"}``: the output, the rendered command and the decision path
show. An injection attempt (``x; touch <file>``) renders as one quoted argument: the output is harmless
and the file does not exist. A slow tool shows that the run is at work.

An administrator registers gh from its preset (one click fills the form), the list in another tab
follows, and its test run shows the output with the credential masked.

Headless Chromium against a real daphne on the test database.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from apps.accounts import services as tenant_services
from apps.custom_tools import services
from apps.custom_tools.models import CustomTool
from apps.secure_cli.models import SecureCLIBinary
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot
from tests.jail_support import JAIL_PROGRAMS
from tests.secure_cli.support import TOKEN, fake_cli

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)
SCHEMA = {
    "type": "object",
    "properties": {"domain": {"type": "string", "description": "the host name"}},
    "required": ["domain"],
}


@needs_chromium
def test_an_admin_defines_dns_lookup_and_test_runs_it(live):
    base = live.daphne()
    tenant = factories.make_tenant("initech")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@initech.test")
    system = Actor.system(tenant)
    tenant_services.agent_create(actor=system, key="resolver", name="Resolver")
    slow = services.custom_tool_create(actor=system, name="slow_echo", command="sleep 2 && echo finally done")
    pwned = Path(f"/tmp/pwned-{uuid.uuid4().hex}")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=base)
            page = context.new_page()
            watcher = context.new_page()  # the same session: the tools list, open in another tab
            for p in (page, watcher):
                p.set_default_timeout(10_000)
            log_in(page, base, admin.email)

            watcher.goto("/custom-tools/")
            expect(watcher.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            rows = watcher.locator("table[data-live-list] tbody tr[data-id]")
            expect(rows).to_have_count(1)
            watcher.evaluate("window.__sameDocument = true")

            # The administrator defines the tool; a schema that is no schema is refused first.
            page.get_by_role("navigation", name="Sections").get_by_role("link", name="Custom tools").click()
            expect(page.get_by_role("heading", name="Custom tools")).to_be_visible()
            page.get_by_role("link", name="Add tool").click()
            page.get_by_label("Name", exact=True).fill("dns_lookup")
            page.get_by_label("Description").fill("Look up the addresses of a host name.")
            page.get_by_label("Parameters (JSON Schema)").fill(
                '{"type": "object", "properties": {"domain": 5}}'
            )
            page.get_by_label("Command template").fill("getent hosts {{.domain}}")
            page.get_by_label("Timeout (seconds)").fill("10")
            page.get_by_role("button", name="Add tool").click()
            expect(page.get_by_text("not a valid JSON Schema at properties/domain")).to_be_visible()
            expect(rows).to_have_count(1)  # nothing was saved
            page.get_by_label("Parameters (JSON Schema)").fill(json.dumps(SCHEMA, indent=2))
            page.get_by_role("button", name="Add tool").click()
            expect(
                page.get_by_role("status").filter(has_text="Custom tool dns_lookup defined.")
            ).to_be_visible()
            expect(page.get_by_role("heading", name="Custom tool dns_lookup")).to_be_visible()

            # It arrives in the list open in the other tab without a reload.
            expect(rows).to_have_count(2, timeout=15_000)
            expect(watcher.locator("tr.is-new")).to_contain_text("dns_lookup")
            expect(watcher.locator("tr.is-new [data-field='scope']")).to_have_text("global")
            assert watcher.evaluate("window.__sameDocument") is True

            # The test run with localhost shows the output, the rendered command and the decision path.
            page.get_by_role("link", name="Test run").click()
            expect(page.get_by_role("heading", name="Test run of dns_lookup")).to_be_visible()
            page.get_by_label("Agent").select_option("resolver")
            page.get_by_label("Arguments (JSON)").fill('{"domain": "localhost"}')
            page.get_by_role("button", name="Run").click()
            result = page.locator("[data-run-result]")
            expect(result.locator(".run-state")).to_have_text("succeeded")
            expect(result.locator("[data-field='rendered']")).to_have_text("getent hosts 'localhost'")
            expect(result.locator("[data-field='output']")).to_contain_text("localhost")
            expect(result.locator("[data-steps] li")).to_have_count(6)
            expect(result.locator("[data-steps]")).to_contain_text("deny_groups: passed")
            shot(page, "custom-tool-test-run")

            # An injection attempt is one quoted argument: nothing else runs.
            page.get_by_label("Arguments (JSON)").fill(json.dumps({"domain": f"x; touch {pwned}"}))
            page.get_by_role("button", name="Run").click()
            expect(result.locator("[data-field='rendered']")).to_have_text(f"getent hosts 'x; touch {pwned}'")
            expect(result.locator(".run-state")).to_have_text("failed")
            expect(result.locator("[data-field='output']")).not_to_contain_text("touch")
            assert not pwned.exists()

            # A slow run shows that it is at work until the answer comes: what the page showed just
            # after the submission is kept in sessionStorage, which outlives the page the form opens.
            page.goto(f"/custom-tools/{slow.pk}/test/")
            page.evaluate(
                """() => {
                  const form = document.querySelector("form[data-run-form]");
                  form.addEventListener("submit", () => window.setTimeout(() => {
                    const busy = form.querySelector("[data-run-busy]");
                    const button = form.querySelector("button[type=submit]");
                    sessionStorage.setItem("atWork", JSON.stringify(
                      [!busy.hidden, busy.textContent.trim(), button.textContent, button.disabled]));
                  }, 50));
                }"""
            )
            page.get_by_role("button", name="Run").click()
            expect(result.locator("[data-field='output']")).to_have_text("finally done", timeout=15_000)
            shown, text, label, disabled = json.loads(page.evaluate("sessionStorage.getItem('atWork')"))
            assert (shown, label, disabled) == (True, "Running…", True)
            assert text.startswith("The run is at work")
        finally:
            browser.close()

    assert not pwned.exists()
    tool = CustomTool.objects.for_tenant(tenant).get(name="dns_lookup")
    assert tool.parameters == SCHEMA
    assert tool.command == "getent hosts {{.domain}}"


@needs_chromium
def test_an_admin_registers_gh_from_its_preset_and_test_runs_it(live, tmp_path):
    base = live.daphne()
    tenant = factories.make_tenant("globex")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@globex.test")
    tenant_services.agent_create(actor=Actor.system(tenant), key="coder", name="Coder")
    gh = fake_cli(JAIL_PROGRAMS / uuid.uuid4().hex / "bin")  # where daphne's jails see it

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=base)
            page = context.new_page()
            watcher = context.new_page()
            for p in (page, watcher):
                p.set_default_timeout(10_000)
            log_in(page, base, admin.email)
            watcher.goto("/secure-cli/")
            expect(watcher.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
            rows = watcher.locator("table[data-live-list] tbody tr[data-id]")
            expect(rows).to_have_count(0)

            # One click on the preset fills the form; the credentials are the administrator's to give.
            page.get_by_role("navigation", name="Sections").get_by_role(
                "link", name="Credentialed CLIs"
            ).click()
            page.get_by_role("link", name="Add gh").click()
            expect(page.get_by_role("heading", name="Add gh (GitHub CLI)")).to_be_visible()
            expect(page.get_by_label("Binary", exact=True)).to_have_value("gh")
            expect(page.get_by_label("Denied arguments")).to_contain_text("repo\\s+delete")
            expect(page.get_by_label("Tips")).to_have_value("Use --json flag for structured output")
            expect(page.get_by_label("Timeout (seconds)")).to_have_value("30")
            page.get_by_label("Path").fill(str(gh))
            page.get_by_role("button", name="Add CLI").click()
            expect(page.get_by_text("the gh preset needs GH_TOKEN")).to_be_visible()
            page.get_by_label("Credentials (environment)").fill(f"GH_TOKEN={TOKEN}")
            page.get_by_role("button", name="Add CLI").click()
            expect(
                page.get_by_role("status").filter(has_text="Credentialed CLI gh registered.")
            ).to_be_visible()
            expect(page.locator("dl.facts")).to_contain_text("GH_TOKEN")

            # The list in the other tab follows: the new row, then its state.
            expect(rows).to_have_count(1, timeout=15_000)
            expect(rows.first.locator("[data-field='env']")).to_have_text("GH_TOKEN")
            page.get_by_role("button", name="Disable").click()
            expect(rows.first.locator("[data-field='enabled']")).to_have_text("disabled")
            page.get_by_role("button", name="Enable").click()
            expect(rows.first.locator("[data-field='enabled']")).to_have_text("enabled")

            # The test run: the credential injected, masked in the output; a quoted | is an argument.
            page.get_by_role("link", name="Test run").click()
            page.get_by_label("Agent").select_option("coder")
            page.get_by_label("Arguments").fill('api "x | y"')
            page.get_by_role("button", name="Run").click()
            result = page.locator("[data-run-result]")
            expect(result.locator(".run-state")).to_have_text("succeeded")
            expect(result.locator("[data-field='rendered']")).to_have_text("gh api 'x | y'")
            expect(result.locator("[data-field='output']")).to_contain_text("arg=[x | y]")
            expect(result.locator("[data-field='output']")).to_contain_text("value: [REDACTED]")
            expect(result.locator("[data-steps]")).to_contain_text("env: injected — GH_TOKEN (binary)")
            shot(page, "secure-cli-test-run")
            assert TOKEN not in page.content()

            page.get_by_label("Arguments").fill("repo delete x")
            page.get_by_role("button", name="Run").click()
            expect(result.locator(".run-state")).to_have_text("failed or refused")
            expect(result.locator("[data-steps]")).to_contain_text("deny_args: refused")
            assert TOKEN not in page.content()
        finally:
            browser.close()

    binary = SecureCLIBinary.objects.for_tenant(tenant).get()
    assert (binary.preset, binary.env) == ("gh", {"GH_TOKEN": TOKEN})
