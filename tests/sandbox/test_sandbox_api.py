"""The sandbox API against a real Docker engine: the engine's state and the tenant's settings, the
tenant's containers with their resource use, stopping one (audited, published live), an engine that
does not answer, and the validation of sandbox settings through the tenant and agent APIs.

A container is made the way an agent makes one: PATCH /api/v1/tenant/ turns the sandbox on, then an
exec call through POST /api/v1/runtime/execute runs in it."""

from __future__ import annotations

import contextlib
from datetime import timedelta

import docker
import docker.errors
import pytest
from django.utils import timezone

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.sandbox import manager
from apps.sandbox import services as sandbox_services
from apps.sandbox.models import SandboxContainer
from apps.tenants.actors import Actor
from apps.tenants.models import Agent
from apps.tenants.roles import Role
from tests import factories
from tests.api.tenant_state import tenant_state
from tests.sandbox.conftest import containers_of

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sandbox_settings")]

STATUS = "/api/v1/sandbox/"
CONTAINERS = "/api/v1/sandbox/containers/"


def ok(response, status: int = 200):
    assert response.status_code == status, response.content
    return response.json() if status != 204 else None


def make_container(admin, member, *, session: str = "s-1") -> dict:
    """Turn the sandbox on for every agent and run one command as the agent ``bot``; the container's
    row as the list shows it."""
    ok(admin.patch("/api/v1/tenant/", {"settings": {"sandbox": {"mode": "all"}}}, format="json"))
    body = {
        "agent": "bot",
        "tool": "exec",
        "args": {"command": "echo in the box"},
        "context": {"session_key": session},
    }
    result = ok(member.post("/api/v1/runtime/execute", body, format="json"))
    assert result["is_error"] is False, result
    assert result["for_llm"].startswith("in the box")
    rows = ok(admin.get(CONTAINERS))["results"]
    return next(row for row in rows if row["session_key"] == session)


def test_the_status_shows_the_engine_the_settings_and_the_images(admin_a, sandbox_settings):
    body = ok(admin_a.get(STATUS))

    assert body["jail"]["available"] is True
    assert (
        body["jail"]["syscall_filter"]
        == "add_key, keyctl, request_key, io_uring_setup, io_uring_enter, io_uring_register"
    )
    assert body["engine"]["available"] is True
    assert body["engine"]["version"]
    assert body["engine"]["images"] == [sandbox_settings]
    assert body["allowed_images"] == [sandbox_settings]
    assert body["config"] == {
        "mode": "jail",
        "scope": "session",
        "workspace_access": "rw",
        "image": sandbox_settings,
        "memory_mb": 512,
        "cpus": 1.0,
        "pids_limit": 256,
        "timeout_seconds": 300,
        "network": False,
        "read_only_root": True,
        "tmpfs_size_mb": 64,
        "cpu_seconds": 300,
        "address_space_mb": 4096,
        "file_size_mb": 1024,
        "open_files": 1024,
    }

    sandbox = {"mode": "non-main", "memory_mb": 256, "cpus": 0.5, "network": True}
    ok(admin_a.patch("/api/v1/tenant/", {"settings": {"sandbox": sandbox}}, format="json"))
    config = ok(admin_a.get(STATUS))["config"]
    assert (config["mode"], config["memory_mb"], config["cpus"], config["network"]) == (
        "non-main",
        256,
        0.5,
        True,
    )
    assert config["pids_limit"] == 256  # keys not set keep their defaults


def test_a_container_is_listed_with_its_use_and_can_be_read_alone(admin_a, member_a, agent, engine):
    row = make_container(admin_a, member_a)

    assert row["agent"] == "bot"
    assert (row["scope"], row["session_key"], row["exec_count"]) == ("session", "s-1", 1)
    assert row["limits"]["memory_mb"] == 512
    [container] = containers_of(engine, scope="session")
    assert row["name"] == container.name
    usage = row["usage"]
    assert usage["state"] == "running"
    assert usage["memory_bytes"] > 0
    assert usage["memory_limit_bytes"] == 512 * 1024 * 1024
    assert usage["pids"] >= 1
    assert isinstance(usage["cpu_seconds"], float | int)

    alone = ok(admin_a.get(f"{CONTAINERS}{row['id']}/"))
    assert alone["name"] == row["name"]
    assert alone["usage"]["state"] == "running"

    without = ok(admin_a.get(CONTAINERS + "?usage=false"))["results"]
    assert [r["id"] for r in without] == [row["id"]]
    assert "usage" not in without[0]


