"""The context files pages through the Django test client: the list of an agent's seven files (and a
user's copies), one file's page, saving, deleting after confirmation, deleting a user's copy.

Personas: a viewer and a member of tenant A read, an admin and an owner change, and tenant B's owner,
the outsider, gets 404 for every page of A's agents with nothing changed."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.context_files.models import AgentContextFile, UserContextFile
from apps.tenants.models import Agent
from tests.api.tenant_state import tenant_state
from tests.context_files.support import give_user, make_agent
from tests.dashboard import conftest as personas

pytestmark = pytest.mark.django_db

# The dashboard personas of tests/dashboard/conftest.py.
admin, member, outsider, owner, viewer = (
    personas.admin,
    personas.member,
    personas.outsider,
    personas.owner,
    personas.viewer,
)


def body(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


@pytest.fixture
def opener(tenant_a):
    agent = make_agent(tenant_a, "opener", Agent.Type.OPEN)
    give_user(tenant_a, agent, "alice", ("USER.md",))
    return agent


def url(name: str, *args: str) -> str:
    return reverse(f"dashboard:{name}", args=args)


def test_the_agents_list_links_every_agent_to_its_context_files(viewer, opener):
    assert url("context_files", "opener") in body(viewer.get(url("agents")))


def test_the_list_shows_the_seven_with_sizes_and_routing(admin, opener, tenant_a):
    AgentContextFile.objects.for_tenant(tenant_a).filter(name="TOOLS.md").delete()
    page = body(admin.get(url("context_files", "opener")))
    for name in (
        "SOUL.md",
        "IDENTITY.md",
        "AGENTS.md",
        "TOOLS.md",
        "HEARTBEAT.md",
        "USER.md",
        "BOOTSTRAP.md",
    ):
        assert f'data-name="{name}"' in page
        assert url("context_file", "opener", name) in page
    assert "15 bytes" in page  # "opener SOUL.md\n"
    assert "not set" in page
    assert url("context_file_delete", "opener", "SOUL.md") in page
    assert url("context_file_delete", "opener", "TOOLS.md") not in page
    assert "Per user: each user&#x27;s own copy" in page


def test_a_predefined_agent_says_which_files_are_its_configuration(viewer, tenant_a):
    make_agent(tenant_a, "fixed", Agent.Type.PREDEFINED)
    page = body(viewer.get(url("context_files", "fixed")))
    assert "Predefined configuration: in the agent&#x27;s context" in page
    assert "Shared by every user" in page


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_below_admin_the_pages_are_read_only(request, opener, persona):
    client = request.getfixturevalue(persona)
    listing = body(client.get(url("context_files", "opener")))
    assert url("context_file_delete", "opener", "SOUL.md") not in listing
    detail = body(client.get(url("context_file", "opener", "SOUL.md")))
    assert "opener SOUL.md" in detail
    assert "<textarea" not in detail
    assert url("context_file_save", "opener", "SOUL.md") not in detail
    copies = body(client.get(url("context_files", "opener") + "?user=alice"))
    assert "alice USER.md" in copies
    assert url("context_file_user_delete", "opener", "alice", "USER.md") not in copies


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_below_admin_writes_are_refused_with_nothing_changed(request, opener, tenant_a, persona):
    client = request.getfixturevalue(persona)
    before = tenant_state(tenant_a)
    for target in (
        url("context_file_save", "opener", "SOUL.md"),
        url("context_file_delete", "opener", "SOUL.md"),
        url("context_file_user_delete", "opener", "alice", "USER.md"),
        url("context_file_bootstrap_reset", "opener", "alice"),
    ):
        assert client.post(target, {"content": "hijacked"}).status_code == 403
    assert client.get(url("context_file_delete", "opener", "SOUL.md")).status_code == 403
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize("persona", ["admin", "owner"])
def test_admins_edit_and_save_a_file(request, opener, tenant_a, persona):
    client = request.getfixturevalue(persona)
    page = body(client.get(url("context_file", "opener", "SOUL.md")))
    assert "<textarea" in page
    assert "opener SOUL.md" in page
    response = client.post(
        url("context_file_save", "opener", "SOUL.md"), {"content": "Be calm.\r\nBe brief.\r\n"}
    )
    assert response.status_code == 302
    assert response["Location"] == url("context_file", "opener", "SOUL.md")
    row = AgentContextFile.objects.for_tenant(tenant_a).get(name="SOUL.md")
    assert row.content == "Be calm.\nBe brief.\n"
    event = AuditEvent.objects.for_tenant(tenant_a).filter(verb="context_file.saved").latest("created_at")
    assert event.actor_kind == "user"
    assert event.data["via"] == "dashboard"
    assert "19 bytes" in body(client.get(url("context_file", "opener", "SOUL.md")))


def test_a_file_without_text_can_be_created(admin, tenant_a):
    make_agent(tenant_a, "blank", Agent.Type.OPEN, templates=False)
    page = body(admin.get(url("context_file", "blank", "HEARTBEAT.md")))
    assert "has no text for HEARTBEAT.md yet" in page
    assert (
        admin.post(url("context_file_save", "blank", "HEARTBEAT.md"), {"content": "- ping\n"}).status_code
        == 302
    )
    assert AgentContextFile.objects.for_tenant(tenant_a).get(name="HEARTBEAT.md").content == "- ping\n"


def test_too_large_content_is_shown_on_the_form_with_nothing_saved(admin, opener, tenant_a):
    before = tenant_state(tenant_a)
    response = admin.post(url("context_file_save", "opener", "SOUL.md"), {"content": "é" * (128 * 1024 + 1)})
    assert response.status_code == 400
    assert "262146 bytes; a context file holds at most 262144 bytes" in response.content.decode()
    assert tenant_state(tenant_a) == before


def test_deleting_a_file_asks_first(admin, opener, tenant_a):
    confirm = body(admin.get(url("context_file_delete", "opener", "SOUL.md")))
    assert "Delete SOUL.md of the agent opener?" in confirm
    assert AgentContextFile.objects.for_tenant(tenant_a).filter(name="SOUL.md").exists()
    response = admin.post(url("context_file_delete", "opener", "SOUL.md"))
    assert response.status_code == 302
    assert response["Location"] == url("context_files", "opener")
    assert not AgentContextFile.objects.for_tenant(tenant_a).filter(name="SOUL.md").exists()
    again = admin.post(url("context_file_delete", "opener", "SOUL.md"), follow=True)
    assert "has no text of its own for SOUL.md" in again.content.decode()


def test_deleting_a_users_copy_asks_first(admin, opener, tenant_a):
    page = body(admin.get(url("context_files", "opener") + "?user=alice"))
    delete = url("context_file_user_delete", "opener", "alice", "USER.md")
    assert delete in page
    assert "Delete the copy of USER.md that the user alice has?" in body(admin.get(delete))
    response = admin.post(delete)
    assert response.status_code == 302
    assert response["Location"] == url("context_files", "opener") + "?user=alice"
    assert not UserContextFile.objects.for_tenant(tenant_a).exists()
    assert "has no copy of their own" in body(admin.get(url("context_files", "opener") + "?user=alice"))


def test_a_users_first_run_shows_and_resetting_it_asks_first(admin, opener, tenant_a):
    from apps.context_files import services
    from apps.tenants.actors import Actor

    services.agent_file_save(actor=Actor.system(tenant_a), agent=opener, name="BOOTSTRAP.md", content="hi")
    page = body(admin.get(url("context_files", "opener") + "?user=carol"))
    assert "First run pending" in page
    reset = url("context_file_bootstrap_reset", "opener", "carol")
    assert reset not in page
    services.bootstrap_complete(actor=Actor.system(tenant_a), agent=opener, user_id="carol")
    page = body(admin.get(url("context_files", "opener") + "?user=carol"))
    assert "First run complete" in page
    assert reset in page
    assert "Reset the first run of the user carol?" in body(admin.get(reset))
    response = admin.post(reset)
    assert response.status_code == 302
    assert response["Location"] == url("context_files", "opener") + "?user=carol"
    assert "First run pending" in body(admin.get(url("context_files", "opener") + "?user=carol"))
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="context_file.bootstrap_reset").count() == 1


def test_unknown_names_and_agents_are_404(admin, opener):
    assert admin.get(url("context_file", "opener", "MEMORY.md")).status_code == 404
    assert admin.post(url("context_file_save", "opener", "MEMORY.md"), {"content": "x"}).status_code == 404
    assert admin.get(url("context_files", "nobody")).status_code == 404
    assert "at most 255 characters" in body(admin.get(url("context_files", "opener") + "?user=" + "u" * 256))


def test_the_outsider_gets_404_everywhere_with_nothing_changed(outsider, opener, tenant_a):
    before = tenant_state(tenant_a)
    pages = [
        url("context_files", "opener"),
        url("context_file", "opener", "SOUL.md"),
        url("context_file_delete", "opener", "SOUL.md"),
        url("context_file_user_delete", "opener", "alice", "USER.md"),
        url("context_file_bootstrap_reset", "opener", "alice"),
    ]
    for page in pages:
        assert outsider.get(page).status_code == 404
        assert outsider.post(page, {"content": "hijacked"}).status_code in (404, 405)
    assert outsider.post(url("context_file_save", "opener", "SOUL.md"), {"content": "x"}).status_code == 404
    assert tenant_state(tenant_a) == before


def test_the_list_names_the_users_with_copies(viewer, opener, tenant_a):
    give_user(tenant_a, opener, "bob smith", ("SOUL.md", "USER.md"))
    page = body(viewer.get(url("context_files", "opener")))
    assert '<a href="?user=bob%20smith"><code>bob smith</code></a> (2)' in page
    assert '<a href="?user=alice"><code>alice</code></a> (1)' in page
    assert page.index("bob smith") < page.index("?user=alice")  # most recent first
    make_agent(tenant_a, "blank", Agent.Type.OPEN, templates=False)
    assert "No user has a copy of their own yet." in body(viewer.get(url("context_files", "blank")))
