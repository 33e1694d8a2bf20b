"""The built-in tools reached the way agent loops reach them: POST /api/v1/runtime/execute."""

from __future__ import annotations

import pytest

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.policy import services as policy_services
from apps.tenants.actors import Actor

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def call(client, tool, args, **extra):
    response = client.post(
        "/api/v1/runtime/execute", {"agent": "bot", "tool": tool, "args": args, **extra}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_files_written_by_one_call_are_read_by_the_next(member_a, agent):
    assert (
        call(member_a, "write_file", {"path": "notes/todo.md", "content": "one\ntwo\n"})["is_error"] is False
    )
    body = call(member_a, "read_file", {"path": "notes/todo.md"})
    assert body["is_error"] is False
    assert "one" in body["for_llm"]
    assert "two" in body["for_llm"]
    listed = call(member_a, "list_files", {"path": "notes"})
    assert "todo.md" in listed["for_llm"]


def test_each_tenant_has_its_own_workspace(member_a, outsider, agent, tenant_b):
    services.agent_create(actor=Actor.system(tenant_b), key="bot", name="B's bot")
    call(member_a, "write_file", {"path": "secret.txt", "content": "tenant A only"})
    body = call(outsider, "read_file", {"path": "secret.txt"})
    assert body["is_error"] is True
    assert "tenant A only" not in body["for_llm"]


def test_paths_outside_the_workspace_are_refused(member_a, agent):
    for path in ("../../etc/passwd", "/etc/passwd", ".ssh/id_rsa"):
        body = call(member_a, "read_file", {"path": path})
        assert body["is_error"] is True, path
        assert "root:" not in body["for_llm"]


def test_exec_runs_in_the_workspace(member_a, agent):
    call(member_a, "write_file", {"path": "hello.txt", "content": "hi there"})
    body = call(member_a, "exec", {"command": "cat hello.txt && echo done"})
    assert body["is_error"] is False
    assert "hi there" in body["for_llm"]
    assert "done" in body["for_llm"]


def test_the_safeguard_blocks_even_with_every_deny_group_off(member_a, agent, tenant_a):
    from apps.toolkit.shell_deny import DENY_GROUP_NAMES

    off = {name: False for name in DENY_GROUP_NAMES}
    policy_services.policy_save(
        Actor.system(tenant_a), policy_services.target("tenant"), {"shellDenyGroups": off}
    )
    body = call(member_a, "exec", {"command": "sudo id"})
    assert body["is_error"] is True
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert row.decision == "safeguard"


def test_deny_groups_refuse_and_an_override_allows(member_a, agent, tenant_a):
    body = call(member_a, "exec", {"command": "grep -r sudo ."})
    assert body["is_error"] is True
    policy_services.policy_save(
        Actor.system(tenant_a),
        policy_services.target("tenant"),
        {"shellDenyGroups": {"privilege_escalation": False}},
    )
    allowed = call(member_a, "exec", {"command": "grep -r sudo . ; echo searched"})
    assert "searched" in allowed["for_llm"]


def test_web_fetch_of_an_internal_address_is_refused(member_a, agent):
    body = call(member_a, "web_fetch", {"url": "http://169.254.169.254/latest/meta-data/"})
    assert body["is_error"] is True
    assert body["for_llm"].startswith(
        "web_fetch refused http://169.254.169.254/latest/meta-data/: blocked: 169.254.169.254 is a cloud "
        "metadata address."
    )


def test_web_search_without_a_provider_says_how_to_configure_one(member_a, agent):
    body = call(member_a, "web_search", {"query": "toolgate"})
    assert body["is_error"] is True
    assert body["for_llm"].startswith("web_search has no search provider configured for this agent.")
    assert '{"provider": "duckduckgo"}' in body["for_llm"]
