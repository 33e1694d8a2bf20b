"""The sandbox page in a real browser, against a real Docker engine.

An administrator opens /sandbox/, turns the sandbox on for every agent in the settings form, and an
exec call through the API (an agent loop's key, served by daphne) makes a container: its row appears in
the page without a reload, with the engine's figures. Stop, confirmed, removes it from the engine; the
same page open in another tab sees it go, live.

Headless Chromium against a daphne of its own on the test database, pointed at the small busybox test
image (tests/sandbox/conftest.py) and this run's installation label.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from apps.accounts import services as tenant_services
from apps.sandbox import manager
from apps.sandbox.models import SandboxContainer
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in, shot
from tests.processes import LiveProcesses
from tests.sandbox.conftest import RUN_INSTANCE, containers_of, sandbox_image  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)


@pytest.fixture
def sandbox_daphne(django_db_setup: None, sandbox_image: str) -> Iterator[str]:  # noqa: F811
    """A daphne whose sandbox uses the test image and this run's installation label."""
    from django.db import connection

    processes = LiveProcesses(
        db_name=connection.settings_dict["NAME"],
        extra_env={
            "TOOLGATE_SANDBOX_IMAGE": sandbox_image,
            "TOOLGATE_SANDBOX_IMAGES": sandbox_image,
            "TOOLGATE_SANDBOX_INSTANCE": RUN_INSTANCE,
        },
        label="sandbox-",
    )
    try:
        yield processes.daphne()
    finally:
        processes.stop_all()


@pytest.fixture
def engine() -> Iterator[docker.DockerClient]:
    client = docker.DockerClient(base_url="unix:///var/run/docker.sock", version=manager.API_VERSION)
    yield client
    for container in containers_of(client):
        container.remove(force=True)
    client.close()


@needs_chromium
def test_an_admin_turns_the_sandbox_on_sees_a_container_arrive_and_stops_it(sandbox_daphne, engine):
    base = sandbox_daphne
    tenant = factories.make_tenant("sandboxed")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@sandboxed.test")
    tenant_services.agent_create(actor=Actor.system(tenant), key="bot", name="Bot")
    key = factories.make_api_key(tenant, Role.ADMIN)  # an agent loop that also reads the sandbox API

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1500, "height": 1000}, base_url=base)
            page = context.new_page()
            watcher = context.new_page()  # the same session: the sandbox page, open in another tab
            for p in (page, watcher):
                p.set_default_timeout(10_000)
            log_in(page, base, admin.email)

            page.get_by_role("navigation", name="Sections").get_by_role(
                "link", name="Sandbox", exact=True
            ).click()
            expect(page.get_by_role("heading", name="Sandbox", exact=True)).to_be_visible()
            expect(page.locator("[data-engine]")).to_have_attribute("data-available", "true")
            expect(page.get_by_text("No sandbox containers right now.")).to_be_visible()

            # The sandbox goes on for every agent.
            page.get_by_label("Mode").select_option("docker")
            expect(page.get_by_text("Warning: on lets commands open connections")).to_be_visible()
            page.get_by_role("button", name="Save sandbox settings").click()
            expect(page.get_by_text("Sandbox settings saved.")).to_be_visible()
            expect(page.get_by_label("Mode")).to_have_value("docker")

            watcher.goto("/sandbox/")
            for p in (page, watcher):
                expect(p.locator("[data-live-indicator]")).to_have_attribute("data-state", "live")
                p.evaluate("window.__sameDocument = true")

            # An agent loop's exec call makes a container; both pages show it without a reload, well
            # before their 10-second poll.
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
                assert api.get("/api/v1/sandbox/").json()["config"]["mode"] == "docker"
                call = {
                    "agent": "bot",
                    "tool": "exec",
                    "args": {"command": "echo hello from the box"},
                    "context": {"session_key": "chat-42"},
                }
                result = api.post("/api/v1/runtime/execute", json=call).json()
                assert result["is_error"] is False, result
                assert result["for_llm"].startswith("hello from the box")
                [row] = api.get("/api/v1/sandbox/containers/?usage=false").json()["results"]
            [container] = containers_of(engine, scope="session")
            assert container.name == row["name"]

            for p in (page, watcher):
                line = p.locator(f'#sandbox-containers tr[data-id="{row["id"]}"]')
                expect(line).to_be_visible(timeout=8_000)
                expect(line.locator('[data-field="agent"]')).to_have_text("bot")
                expect(line.locator('[data-field="session"]')).to_have_text("chat-42")
                expect(line.locator('[data-field="state"]')).to_have_text("running")
                expect(line.locator('[data-field="memory"]')).to_contain_text("/ 512.0")
                assert p.evaluate("window.__sameDocument") is True
            shot(page, "sandbox")

            # Stop, confirmed: gone from the engine, and from the page in the other tab.
            page.get_by_role("link", name=f"Stop {row['name']}").click()
            expect(
                page.get_by_role("heading", name=f"Stop the sandbox container {row['name']}?")
            ).to_be_visible()
            shot(page, "sandbox-stop")
            page.get_by_role("button", name="Stop container").click()
            expect(page.get_by_text(f"Container {row['name']} stopped and removed.")).to_be_visible()
            expect(page.locator("#sandbox-containers tr[data-id]")).to_have_count(0)
            with pytest.raises(docker.errors.NotFound):
                engine.containers.get(container.id)
            expect(watcher.locator("#sandbox-containers tr[data-id]")).to_have_count(0, timeout=8_000)
            assert watcher.evaluate("window.__sameDocument") is True

            # Once the session ends, a refresh does not put the login page in place of the table.
            page.get_by_label(f"Account menu for {admin.email}").click()
            page.get_by_role("button", name="Log out").click()
            with watcher.expect_response(lambda response: "/login/" in response.url):
                watcher.evaluate("htmx.trigger(document.body, 'sandbox-changed')")
            watcher.wait_for_timeout(300)
            expect(watcher.locator("#sandbox-containers [data-sandbox-containers]")).to_have_count(1)
            expect(watcher.locator('#sandbox-containers input[name="password"]')).to_have_count(0)
        finally:
            browser.close()

    assert Tenant.objects.get(pk=tenant.pk).settings["sandbox"]["mode"] == "docker"
    assert not SandboxContainer.objects.for_tenant(tenant).exists()
