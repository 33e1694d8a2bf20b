"""Memory files through the fs tools and memory_get, called the way agent loops call them:
POST /api/v1/runtime/execute. MEMORY.md, memory.md and memory/… live in the database, per user with the
agent's global memory behind, and a team member reads (never writes) its lead's."""

from __future__ import annotations

import pytest

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.memory.models import MemoryDocument
from apps.memory.services import APPEND_SEPARATOR
from apps.teams import services as team_services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories

pytestmark = pytest.mark.django_db

SOURCE = "[Source: database, not filesystem]"


@pytest.fixture
def agent(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def call(client, tool, args, agent="bot", user_id=""):
    body = {"agent": agent, "tool": tool, "args": args, "context": {"user_id": user_id}}
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def documents(tenant, **filters):
    return MemoryDocument.objects.for_tenant(tenant).filter(**filters)


def test_a_write_is_stored_in_the_database_and_read_back_with_its_source(member_a, agent, tenant_a):
    written = call(member_a, "write_file", {"path": "MEMORY.md", "content": "# Facts\nThe sky is blue.\n"})
    assert written["is_error"] is False, written
    assert written["for_llm"].startswith("Saved memory file MEMORY.md in the agent's global memory")

    document = documents(tenant_a).get()
    assert (document.agent_id, document.user_id, document.path) == (agent.pk, "", "MEMORY.md")
    assert document.content == "# Facts\nThe sky is blue.\n"
    assert document.index_status == "pending"

    read = call(member_a, "read_file", {"path": "MEMORY.md"})
    assert read["for_llm"] == f"     1\t# Facts\n     2\tThe sky is blue.\n\n{SOURCE}"


def test_memory_paths_never_touch_the_disk(member_a, agent, tenant_a):
    from apps.toolkit.workspace import workspace_for

    call(member_a, "write_file", {"path": "memory/notes/day1.md", "content": "day one"})
    call(member_a, "write_file", {"path": "./memory.md", "content": "lower case"})
    workspace = workspace_for(tenant=tenant_a, agent=agent, user_id="")
    assert not (workspace / "memory").exists()
    assert not (workspace / "memory.md").exists()
    assert sorted(documents(tenant_a).values_list("path", flat=True)) == ["memory.md", "memory/notes/day1.md"]
    absolute = call(member_a, "read_file", {"path": str(workspace / "memory" / "notes" / "day1.md")})
    assert absolute["for_llm"].startswith("     1\tday one")


def test_a_missing_memory_file_is_a_quiet_answer_not_an_error(member_a, agent):
    read = call(member_a, "read_file", {"path": "memory/unknown.md"})
    assert read["is_error"] is False
    assert read["for_llm"].startswith("(memory file memory/unknown.md does not exist yet")


def test_a_users_memory_comes_first_then_the_global_one(member_a, agent, tenant_a):
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "global"})
    call(member_a, "write_file", {"path": "memory/prefs.md", "content": "global prefs"})
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "alice's"}, user_id="alice")

    assert "alice's" in call(member_a, "read_file", {"path": "MEMORY.md"}, user_id="alice")["for_llm"]
    assert "global" in call(member_a, "read_file", {"path": "MEMORY.md"}, user_id="bob")["for_llm"]
    assert "global" in call(member_a, "read_file", {"path": "MEMORY.md"})["for_llm"]
    fallback = call(member_a, "read_file", {"path": "memory/prefs.md"}, user_id="alice")
    assert "global prefs" in fallback["for_llm"]
    assert documents(tenant_a, user_id="alice").get().content == "alice's"
    assert documents(tenant_a, user_id="", path="MEMORY.md").get().content == "global"


def test_append_joins_with_a_separator_in_the_users_own_document(member_a, agent, tenant_a):
    call(member_a, "write_file", {"path": "memory/log.md", "content": "first"}, user_id="alice")
    appended = call(
        member_a,
        "write_file",
        {"path": "memory/log.md", "content": "second", "append": True},
        user_id="alice",
    )
    assert appended["for_llm"].startswith("Appended to memory file memory/log.md in user alice's memory")
    assert documents(tenant_a).get().content == f"first{APPEND_SEPARATOR}second"
    fresh = call(member_a, "write_file", {"path": "memory/new.md", "content": "only", "append": True})
    assert fresh["is_error"] is False
    assert documents(tenant_a, path="memory/new.md").get().content == "only"


def test_edit_replaces_text_in_a_memory_file(member_a, agent, tenant_a):
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "colour: red\nsize: 3\n"})
    edited = call(member_a, "edit", {"path": "MEMORY.md", "old_string": "red", "new_string": "green"})
    assert edited["is_error"] is False, edited
    assert documents(tenant_a).get().content == "colour: green\nsize: 3\n"


def test_editing_a_memory_file_that_does_not_exist_is_an_error_and_creates_nothing(member_a, agent, tenant_a):
    edited = call(member_a, "edit", {"path": "memory/plan.md", "old_string": "a", "new_string": "b"})
    assert edited["is_error"] is True
    assert edited["for_llm"] == (
        "memory/plan.md does not exist yet, so there is nothing to edit; create it with write_file."
    )
    assert not documents(tenant_a).exists()


