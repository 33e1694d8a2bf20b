"""The sandbox pages through the Django test client, against the real Docker engine: the engine's state
and images, the tenant's settings form, an agent's overrides, the containers table with the engine's
figures, and stopping a container through the confirmation page.

Personas: an admin and an owner of tenant A (everything), a viewer and a member (403 on every route,
nothing changed), and tenant B's owner, the outsider, for whom A's containers and agents are 404.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import docker
import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.sandbox import manager
from apps.sandbox.models import SandboxContainer
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api.tenant_state import tenant_state
from tests.sandbox.conftest import containers_of, sandbox_image, sandbox_settings  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sandbox_settings")]

PAGE = reverse("dashboard:sandbox")
FRAGMENT = reverse("dashboard:sandbox_containers")
MISSING_IMAGE = "toolgate-sandbox-missing:never-built"


def body(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


def fresh(tenant: Tenant) -> Tenant:
    return Tenant.objects.get(pk=tenant.pk)


def form_data(**values: Any) -> dict[str, Any]:
    from django.conf import settings

    data: dict[str, Any] = {
        "mode": "jail",
        "scope": "session",
        "workspace_access": "rw",
        "image": settings.TOOLGATE_SANDBOX_IMAGE,
        "memory_mb": "512",
        "cpus": "1.0",
        "pids_limit": "256",
        "timeout_seconds": "300",
        "read_only_root": "on",
        "tmpfs_size_mb": "64",
        "cpu_seconds": "300",
        "address_space_mb": "4096",
        "file_size_mb": "1024",
        "open_files": "1024",
    }
    data.update(values)
    return {k: v for k, v in data.items() if v is not None}


def made_up_row(tenant: Tenant, agent: Agent | None, name: str, **fields: Any) -> SandboxContainer:
    """A container row whose container the engine does not have (its state shows as gone)."""
    values: dict[str, Any] = {
        "key": name,
        "scope": "session",
        "session_key": f"{name}-session",
        "container_id": f"{name}-id",
        "image": "x",
        "fingerprint": "f",
        "workspace_access": "rw",
        "last_used_at": timezone.now(),
        "exec_count": 3,
        **fields,
    }
    return SandboxContainer.objects.create(tenant=tenant, agent=agent, name=name, **values)


@pytest.fixture
def engine():
    client = docker.DockerClient(base_url="unix:///var/run/docker.sock", version=manager.API_VERSION)
    yield client
    client.close()


@pytest.fixture
def real_container(tenant_a: Tenant, bot: Agent) -> SandboxContainer:
    """A running container of ``bot``, made by an exec call through the API."""
    admin = factories.key_client(factories.make_api_key(tenant_a, Role.ADMIN))
    response = admin.patch("/api/v1/tenant/", {"settings": {"sandbox": {"mode": "docker"}}}, format="json")
    assert response.status_code == 200, response.content
    call = {"agent": "bot", "tool": "exec", "args": {"command": "true"}, "context": {"session_key": "chat-7"}}
    result = admin.post("/api/v1/runtime/execute", call, format="json").json()
    assert result["is_error"] is False, result
    return SandboxContainer.objects.for_tenant(tenant_a).get()


# --- who may open it --------------------------------------------------------------------------------------


def test_the_section_is_for_administrators(viewer, member, admin, owner):
    for client, shown in ((viewer, False), (member, False), (admin, True), (owner, True)):
        page = body(client.get(reverse("dashboard:home")))
        nav = page[page.index('<nav class="sidenav"') : page.index("</nav>")]
        assert (PAGE in nav) is shown


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_below_admin_every_route_is_403_with_nothing_changed(request, persona, tenant_a, bot):
    client: Client = request.getfixturevalue(persona)
    row = made_up_row(tenant_a, bot, "toolgate-sbx-kept")
    stop = reverse("dashboard:sandbox_container_stop", args=[row.pk])
    agent_page = reverse("dashboard:sandbox_agent", args=["bot"])
    before = tenant_state(tenant_a)

    for url in (PAGE, FRAGMENT, stop, agent_page, reverse("dashboard:sandbox_agent_pick") + "?agent=bot"):
        assert client.get(url).status_code == 403, url
    assert client.post(PAGE, form_data(mode="docker")).status_code == 403
    assert client.post(stop).status_code == 403
    assert client.post(agent_page, {"mode": "docker"}).status_code == 403
    assert tenant_state(tenant_a) == before


# --- the engine -------------------------------------------------------------------------------------------


def test_the_engine_and_its_images_are_shown(owner, settings):
    page = body(owner.get(PAGE))
    assert 'data-available="true"' in page
    assert f'data-image="{settings.TOOLGATE_SANDBOX_IMAGE}" data-present="true"' in page
    assert "data-build-hint" not in page

    present = settings.TOOLGATE_SANDBOX_IMAGE
    settings.TOOLGATE_SANDBOX_IMAGE = MISSING_IMAGE
    settings.TOOLGATE_SANDBOX_IMAGES = [MISSING_IMAGE, present]
    page = body(owner.get(PAGE))
    assert f'data-image="{MISSING_IMAGE}" data-present="false"' in page
    assert f'data-image="{present}" data-present="true"' in page
    hint = page[page.index("data-build-hint") :]
    assert "docker build -t toolgate-sandbox:bookworm-slim deploy/sandbox" in hint
    assert "python manage.py sandbox_image" in hint


def test_an_engine_that_does_not_answer_is_said_so(admin, tenant_a, bot, settings):
    made_up_row(tenant_a, bot, "toolgate-sbx-somewhere")
    settings.TOOLGATE_DOCKER_URL = "unix:///tmp/sbxui-no-engine-here.sock"
    manager.reset_client()

    page = body(admin.get(PAGE))

    assert 'data-available="false"' in page
    assert "the Docker engine cannot be reached" in page
    assert 'data-state="unknown"' in page


# --- the tenant's settings --------------------------------------------------------------------------------


def test_the_form_shows_every_key_with_the_settings_in_effect(admin, tenant_a, settings):
    tenant_services.tenant_update(
        actor=Actor.system(tenant_a),
        changes={"settings": {"sandbox": {"mode": "docker", "memory_mb": 768}}},
    )
    page = body(admin.get(PAGE))
    form = page[page.index('class="form sandbox-form"') :]

    for key in (
        "mode",
        "scope",
        "workspace_access",
        "image",
        "memory_mb",
        "cpus",
        "pids_limit",
        "timeout_seconds",
        "network",
        "read_only_root",
        "tmpfs_size_mb",
    ):
        assert f'name="{key}"' in form, key
    assert '<option value="docker" selected>docker</option>' in form
    assert 'name="memory_mb" value="768" min="16" max="16384"' in form
    assert "From 16 to 16384." in form
    assert 'name="cpus" value="1.0" step="0.1" min="0.1" max="16"' in form
    assert f'<option value="{settings.TOOLGATE_SANDBOX_IMAGE}" selected>' in form
    assert 'type="checkbox" name="network"' in form
    assert "Warning: on lets commands open connections like this server itself" in form
    assert "jail (the default): each command runs in a bubblewrap jail" in form


def test_saving_the_form_changes_only_the_sandbox_settings(owner, tenant_a, bot, settings):
    system = Actor.system(tenant_a)
    tenant_services.tenant_update(actor=system, changes={"settings": {"tools": {"exec": {"timeout": 120}}}})
    bot_settings = dict(Agent.objects.for_tenant(tenant_a).get(pk=bot.pk).settings)

    response = owner.post(
        PAGE, form_data(mode="docker", memory_mb="256", cpus="0.5", network="on", read_only_root=None)
    )

    assert response.status_code == 302
    assert response["Location"] == PAGE
    saved = fresh(tenant_a).settings
    assert saved["sandbox"] == {
        "mode": "docker",
        "scope": "session",
        "workspace_access": "rw",
        "image": settings.TOOLGATE_SANDBOX_IMAGE,
        "memory_mb": 256,
        "cpus": 0.5,
        "pids_limit": 256,
        "timeout_seconds": 300,
        "network": True,
        "read_only_root": False,
        "tmpfs_size_mb": 64,
        "cpu_seconds": 300,
        "address_space_mb": 4096,
        "file_size_mb": 1024,
        "open_files": 1024,
    }
    assert saved["tools"] == {"exec": {"timeout": 120}}
    assert Agent.objects.for_tenant(tenant_a).get(pk=bot.pk).settings == bot_settings
    event = AuditEvent.objects.for_tenant(tenant_a).filter(verb="tenant.updated").latest("created_at")
    assert set(event.data["changes"]) == {"settings.sandbox"}
    assert "Sandbox settings saved." in body(owner.get(PAGE))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"memory_mb": "99999"}, "Ensure this value is less than or equal to 16384."),
        ({"memory_mb": "12.5"}, "Enter a whole number."),
        ({"cpus": "0"}, "Ensure this value is greater than or equal to 0.1."),
        ({"pids_limit": ""}, "This field is required."),
        (
            {"image": "evil/miner:latest"},
            "Select a valid choice. evil/miner:latest is not one of the available",
        ),
        ({"mode": "sometimes"}, "Select a valid choice. sometimes is not one of the available choices."),
    ],
)
def test_form_errors_are_shown_and_nothing_is_saved(admin, tenant_a, values, message):
    before = tenant_state(tenant_a)

    page = body(admin.post(PAGE, form_data(**{"mode": "docker", **values})))

    assert "Nothing was saved: fix the fields marked below." in page
    assert message in page
    assert tenant_state(tenant_a) == before


# --- the containers ---------------------------------------------------------------------------------------


def test_the_table_lists_the_tenants_containers_with_their_use(
    admin, tenant_a, tenant_b, bot, real_container
):
    old = made_up_row(tenant_a, None, "toolgate-sbx-shared-one", scope="shared", session_key="")
    SandboxContainer.objects.for_tenant(tenant_a).filter(pk=old.pk).update(
        created_at=timezone.now() - timedelta(days=2), last_used_at=timezone.now() - timedelta(hours=3)
    )
    made_up_row(tenant_b, None, "toolgate-sbx-of-tenant-b")

    for page in (body(admin.get(PAGE)), body(admin.get(FRAGMENT))):
        assert page.index(real_container.name) < page.index("toolgate-sbx-shared-one")  # newest use first
        assert "toolgate-sbx-of-tenant-b" not in page
        row = page[page.index(f'data-id="{real_container.pk}"') :]
        row = row[: row.index("</tr>")]
        assert '<td data-field="agent"><code>bot</code></td>' in row
        assert '<td data-field="scope">session</td>' in row
        assert "<code>chat-7</code>" in row
        assert '<td data-field="exec-count">1</td>' in row
        assert 'data-state="running"' in row
        assert "/ 512.0\xa0MB" in row  # used / limit
        assert '<td data-field="pids">' in row
        assert " s</td>" in row  # CPU seconds
        assert reverse("dashboard:sandbox_container_stop", args=[real_container.pk]) in row
        shared = page[page.index(f'data-id="{old.pk}"') :]
        shared = shared[: shared.index("</tr>")]
        assert "every agent" in shared
        assert 'data-state="gone"' in shared
        assert "2\xa0days" in shared
        assert "3\xa0hours ago" in shared


def test_the_page_is_live_and_polls_its_table(admin):
    page = body(admin.get(PAGE))
    assert 'hx-get="/sandbox/containers/"' in page
    assert 'hx-trigger="every 10s, sandbox-changed from:body"' in page
    assert "django_htmx/htmx-2.min.js" in page
    assert "js/sandbox-live.js" in page
    assert '"topic": "sandbox"' in page
    assert "data-live-indicator" in page


def test_stop_asks_then_removes_the_container(admin, tenant_a, real_container, engine):
    stop = reverse("dashboard:sandbox_container_stop", args=[real_container.pk])

    confirm = body(admin.get(stop))
    assert f"Stop the sandbox container {real_container.name}?" in confirm
    assert "It serves the agent bot (session scope, session chat-7)." in confirm
    assert SandboxContainer.objects.for_tenant(tenant_a).count() == 1

    response = admin.post(stop)

    assert response.status_code == 302
    assert response["Location"] == PAGE
    assert not SandboxContainer.objects.for_tenant(tenant_a).exists()
    assert containers_of(engine, scope="session") == []
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="sandbox.container.stopped").count() == 1
    assert f"Container {real_container.name} stopped and removed." in body(admin.get(PAGE))


def test_a_stop_the_engine_refuses_keeps_the_container(admin, tenant_a, real_container, engine, settings):
    stop = reverse("dashboard:sandbox_container_stop", args=[real_container.pk])
    settings.TOOLGATE_DOCKER_URL = "unix:///tmp/sbxui-no-engine-here.sock"
    manager.reset_client()
    before = tenant_state(tenant_a)

    response = admin.post(stop, follow=True)

    assert "could not stop the container" in response.content.decode()
    assert tenant_state(tenant_a) == before
    assert len(containers_of(engine, scope="session")) == 1


# --- an agent's overrides ---------------------------------------------------------------------------------


def test_an_agent_inherits_or_sets_each_key(admin, tenant_a, bot, settings):
    system = Actor.system(tenant_a)
    tenant_services.tenant_update(
        actor=system, changes={"settings": {"sandbox": {"mode": "docker", "memory_mb": 768}}}
    )
    tenant_services.agent_update(actor=system, agent=bot, changes={"settings": {"temperature": 0.2}})
    url = reverse("dashboard:sandbox_agent", args=["bot"])

    page = body(admin.get(url))
    assert '<option value="" selected>inherit from tenant (docker)</option>' in page
    assert 'placeholder="inherit from tenant (768)"' in page
    assert "inherit from tenant (off)" in page  # network
    assert 'data-applies="true"' in page

    response = admin.post(url, {"mode": "jail", "memory_mb": "256", "network": "on"})

    assert response.status_code == 302
    saved = Agent.objects.for_tenant(tenant_a).get(pk=bot.pk).settings
    assert saved == {"temperature": 0.2, "sandbox": {"mode": "jail", "memory_mb": 256, "network": True}}
    assert fresh(tenant_a).settings["sandbox"] == {"mode": "docker", "memory_mb": 768}
    page = body(admin.get(url))
    assert 'data-applies="false"' in page
    assert '<option value="jail" selected>jail</option>' in page
    overview = body(admin.get(PAGE))
    overrides = overview[overview.index("data-overrides") :]
    assert reverse("dashboard:sandbox_agent", args=["bot"]) in overrides
    assert "memory_mb=256" in overrides

    response = admin.post(url, {"mode": "", "memory_mb": "", "network": ""})  # everything inherited again
    assert response.status_code == 302
    assert Agent.objects.for_tenant(tenant_a).get(pk=bot.pk).settings == {"temperature": 0.2}
    assert "No agent overrides the tenant's sandbox settings." in body(admin.get(PAGE))


def test_bad_overrides_are_shown_and_nothing_is_saved(admin, tenant_a, bot):
    url = reverse("dashboard:sandbox_agent", args=["bot"])
    before = tenant_state(tenant_a)

    page = body(admin.post(url, {"memory_mb": "8", "image": "evil/miner:latest", "network": "maybe"}))

    assert "Ensure this value is greater than or equal to 16." in page
    assert "Select a valid choice. evil/miner:latest" in page
    assert "Select a valid choice. maybe" in page
    assert tenant_state(tenant_a) == before


def test_the_picker_opens_an_agents_page(admin, bot):
    pick = reverse("dashboard:sandbox_agent_pick")
    response = admin.get(pick + "?agent=bot")
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:sandbox_agent", args=["bot"])
    assert admin.get(pick + "?agent=nobody").status_code == 404
    assert admin.get(pick).status_code == 302


# --- another tenant ---------------------------------------------------------------------------------------


def test_another_tenants_containers_and_agents_are_404_with_nothing_changed(outsider, tenant_a, bot):
    row = made_up_row(tenant_a, bot, "toolgate-sbx-of-tenant-a")
    stop = reverse("dashboard:sandbox_container_stop", args=[row.pk])
    agent_page = reverse("dashboard:sandbox_agent", args=["bot"])
    before = tenant_state(tenant_a)

    assert outsider.get(stop).status_code == 404
    assert outsider.post(stop).status_code == 404
    assert outsider.get(agent_page).status_code == 404
    assert outsider.post(agent_page, {"mode": "docker"}).status_code == 404
    assert outsider.get(reverse("dashboard:sandbox_agent_pick") + "?agent=bot").status_code == 404
    for url in (PAGE, FRAGMENT):
        assert "toolgate-sbx-of-tenant-a" not in body(outsider.get(url))
    assert outsider.post(PAGE, form_data(mode="docker")).status_code == 302  # B's own settings
    assert tenant_state(tenant_a) == before
