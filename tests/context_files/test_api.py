"""The context files API: every persona on every route, the seven files of an agent, setting and deleting
the agent's text and a user's copy (audited, published on the ``context_files`` topic), validation, and
what the agent's tools read after each change."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message

from apps.audit.models import AuditEvent
from apps.context_files import services
from apps.context_files.models import NAMES, AgentContextFile
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api import roles_context_files
from tests.api.personas import check_personas, error
from tests.api.tenant_state import tenant_state
from tests.api.test_roles import _targets
from tests.context_files.support import give_user, make_agent, read, text_of

pytestmark = pytest.mark.django_db

FILES = "/api/v1/agents/{}/context-files/"


@pytest.fixture
def published(tenant_a: Tenant):  # type: ignore[no-untyped-def]
    """What was delivered on tenant A's ``context_files`` topic, in order."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "context_files"), channel)

    def read_events() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [events.public(layer.deserialize(bytes(row))["event"]) for row in rows]

    return read_events


def audit(tenant: Tenant) -> list[AuditEvent]:
    rows = AuditEvent.objects.for_tenant(tenant).filter(verb__startswith="context_file.")
    return list(rows.order_by("created_at"))


@pytest.mark.parametrize(
    ("method", "template", "body", "least", "success"),
    roles_context_files.ACTIONS,
    ids=[f"{a[0]} {a[1]}" for a in roles_context_files.ACTIONS],
)
def test_personas_on_every_route(method, template, body, least, success, request, tenant_a):
    ids = _targets(tenant_a)
    check_personas(
        request,
        tenant_a,
        method=method,
        url=template.format(**ids),
        body=body,
        least=least,
        success=success,
        outsider_status=404,
        never_shown_to_outsider=("roles soul text", "roles user", ids["ctx_user"]),
    )


def test_the_list_has_the_seven_in_order_with_text_sizes_and_routing(
    viewer_a, tenant_a, django_assert_max_num_queries
):
    agent = make_agent(tenant_a, "fixed", Agent.Type.PREDEFINED, templates=False)
    services.agent_file_save(actor=Actor.system(tenant_a), agent=agent, name="SOUL.md", content="Calm. ✓\n")
    with django_assert_max_num_queries(8):
        response = viewer_a.get(FILES.format("fixed"))
    assert response.status_code == 200
    body = response.json()
    assert body["agent"] == "fixed"
    assert body["type"] == "predefined"
    assert [entry["name"] for entry in body["files"]] == list(NAMES)
    soul, user = body["files"][0], body["files"][5]
    assert soul["content"] == "Calm. ✓\n"
    assert soul["size"] == 10
    assert soul["per_user"] is False
    assert "neither read nor change" in soul["routing"]
    assert soul["updated_by"] == "system"
    assert user["content"] is None
    assert user["size"] is None
    assert user["per_user"] is True
    heartbeat = body["files"][4]
    assert heartbeat["routing"].startswith("Shared by every user")


def test_setting_the_agents_text_is_audited_published_and_read_by_the_tools(
    admin_a, member_a, tenant_a, published
):
    make_agent(tenant_a, "opener", Agent.Type.OPEN, templates=False)
    response = admin_a.put(FILES.format("opener") + "SOUL.md", {"content": "Be kind.\n"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["content"] == "Be kind.\n"
    assert response.json()["size"] == 9
    assert text_of(read(member_a, "opener", "SOUL.md", "anyone")) == "Be kind.\n"
    [event] = audit(tenant_a)
    assert event.verb == "context_file.saved"
    assert event.actor_kind == "api_key"
    assert event.data["via"] == "api"
    assert event.data["scope"] == "agent"
    assert event.data["bytes"] == 9
    assert "Be kind" not in str(event.data)
    [live] = published()
    assert live["type"] == "context_file.saved"
    assert live["topic"] == "context_files"
    assert live["data"]["name"] == "SOUL.md"

    admin_a.put(FILES.format("opener") + "SOUL.md", {"content": "Be brief.\n"}, format="json")
    assert AgentContextFile.objects.for_tenant(tenant_a).get(name="SOUL.md").content == "Be brief.\n"
    assert admin_a.delete(FILES.format("opener") + "SOUL.md").status_code == 204
    missing = read(member_a, "opener", "SOUL.md", "anyone")
    assert missing["for_llm"].startswith("context file not found: SOUL.md")
    assert [e.verb for e in audit(tenant_a)] == ["context_file.saved"] * 2 + ["context_file.deleted"]
    assert [e["type"] for e in published()][-1] == "context_file.deleted"
    error(admin_a.delete(FILES.format("opener") + "SOUL.md"), 404, "not_found")


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_unknown_names_are_404_with_the_valid_names(admin_a, tenant_a, method):
    make_agent(tenant_a, "opener", Agent.Type.OPEN)
    before = tenant_state(tenant_a)
    for name in ("MEMORY.md", "soul.md", "SOUL.md.bak"):
        refused = error(
            getattr(admin_a, method)(FILES.format("opener") + name, {"content": "x"}, format="json"),
            404,
            "not_found",
        )
        assert refused["message"] == (
            f"{name!r} is not a context file; the context files are SOUL.md, IDENTITY.md, AGENTS.md, "
            "TOOLS.md, HEARTBEAT.md, USER.md, BOOTSTRAP.md."
        )
    error(
        getattr(admin_a, method)(FILES.format("opener") + "users/u1/MEMORY.md"),
        404 if method != "put" else 405,
        "not_found" if method != "put" else "method_not_allowed",
    )
    assert tenant_state(tenant_a) == before


def test_an_unknown_agent_is_404(admin_a, tenant_a):
    error(admin_a.get(FILES.format("nobody")), 404, "not_found")
    error(admin_a.put(FILES.format("nobody") + "SOUL.md", {"content": "x"}, format="json"), 404, "not_found")


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({}, "content", "This field is required."),
        ({"content": 7}, "content", "Must be a string, got number."),
        ({"content": None}, "content", "Must be a string, got null."),
        ({"content": "x", "user_id": "u"}, "user_id", "Unknown field."),
        ({"content": "nul\x00"}, "content", "Null characters are not allowed."),
        (
            {"content": "é" * (128 * 1024 + 1)},
            "content",
            "content is 262146 bytes; a context file holds at most 262144 bytes (256 KiB). Shorten it.",
        ),
    ],
)
def test_bad_bodies_are_400_with_nothing_changed(admin_a, tenant_a, body, field, message):
    make_agent(tenant_a, "opener", Agent.Type.OPEN)
    before = tenant_state(tenant_a)
    refused = error(admin_a.put(FILES.format("opener") + "SOUL.md", body, format="json"), 400, "invalid")
    assert refused["details"][field] == [message], refused
    assert tenant_state(tenant_a) == before