def test_a_memory_file_is_bounded_with_a_clear_message(member_a, agent, tenant_a, settings):
    from apps.memory import models

    big = "x" * (models.MAX_DOCUMENT_CHARS + 1)
    refused = call(member_a, "write_file", {"path": "MEMORY.md", "content": big})
    assert refused["is_error"] is True
    assert "a memory file holds at most 1000000 characters" in refused["for_llm"]
    half = "y" * (models.MAX_DOCUMENT_CHARS // 2 + 1)
    call(member_a, "write_file", {"path": "MEMORY.md", "content": half})
    again = call(member_a, "write_file", {"path": "MEMORY.md", "content": half, "append": True})
    assert again["is_error"] is True
    assert "a memory file holds at most" in again["for_llm"]
    assert documents(tenant_a).get().content == half


def test_every_write_is_audited_without_the_content(member_a, agent, tenant_a):
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "secret plan"}, user_id="alice")
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "more", "append": True}, user_id="alice")
    events = (
        AuditEvent.objects.for_tenant(tenant_a).filter(target_type="memory_document").order_by("created_at")
    )
    assert [e.verb for e in events] == ["memory.document_created", "memory.document_updated"]
    assert events[0].data["path"] == "MEMORY.md"
    assert events[0].data["user_id"] == "alice"
    assert events[0].data["agent"] == "bot"
    assert "secret plan" not in str(events[0].data)


def test_list_files_shows_the_memory_files_the_call_can_read(member_a, agent, tenant_a):
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "global"})
    call(member_a, "write_file", {"path": "memory/alice.md", "content": "héllo"}, user_id="alice")
    call(member_a, "write_file", {"path": "memory/bob.md", "content": "bob"}, user_id="bob")

    alice = call(member_a, "list_files", {"path": "."}, user_id="alice")["for_llm"]
    assert "MEMORY.md  (6 bytes; memory" in alice
    assert "memory/alice.md" not in alice  # only the root's own entries without recursive
    deep = call(member_a, "list_files", {"path": ".", "recursive": True}, user_id="alice")["for_llm"]
    assert "memory/alice.md  (6 bytes; memory" in deep
    assert "memory/bob.md" not in deep


def test_memory_get_returns_the_document_with_its_index_status(member_a, agent, tenant_a):
    call(member_a, "write_file", {"path": "memory/notes.md", "content": "remember this"}, user_id="alice")
    got = call(member_a, "memory_get", {"path": "memory/notes.md"}, user_id="alice")
    assert got["is_error"] is False
    assert got["for_llm"] == f"remember this\n\n{SOURCE}\n[Index status: pending]"

    missing = call(member_a, "memory_get", {"path": "memory/notes.md"}, user_id="bob")
    assert missing["is_error"] is False
    assert missing["for_llm"].startswith("(memory file memory/notes.md does not exist yet")

    other = call(member_a, "memory_get", {"path": "notes.md"})
    assert other["is_error"] is True
    assert "is not a memory file" in other["for_llm"]


def test_memory_get_says_when_a_file_is_not_indexed(member_a, agent):
    call(member_a, "write_file", {"path": "memory/data.json", "content": "{}"})
    got = call(member_a, "memory_get", {"path": "memory/data.json"})
    assert got["for_llm"].endswith("[Index status: not indexed (only Markdown files are indexed)]")


def test_each_tenant_and_each_agent_has_its_own_memory(member_a, outsider, agent, tenant_a, tenant_b):
    services.agent_create(actor=Actor.system(tenant_b), key="bot", name="B's bot")
    services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "tenant A's bot only"})

    for client, key in ((outsider, "bot"), (member_a, "other")):
        read = call(client, "read_file", {"path": "MEMORY.md"}, agent=key)
        assert "tenant A's bot only" not in read["for_llm"]
        assert "does not exist yet" in read["for_llm"]
        assert "MEMORY.md" not in call(client, "list_files", {"path": "."}, agent=key)["for_llm"]
    assert not MemoryDocument.objects.for_tenant(tenant_b).exists()


# --- teams --------------------------------------------------------------------------------------------


@pytest.fixture
def team(tenant_a, agent):
    system = Actor.system(tenant_a)
    lead = services.agent_create(actor=system, key="lead", name="Lead")
    member = services.agent_create(actor=system, key="worker", name="Worker")
    return team_services.team_create(actor=system, name="Crew", lead=lead, members=[member])