def test_the_list_is_newest_use_first_and_bounded(admin_a, tenant_a, agent, django_assert_max_num_queries):
    now = timezone.now()
    for i in range(5):
        SandboxContainer.objects.create(
            tenant=tenant_a,
            key=f"k{i}",
            scope="agent",
            agent=agent,
            name=f"toolgate-sbx-listed-{i}",
            container_id=f"made-up-{i}",
            image="x",
            fingerprint="f",
            workspace_access="rw",
            last_used_at=now - timedelta(minutes=i),
        )
    with django_assert_max_num_queries(6):
        body = ok(admin_a.get(CONTAINERS + "?usage=false&page_size=3"))
    assert body["count"] == 5
    assert [r["name"] for r in body["results"]] == [f"toolgate-sbx-listed-{i}" for i in range(3)]

    gone = ok(admin_a.get(CONTAINERS + "?page_size=1"))["results"][0]
    assert gone["usage"] == {"state": "gone"}  # the engine has no such container

    for query in ("?page_size=201", "?usage=perhaps", "?colour=blue"):
        error = ok(admin_a.get(CONTAINERS + query), 400)["error"]
        assert error["code"] == "invalid", query


def test_stopping_removes_the_container_and_its_row_and_is_audited(
    admin_a, member_a, agent, tenant_a, engine
):
    row = make_container(admin_a, member_a)
    [container] = containers_of(engine, scope="session")

    ok(admin_a.delete(f"{CONTAINERS}{row['id']}/"), 204)

    with pytest.raises(docker.errors.NotFound):
        engine.containers.get(container.id)
    assert not SandboxContainer.objects.for_tenant(tenant_a).exists()
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="sandbox.container.stopped")
    assert (event.target_type, event.target_id) == ("sandbox_container", row["id"])
    assert event.actor_kind == "api_key"
    assert event.data["name"] == row["name"]
    assert event.data["agent"] == "bot"
    assert ok(admin_a.get(f"{CONTAINERS}{row['id']}/"), 404)["error"]["code"] == "not_found"

    # The agent's next command gets a new container.
    again = make_container(admin_a, member_a)
    assert again["id"] != row["id"]
    assert len(containers_of(engine, scope="session")) == 1


def test_an_engine_that_does_not_answer(admin_a, member_a, agent, tenant_a, engine, settings):
    row = make_container(admin_a, member_a)
    settings.TOOLGATE_DOCKER_URL = "unix:///tmp/sbxui-no-engine-here.sock"
    manager.reset_client()
    audited = AuditEvent.objects.for_tenant(tenant_a).filter(verb="sandbox.container.stopped")

    status = ok(admin_a.get(STATUS))["engine"]
    assert status == {"available": False, "reason": "the Docker engine cannot be reached", "images": []}
    [listed] = ok(admin_a.get(CONTAINERS))["results"]
    assert listed["usage"] == {"state": "unknown"}
    before = tenant_state(tenant_a)

    error = ok(admin_a.delete(f"{CONTAINERS}{row['id']}/"), 503)["error"]

    assert error["code"] == "sandbox_engine_unavailable"
    assert error["message"] == (
        f"The Docker engine could not stop the container {row['name']}; it is kept. "
        "Try again once the engine answers."
    )
    assert tenant_state(tenant_a) == before
    assert not audited.exists()
    assert len(containers_of(engine, scope="session")) == 1

    # Back with the engine, the stop goes through.
    settings.TOOLGATE_DOCKER_URL = "unix:///var/run/docker.sock"
    manager.reset_client()
    ok(admin_a.delete(f"{CONTAINERS}{row['id']}/"), 204)
    assert containers_of(engine, scope="session") == []
    assert audited.count() == 1


@pytest.mark.parametrize("role", [Role.VIEWER, Role.MEMBER])
def test_below_admin_is_refused_with_nothing_changed(role, admin_a, member_a, agent, tenant_a, engine):
    row = make_container(admin_a, member_a)
    client = factories.key_client(factories.make_api_key(tenant_a, role))
    before = tenant_state(tenant_a)

    for method, url in (
        ("get", STATUS),
        ("get", CONTAINERS),
        ("get", f"{CONTAINERS}{row['id']}/"),
        ("delete", f"{CONTAINERS}{row['id']}/"),
    ):
        error = ok(getattr(client, method)(url), 403)["error"]
        assert error["code"] == "permission_denied"
        assert "admin" in error["message"]
    assert tenant_state(tenant_a) == before
    assert len(containers_of(engine, scope="session")) == 1


def test_another_tenants_container_is_404_with_nothing_changed(
    admin_a, member_a, agent, tenant_a, outsider, engine
):
    row = make_container(admin_a, member_a)
    before = tenant_state(tenant_a)

    assert ok(outsider.get(CONTAINERS))["results"] == []
    for method in ("get", "delete"):
        assert ok(getattr(outsider, method)(f"{CONTAINERS}{row['id']}/"), 404)["error"]["code"] == "not_found"
    assert ok(outsider.get(STATUS))["config"]["mode"] == "jail"  # B's own settings
    assert tenant_state(tenant_a) == before
    assert len(containers_of(engine, scope="session")) == 1


