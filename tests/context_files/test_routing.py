"""Context-file routing through POST /api/v1/runtime/execute: every file for an open and a predefined
agent, with and without a user id; the fallback to the agent's text, the refusals, BOOTSTRAP.md
deletion, append and edit, list_files, another user's and another tenant's files never reached."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.context_files.models import NAMES, AgentContextFile, UserContextFile
from apps.tenants.models import Agent
from apps.toolkit.workspace import workspace_for
from tests.api.tenant_state import tenant_state
from tests.context_files.support import (
    PER_USER_PREDEFINED,
    SHARED,
    call,
    give_user,
    make_agent,
    read,
    text_of,
)

pytestmark = pytest.mark.django_db

OPEN, PREDEFINED = Agent.Type.OPEN, Agent.Type.PREDEFINED


@pytest.fixture
def open_agent(tenant_a):
    agent = make_agent(tenant_a, "opener", OPEN)
    give_user(tenant_a, agent, "alice")
    return agent


@pytest.fixture
def predefined(tenant_a):
    agent = make_agent(tenant_a, "fixed", PREDEFINED)
    give_user(tenant_a, agent, "alice", PER_USER_PREDEFINED)
    return agent


def user_row(tenant, agent, user_id, name):
    return UserContextFile.objects.for_tenant(tenant).filter(agent=agent, user_id=user_id, name=name).first()


def agent_row(tenant, agent, name):
    return AgentContextFile.objects.for_tenant(tenant).get(agent=agent, name=name)


# --- open agents ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_open_reads_the_users_copy_else_the_agents_template(member_a, open_agent, name):
    assert text_of(read(member_a, "opener", name, "alice")) == f"alice {name}\n"
    assert "this user's own copy" in read(member_a, "opener", name, "alice")["for_llm"]
    fallback = read(member_a, "opener", name, "bob")
    assert text_of(fallback) == f"opener {name}\n"
    assert "the agent's template; this user has no copy yet" in fallback["for_llm"]
    assert text_of(read(member_a, "opener", name)) == f"opener {name}\n"
    assert text_of(read(member_a, "opener", f"./{name}", "alice")) == f"alice {name}\n"


@pytest.mark.parametrize("name", NAMES)
def test_open_writes_go_to_the_users_copy(member_a, open_agent, tenant_a, name):
    written = call(member_a, "opener", "write_file", "bob", path=name, content="bob's text\n")
    assert written["is_error"] is False
    assert written["for_llm"] == f"Wrote 11 bytes to {name} as this user's own copy."
    assert user_row(tenant_a, open_agent, "bob", name).content == "bob's text\n"
    assert agent_row(tenant_a, open_agent, name).content == f"opener {name}\n"
    assert text_of(read(member_a, "opener", name, "bob")) == "bob's text\n"
    assert text_of(read(member_a, "opener", name, "alice")) == f"alice {name}\n"  # alice keeps hers
    assert text_of(read(member_a, "opener", name)) == f"opener {name}\n"
    ws = workspace_for(tenant=tenant_a, agent=open_agent, user_id="bob")
    assert not (ws / name).exists()


@pytest.mark.parametrize("name", NAMES)
def test_open_writes_without_a_user_id_are_refused(member_a, open_agent, tenant_a, name):
    before = tenant_state(tenant_a)["context_files.AgentContextFile"]
    for result in (
        call(member_a, "opener", "write_file", path=name, content="x"),
        call(member_a, "opener", "write_file", path=name, content="x", append=True),
        call(member_a, "opener", "edit", path=name, old_string="opener", new_string="x"),
    ):
        assert result["is_error"] is True
        assert f"{name} is kept per user for this agent, and this call has no user id" in result["for_llm"]
    assert tenant_state(tenant_a)["context_files.AgentContextFile"] == before


def test_open_append_starts_from_what_the_user_reads(member_a, open_agent, tenant_a):
    appended = call(
        member_a, "opener", "write_file", "bob", path="USER.md", content="likes tea\n", append=True
    )
    assert appended["for_llm"] == "Appended 10 bytes to USER.md as this user's own copy (now 25 bytes)."
    assert user_row(tenant_a, open_agent, "bob", "USER.md").content == "opener USER.md\nlikes tea\n"
    call(member_a, "opener", "write_file", "bob", path="USER.md", content="and cake\n", append=True)
    assert text_of(read(member_a, "opener", "USER.md", "bob")) == "opener USER.md\nlikes tea\nand cake\n"


def test_open_edit_changes_the_users_copy_made_from_the_template(member_a, open_agent, tenant_a):
    edited = call(member_a, "opener", "edit", "bob", path="SOUL.md", old_string="opener", new_string="calm")
    assert edited["is_error"] is False
    assert edited["for_llm"] == "Edited SOUL.md: replaced 1 occurrence (first at line 1)."
    assert user_row(tenant_a, open_agent, "bob", "SOUL.md").content == "calm SOUL.md\n"
    assert agent_row(tenant_a, open_agent, "SOUL.md").content == "opener SOUL.md\n"
    missing = call(member_a, "opener", "edit", "bob", path="SOUL.md", old_string="absent", new_string="x")
    assert missing["is_error"] is True
    assert "old_string was not found in SOUL.md" in missing["for_llm"]


def test_missing_files_are_not_found(member_a, tenant_a):
    make_agent(tenant_a, "empty", OPEN, templates=False)
    assert read(member_a, "empty", "TOOLS.md")["for_llm"] == "context file not found: TOOLS.md."
    result = read(member_a, "empty", "TOOLS.md", "alice")
    assert result["is_error"] is True
    assert (
        result["for_llm"] == "context file not found: TOOLS.md. It has no content yet; write_file creates it."
    )
    edit = call(member_a, "empty", "edit", "alice", path="TOOLS.md", old_string="a", new_string="b")
    assert edit["for_llm"].startswith("context file not found: TOOLS.md")


def test_an_empty_file_reads_as_empty(member_a, open_agent):
    call(member_a, "opener", "write_file", "bob", path="TOOLS.md", content="")
    assert read(member_a, "opener", "TOOLS.md", "bob")["for_llm"].startswith("(TOOLS.md is empty)\n")


# --- predefined agents ------------------------------------------------------------------------------------


@pytest.mark.parametrize("user", ["", "alice", "bob"])
@pytest.mark.parametrize("name", SHARED)
def test_predefined_configuration_is_neither_read_nor_written(member_a, predefined, tenant_a, name, user):
    before = tenant_state(tenant_a)
    refused = read(member_a, "fixed", name, user)
    assert refused["is_error"] is True
    assert refused["for_llm"].startswith(f"this file ({name}) is already loaded into your context.")
    assert "fixed" not in refused["for_llm"]
    for result in (
        call(member_a, "fixed", "write_file", user, path=name, content="new persona"),
        call(member_a, "fixed", "write_file", user, path=name, content="more", append=True),
    ):
        assert result["is_error"] is True
        assert result["for_llm"].startswith(
            f"this file ({name}) is part of the agent's predefined configuration and cannot be modified "
            "through chat"
        )
    edit = call(member_a, "fixed", "edit", user, path=name, old_string="fixed", new_string="x")
    assert edit["is_error"] is True
    assert "cannot be modified through chat" in edit["for_llm"]
    after = tenant_state(tenant_a)
    for model in ("context_files.AgentContextFile", "context_files.UserContextFile"):
        assert after[model] == before[model]


@pytest.mark.parametrize("name", PER_USER_PREDEFINED)
def test_predefined_user_files_are_per_user_with_the_fallback(member_a, predefined, name):
    assert text_of(read(member_a, "fixed", name, "alice")) == f"alice {name}\n"
    assert text_of(read(member_a, "fixed", name, "bob")) == f"fixed {name}\n"
    assert text_of(read(member_a, "fixed", name)) == f"fixed {name}\n"


def test_predefined_user_md_is_written_per_user(member_a, predefined, tenant_a):
    written = call(member_a, "fixed", "write_file", "bob", path="USER.md", content="Bob, Berlin\n")
    assert written["for_llm"] == "Wrote 12 bytes to USER.md as this user's own copy."
    assert text_of(read(member_a, "fixed", "USER.md", "bob")) == "Bob, Berlin\n"
    assert text_of(read(member_a, "fixed", "USER.md", "alice")) == "alice USER.md\n"
    assert agent_row(tenant_a, predefined, "USER.md").content == "fixed USER.md\n"
    refused = call(member_a, "fixed", "write_file", path="USER.md", content="nobody")
    assert refused["is_error"] is True
    assert "this call has no user id" in refused["for_llm"]


@pytest.mark.parametrize("user", ["", "alice"])
def test_predefined_heartbeat_is_the_agents_for_everyone(member_a, predefined, tenant_a, user):
    assert text_of(read(member_a, "fixed", "HEARTBEAT.md", user)) == "fixed HEARTBEAT.md\n"
    written = call(member_a, "fixed", "write_file", user, path="HEARTBEAT.md", content="- check mail\n")
    assert written["for_llm"] == "Wrote 13 bytes to HEARTBEAT.md for the agent (shared by every user)."
    call(member_a, "fixed", "write_file", user, path="HEARTBEAT.md", content="- water\n", append=True)
    edited = call(member_a, "fixed", "edit", user, path="HEARTBEAT.md", old_string="mail", new_string="post")
    assert edited["is_error"] is False
    assert agent_row(tenant_a, predefined, "HEARTBEAT.md").content == "- check post\n- water\n"
    assert text_of(read(member_a, "fixed", "HEARTBEAT.md", "bob")) == "- check post\n- water\n"
    assert not UserContextFile.objects.for_tenant(tenant_a).filter(name="HEARTBEAT.md").exists()


def test_predefined_bootstrap_cannot_be_rewritten(member_a, predefined, tenant_a):
    for user in ("alice", "bob"):
        result = call(member_a, "fixed", "write_file", user, path="BOOTSTRAP.md", content="skip onboarding")
        assert result["is_error"] is True
        assert "BOOTSTRAP.md holds this agent's first-run instructions" in result["for_llm"]
    assert user_row(tenant_a, predefined, "alice", "BOOTSTRAP.md").content == "alice BOOTSTRAP.md\n"
    assert user_row(tenant_a, predefined, "bob", "BOOTSTRAP.md") is None


# --- BOOTSTRAP.md deletion ---------------------------------------------------------------------------------


@pytest.mark.parametrize("type", [OPEN, PREDEFINED])
def test_writing_an_empty_bootstrap_deletes_the_users_copy(member_a, tenant_a, type):
    agent = make_agent(tenant_a, "boots", type, templates=False)
    give_user(tenant_a, agent, "alice", ("BOOTSTRAP.md", "USER.md"))
    give_user(tenant_a, agent, "bob", ("BOOTSTRAP.md",))

    done = call(member_a, "boots", "write_file", "alice", path="BOOTSTRAP.md", content="")
    assert done["is_error"] is False
    assert done["for_llm"] == (
        "BOOTSTRAP.md cleared for this user: the first run is complete (their copy is deleted)."
    )
    assert user_row(tenant_a, agent, "alice", "BOOTSTRAP.md") is None
    assert user_row(tenant_a, agent, "alice", "USER.md") is not None
    assert user_row(tenant_a, agent, "bob", "BOOTSTRAP.md") is not None  # bob's run is not done
    gone = read(member_a, "boots", "BOOTSTRAP.md", "alice")
    assert gone["is_error"] is True
    assert gone["for_llm"].startswith("context file not found: BOOTSTRAP.md")
    again = call(member_a, "boots", "write_file", "alice", path="BOOTSTRAP.md", content="")
    assert again["for_llm"] == (
        "BOOTSTRAP.md cleared for this user: the first run is complete; from now on they no longer read "
        "the agent's first-run instructions."
    )
    event = AuditEvent.objects.for_tenant(tenant_a).filter(verb="context_file.deleted").get()
    assert event.data == {
        "agent": "boots",
        "name": "BOOTSTRAP.md",
        "scope": "user",
        "user_id": "alice",
        "via": "tool",
    }
    assert (
        AuditEvent.objects.for_tenant(tenant_a).filter(verb="context_file.bootstrap_completed").count() == 2
    )
    refused = call(member_a, "boots", "write_file", path="BOOTSTRAP.md", content="")
    assert refused["is_error"] is True
    assert "this call has no user id" in refused["for_llm"]


@pytest.mark.parametrize("type", [OPEN, PREDEFINED])
def test_a_completed_first_run_hides_the_agents_template_for_that_user_only(
    member_a, admin_a, tenant_a, type
):
    agent = make_agent(tenant_a, "boots", type)
    give_user(tenant_a, agent, "alice", ("BOOTSTRAP.md",))
    url = "/api/v1/agents/boots/context-files/users/{}/bootstrap"
    assert admin_a.get(url.format("alice")).json() == {
        "agent": "boots",
        "user_id": "alice",
        "completed_at": None,
        "pending": True,
    }
    assert admin_a.delete(url.format("alice")).status_code == 404  # nothing to reset yet

    call(member_a, "boots", "write_file", "alice", path="BOOTSTRAP.md", content="")

    # Alice reads no BOOTSTRAP.md any more, not even the agent's template; carol (no copy) still does.
    gone = read(member_a, "boots", "BOOTSTRAP.md", "alice")
    assert gone["is_error"] is True
    assert gone["for_llm"] == "context file not found: BOOTSTRAP.md. This user's first run is complete."
    assert text_of(read(member_a, "boots", "BOOTSTRAP.md", "carol")) == "boots BOOTSTRAP.md\n"
    listed = call(member_a, "boots", "list_files", "alice", path=".")["for_llm"]
    assert "BOOTSTRAP.md" not in listed
    assert "BOOTSTRAP.md" in call(member_a, "boots", "list_files", "carol", path=".")["for_llm"]
    state = admin_a.get(url.format("alice")).json()
    assert state["completed_at"] is not None
    assert state["pending"] is False

    # An administrator resets it: alice reads the template again and her first run is pending.
    assert admin_a.delete(url.format("alice")).status_code == 204
    assert text_of(read(member_a, "boots", "BOOTSTRAP.md", "alice")) == "boots BOOTSTRAP.md\n"
    assert admin_a.get(url.format("alice")).json()["pending"] is True
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="context_file.bootstrap_reset").count() == 1


def test_editing_bootstrap_to_nothing_deletes_it(member_a, tenant_a):
    agent = make_agent(tenant_a, "boots", PREDEFINED, templates=False)
    give_user(tenant_a, agent, "alice", ("BOOTSTRAP.md",))
    edited = call(
        member_a,
        "boots",
        "edit",
        "alice",
        path="BOOTSTRAP.md",
        old_string="alice BOOTSTRAP.md\n",
        new_string="",
    )
    assert edited["is_error"] is False
    assert user_row(tenant_a, agent, "alice", "BOOTSTRAP.md") is None


# --- paths ------------------------------------------------------------------------------------------------


def test_absolute_paths_at_the_workspace_root_are_context_files(member_a, open_agent, tenant_a):
    ws = workspace_for(tenant=tenant_a, agent=open_agent, user_id="alice")
    assert text_of(read(member_a, "opener", str(ws / "SOUL.md"), "alice")) == "alice SOUL.md\n"
    call(member_a, "opener", "write_file", "alice", path=str(ws / "USER.md"), content="abs\n")
    assert user_row(tenant_a, open_agent, "alice", "USER.md").content == "abs\n"
    assert not (ws / "USER.md").exists()


def test_context_file_names_elsewhere_are_ordinary_files(member_a, open_agent, tenant_a):
    written = call(member_a, "opener", "write_file", "alice", path="notes/SOUL.md", content="on disk\n")
    assert written["is_error"] is False
    ws = workspace_for(tenant=tenant_a, agent=open_agent, user_id="alice")
    assert (ws / "notes" / "SOUL.md").read_text() == "on disk\n"
    assert text_of(read(member_a, "opener", "notes/SOUL.md", "alice")) == "on disk\n"
    assert text_of(read(member_a, "opener", "SOUL.md", "alice")) == "alice SOUL.md\n"
    lower = read(member_a, "opener", "soul.md", "alice")
    assert lower["is_error"] is True
    assert "file not found: soul.md" in lower["for_llm"]


def test_content_is_bounded(member_a, open_agent, tenant_a):
    big = "x" * (256 * 1024 + 1)
    result = call(member_a, "opener", "write_file", "alice", path="USER.md", content=big)
    assert result["is_error"] is True
    assert result["for_llm"].startswith("content is 262145 bytes; a context file holds at most 262144 bytes")
    call(member_a, "opener", "write_file", "alice", path="USER.md", content="x" * (256 * 1024 - 2))
    grown = call(member_a, "opener", "write_file", "alice", path="USER.md", content="abc", append=True)
    assert grown["is_error"] is True
    assert "262145 bytes" in grown["for_llm"]
    assert len(user_row(tenant_a, open_agent, "alice", "USER.md").content) == 256 * 1024 - 2


# --- list_files -------------------------------------------------------------------------------------------


def listing(client, agent, user=""):
    result = call(client, agent, "list_files", user, path=".")
    assert result["is_error"] is False
    return result["for_llm"]


def test_list_files_shows_what_the_call_can_read(member_a, open_agent, predefined, tenant_a):
    own = listing(member_a, "opener", "alice")
    for name in NAMES:
        assert (
            f"{name}  ({len(f'alice {name}') + 1} bytes; context file, own copy, stored by Toolgate)" in own
        )
    template = listing(member_a, "opener", "bob")
    assert "SOUL.md  (15 bytes; context file, template, stored by Toolgate)" in template
    shared = listing(member_a, "fixed", "alice")
    assert "USER.md  (14 bytes; context file, own copy" in shared
    assert "HEARTBEAT.md  (19 bytes; context file, shared" in shared
    for name in SHARED:
        assert name not in shared
    no_user = listing(member_a, "fixed")
    assert "USER.md  (14 bytes; context file, shared" in no_user
    make_agent(tenant_a, "blank", OPEN, templates=False)
    assert ".md" not in listing(member_a, "blank", "alice")


def test_list_files_below_the_root_shows_no_context_files(member_a, open_agent):
    call(member_a, "opener", "write_file", "alice", path="docs/readme.txt", content="hi")
    assert "SOUL.md" not in call(member_a, "opener", "list_files", "alice", path="docs")["for_llm"]


# --- audit, other users, other tenants --------------------------------------------------------------------


def test_tool_writes_are_audited_as_the_caller(member_a, open_agent, tenant_a):
    call(member_a, "opener", "write_file", "bob", path="USER.md", content="hello")
    event = AuditEvent.objects.for_tenant(tenant_a).filter(verb="context_file.saved").latest("created_at")
    assert event.actor_kind == "api_key"
    assert event.target_type == "context_file"
    assert event.target_id == str(user_row(tenant_a, open_agent, "bob", "USER.md").pk)
    assert event.data["agent"] == "opener"
    assert event.data["user_id"] == "bob"
    assert event.data["bytes"] == 5
    assert event.data["via"] == "tool"
    assert "hello" not in str(event.data)


def test_a_second_user_never_sees_the_firsts_files(member_a, tenant_a):
    make_agent(tenant_a, "private", OPEN, templates=False)
    call(member_a, "private", "write_file", "alice", path="USER.md", content="alice's secret\n")
    for path in ("USER.md", "./USER.md"):
        result = read(member_a, "private", path, "bob")
        assert result["is_error"] is True
        assert "secret" not in result["for_llm"]
    assert "USER.md" not in listing(member_a, "private", "bob")
    assert "secret" not in read(member_a, "private", "USER.md")["for_llm"]


def test_another_tenants_agent_is_never_reached(member_a, outsider, tenant_a, tenant_b):
    make_agent(tenant_a, "shared-key", OPEN)
    give_user(tenant_a, Agent.objects.for_tenant(tenant_a).get(key="shared-key"), "alice")
    make_agent(tenant_b, "shared-key", OPEN, templates=False)
    before = tenant_state(tenant_a)
    result = read(outsider, "shared-key", "SOUL.md", "alice")
    assert result["is_error"] is True
    assert "shared-key SOUL.md" not in result["for_llm"]
    assert "alice SOUL.md" not in result["for_llm"]
    written = call(outsider, "shared-key", "write_file", "alice", path="SOUL.md", content="B's")
    assert written["is_error"] is False
    assert tenant_state(tenant_a) == before
    assert ".md" not in listing(outsider, "shared-key", "bob")
    assert (
        outsider.post(
            "/api/v1/runtime/execute",
            {"agent": "opener-of-a", "tool": "read_file", "args": {"path": "SOUL.md"}},
            format="json",
        ).status_code
        == 404
    )