def test_a_team_member_reads_its_leads_memory_user_then_global(member_a, team, tenant_a):
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "lead global"}, agent="lead")
    call(
        member_a,
        "write_file",
        {"path": "MEMORY.md", "content": "lead for alice"},
        agent="lead",
        user_id="alice",
    )
    call(member_a, "write_file", {"path": "memory/plan.md", "content": "the plan"}, agent="lead")

    alice = call(member_a, "read_file", {"path": "MEMORY.md"}, agent="worker", user_id="alice")
    assert "lead for alice" in alice["for_llm"]
    assert alice["for_llm"].endswith(
        "[Source: database, not filesystem; the team lead's memory, read-only for you]"
    )
    assert (
        "lead global"
        in call(member_a, "read_file", {"path": "MEMORY.md"}, agent="worker", user_id="bob")["for_llm"]
    )
    got = call(member_a, "memory_get", {"path": "memory/plan.md"}, agent="worker")
    assert got["for_llm"].startswith("the plan\n\n[Source: database, not filesystem; the team lead's memory")
    listed = call(member_a, "list_files", {"path": ".", "recursive": True}, agent="worker")["for_llm"]
    assert "memory/plan.md  (8 bytes; team lead's memory" in listed


def test_a_members_own_memory_comes_before_its_leads(member_a, team, tenant_a):
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "lead's"}, agent="lead")
    from apps.memory import services as memory_services
    from apps.tenants.models import Agent

    memory_services.document_write(
        actor=Actor.system(tenant_a),
        agent=Agent.objects.for_tenant(tenant_a).get(key="worker"),
        user_id="",
        path="MEMORY.md",
        content="worker's own",
    )
    assert "worker's own" in call(member_a, "read_file", {"path": "MEMORY.md"}, agent="worker")["for_llm"]


def test_a_team_member_may_not_write_memory_and_nothing_is_stored(member_a, team, tenant_a):
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "lead's"}, agent="lead")
    before = list(documents(tenant_a).values("path", "user_id", "content"))
    for tool, args in (
        ("write_file", {"path": "MEMORY.md", "content": "overwritten"}),
        ("write_file", {"path": "memory/new.md", "content": "new", "append": True}),
        ("edit", {"path": "MEMORY.md", "old_string": "lead's", "new_string": "mine"}),
    ):
        refused = call(member_a, tool, args, agent="worker", user_id="alice")
        assert refused["is_error"] is True, tool
        assert refused["for_llm"] == (
            "memory is read-only for team members — only the team leader can save memory files"
        )
    assert list(documents(tenant_a).values("path", "user_id", "content")) == before


def test_the_lead_writes_and_an_archived_team_no_longer_binds(member_a, team, tenant_a):
    assert (
        call(member_a, "write_file", {"path": "MEMORY.md", "content": "lead"}, agent="lead")["is_error"]
        is False
    )
    team_services.team_archive(actor=Actor.system(tenant_a), team=team)
    own = call(member_a, "write_file", {"path": "MEMORY.md", "content": "free again"}, agent="worker")
    assert own["is_error"] is False
    assert "free again" in call(member_a, "read_file", {"path": "MEMORY.md"}, agent="worker")["for_llm"]


def test_the_oldest_team_decides_whose_memory_a_member_falls_back_to(member_a, team, tenant_a):
    system = Actor.system(tenant_a)
    from apps.tenants.models import Agent

    worker = Agent.objects.for_tenant(tenant_a).get(key="worker")
    second_lead = services.agent_create(actor=system, key="lead2", name="Lead 2")
    team_services.team_create(actor=system, name="Second", lead=second_lead, members=[worker])
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "first lead"}, agent="lead")
    call(member_a, "write_file", {"path": "MEMORY.md", "content": "second lead"}, agent="lead2")
    assert "first lead" in call(member_a, "read_file", {"path": "MEMORY.md"}, agent="worker")["for_llm"]


def test_a_viewer_key_cannot_execute_memory_writes(tenant_a, agent):
    viewer = factories.key_client(factories.make_api_key(tenant_a, Role.VIEWER))
    response = viewer.post(
        "/api/v1/runtime/execute",
        {"agent": "bot", "tool": "write_file", "args": {"path": "MEMORY.md", "content": "x"}},
        format="json",
    )
    assert response.status_code == 403
    assert not documents(tenant_a).exists()


def test_list_files_of_the_memory_folder_shows_its_documents(member_a, agent, tenant_a):
    refused = call(member_a, "list_files", {"path": "memory"})
    assert refused["is_error"] is True  # nothing saved yet: the disk's memory/ stays off limits
    call(member_a, "write_file", {"path": "memory/a.md", "content": "aa"})
    call(member_a, "write_file", {"path": "memory/deep/b.md", "content": "bbb"}, user_id="alice")
    call(member_a, "write_file", {"path": "memory/c.md", "content": "other user"}, user_id="bob")

    flat = call(member_a, "list_files", {"path": "memory/"}, user_id="alice")
    assert flat["is_error"] is False
    assert flat["for_llm"] == ("memory/ (2 entries):\na.md  (2 bytes; memory, stored by Toolgate)\ndeep/")
    deep = call(member_a, "list_files", {"path": "./memory", "recursive": True}, user_id="alice")["for_llm"]
    assert "deep/b.md  (3 bytes; memory, stored by Toolgate)" in deep
    assert "c.md" not in deep
    assert call(member_a, "list_files", {"path": "memory/deep"}, user_id="alice")["for_llm"] == (
        "memory/deep/ (1 entries):\nb.md  (3 bytes; memory, stored by Toolgate)"
    )