def test_anonymous_is_401(anonymous):
    for url in (STATUS, CONTAINERS, f"{CONTAINERS}00000000-0000-0000-0000-000000000001/"):
        assert ok(anonymous.get(url), 401)["error"]["code"] == "not_authenticated"


# --- validation of the settings --------------------------------------------------------------------------

BAD = [
    ({"mode": "all", "colour": "blue"}, "Unknown keys: colour."),
    ({"memory_mb": 99999}, '"memory_mb" must be a whole number from 16 to 16384.'),
    ({"memory_mb": 64.5}, '"memory_mb" must be a whole number from 16 to 16384.'),
    ({"cpus": 0}, '"cpus" must be a number from 0.1 to 16.'),
    ({"image": "evil/miner:latest"}, '"image" must be one of the images this server allows:'),
    ({"mode": "sometimes"}, '"mode" must be one of jail, docker, host.'),
    ({"network": "yes"}, '"network" must be true or false.'),
    ("all", "Must be an object"),
]


def _messages(response) -> str:
    error = ok(response, 400)["error"]
    assert error["code"] == "invalid"
    return str(error)


@pytest.mark.parametrize(("sandbox", "message"), BAD, ids=[m[:24] for _, m in BAD])
def test_bad_tenant_settings_are_refused_with_nothing_changed(admin_a, tenant_a, sandbox, message):
    ok(admin_a.patch("/api/v1/tenant/", {"settings": {"sandbox": {"mode": "non-main"}}}, format="json"))
    before = tenant_state(tenant_a)

    response = admin_a.patch("/api/v1/tenant/", {"settings": {"sandbox": sandbox}}, format="json")

    assert message in _messages(response)
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(("sandbox", "message"), BAD, ids=[m[:24] for _, m in BAD])
def test_bad_agent_settings_are_refused_with_nothing_changed(admin_a, tenant_a, agent, sandbox, message):
    before = tenant_state(tenant_a)

    changed = admin_a.patch("/api/v1/agents/bot/", {"settings": {"sandbox": sandbox}}, format="json")
    created = admin_a.post(
        "/api/v1/agents/", {"key": "other", "name": "Other", "settings": {"sandbox": sandbox}}, format="json"
    )

    assert message in _messages(changed)
    assert message in _messages(created)
    assert tenant_state(tenant_a) == before


# --- live -----------------------------------------------------------------------------------------------


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_administrators_see_containers_made_and_stopped_live(tenant_a, live, engine):
    from tests.live.wsclient import event_of, open_socket

    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    admin_key = factories.make_api_key(tenant_a, Role.ADMIN)
    admin = factories.key_client(admin_key)
    member = factories.key_client(factories.make_api_key(tenant_a, Role.MEMBER))
    live.daphne()
    with contextlib.ExitStack() as sockets:
        watcher = sockets.enter_context(open_socket(live.ws_url, api_key=admin_key))
        assert "sandbox" in watcher.recv()["topics"]
        watcher.subscribe(["sandbox"])
        bystander = sockets.enter_context(
            open_socket(live.ws_url, api_key=factories.make_api_key(tenant_a, Role.MEMBER))
        )
        assert "sandbox" not in bystander.recv()["topics"]
        refused = bystander.request({"type": "subscribe", "topics": ["sandbox"]})
        assert (refused["type"], refused["code"]) == ("error", "permission_denied")

        system = Actor.system(tenant_a)
        sandbox_services.sandbox_settings_update(actor=system, values={"mode": "all", "memory_mb": 256})
        tenant_wide = watcher.wait_for(
            lambda m: event_of(m, topic="sandbox", type="sandbox.settings.updated")
        )
        assert tenant_wide["event"]["data"] == {"agent": None, "sandbox": {"mode": "all", "memory_mb": 256}}
        bot = Agent.objects.for_tenant(tenant_a).get(key="bot")
        sandbox_services.agent_sandbox_update(actor=system, agent=bot, values={"pids_limit": 64})
        own = watcher.wait_for(
            lambda m: event_of(m, topic="sandbox", type="sandbox.settings.updated", agent="bot")
        )
        assert own["event"]["data"]["sandbox"] == {"pids_limit": 64}

        row = make_container(admin, member)
        assert row["limits"]["pids_limit"] == 64  # the agent's own key
        created = watcher.wait_for(lambda m: event_of(m, topic="sandbox", type="sandbox.container.created"))
        assert created["event"]["data"]["id"] == row["id"]
        assert created["event"]["tenant"] == tenant_a.slug

        ok(admin.delete(f"{CONTAINERS}{row['id']}/"), 204)

        removed = watcher.wait_for(lambda m: event_of(m, topic="sandbox", type="sandbox.container.removed"))
        assert removed["event"]["data"]["id"] == row["id"]
        assert removed["event"]["data"]["reason"] == "stopped"
        assert containers_of(engine, scope="session") == []