def test_a_users_copies_are_listed_read_and_deleted(admin_a, viewer_a, member_a, tenant_a, published):
    agent = make_agent(tenant_a, "opener", Agent.Type.OPEN)
    give_user(tenant_a, agent, "alice", ("USER.md", "SOUL.md"))
    give_user(tenant_a, agent, "bob", ("USER.md",))
    setup_events = len(published())
    listed = viewer_a.get(FILES.format("opener") + "users/alice/").json()
    assert listed["user_id"] == "alice"
    assert [(f["name"], f["content"], f["size"]) for f in listed["files"]] == [
        ("SOUL.md", "alice SOUL.md\n", 14),
        ("USER.md", "alice USER.md\n", 14),
    ]
    assert viewer_a.get(FILES.format("opener") + "users/carol/").json()["files"] == []
    one = viewer_a.get(FILES.format("opener") + "users/bob/USER.md")
    assert one.json()["content"] == "bob USER.md\n"
    error(viewer_a.get(FILES.format("opener") + "users/bob/SOUL.md"), 404, "not_found")

    assert admin_a.delete(FILES.format("opener") + "users/alice/SOUL.md").status_code == 204
    assert text_of(read(member_a, "opener", "SOUL.md", "alice")) == "opener SOUL.md\n"
    assert text_of(read(member_a, "opener", "USER.md", "alice")) == "alice USER.md\n"
    assert text_of(read(member_a, "opener", "USER.md", "bob")) == "bob USER.md\n"
    gone = error(admin_a.delete(FILES.format("opener") + "users/alice/SOUL.md"), 404, "not_found")
    assert gone["message"] == "the user 'alice' has no copy of SOUL.md."
    event = audit(tenant_a)[-1]
    assert event.verb == "context_file.deleted"
    assert event.data == {
        "agent": "opener",
        "name": "SOUL.md",
        "scope": "user",
        "user_id": "alice",
        "via": "api",
    }
    assert [e["type"] for e in published()[setup_events:]] == ["context_file.deleted"]


def test_a_long_user_id_is_404(viewer_a, tenant_a):
    make_agent(tenant_a, "opener", Agent.Type.OPEN)
    error(viewer_a.get(FILES.format("opener") + "users/" + "u" * 256 + "/"), 404, "not_found")


def test_another_tenants_agent_of_the_same_key_keeps_its_own_files(admin_a, outsider, tenant_a, tenant_b):
    make_agent(tenant_a, "same", Agent.Type.OPEN)
    make_agent(tenant_b, "same", Agent.Type.OPEN, templates=False)
    before = tenant_state(tenant_a)
    body = outsider.get(FILES.format("same")).json()
    assert all(entry["content"] is None for entry in body["files"])
    assert outsider.put(FILES.format("same") + "SOUL.md", {"content": "B"}, format="json").status_code == 200
    assert tenant_state(tenant_a) == before
    assert admin_a.get(FILES.format("same") + "SOUL.md").json()["content"] == "same SOUL.md\n"
