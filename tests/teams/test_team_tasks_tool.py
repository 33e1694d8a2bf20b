"""The team_tasks tool through the runtime pipeline: every action's success and refusal paths (the cases
of SPEC B §2.10's upstream list, adapted to Part A's fixes), the permission rules and channel bypasses,
the limits and messages, and the task events each action writes under the task's tenant."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from apps.accounts import services as tenant_services
from apps.audit.models import ToolCall
from apps.runtime import pipeline
from apps.teams import board
from apps.teams.models import Escalation, Task, TaskAttachment, TaskComment, TaskEvent
from apps.tenants.actors import Actor
from apps.tenants.models import Agent
from apps.toolkit import gateway
from apps.toolkit.results import ToolResult
from tests.teams.conftest import Crew, make_crew

pytestmark = pytest.mark.django_db

S = Task.Status


def call(agent: Agent, action: str, *, ctx: dict[str, Any] | None = None, **args: Any) -> ToolResult:
    outcome = pipeline.execute(
        actor=Actor.system(agent.tenant),
        request=gateway.CallRequest(
            agent=agent, tool="team_tasks", args={"action": action, **args}, **(ctx or {})
        ),
    )
    return outcome.result


def ok(result: ToolResult) -> str:
    assert result.is_error is False, result.for_llm
    return result.for_llm


def refused(result: ToolResult, message: str) -> str:
    assert result.is_error is True, result.for_llm
    assert message in result.for_llm, result.for_llm
    return result.for_llm


def reload(task: Task) -> Task:
    return Task.objects.for_tenant(task.tenant).select_related("owner").get(pk=task.pk)


def events_of(task: Task) -> list[tuple[str, str, str, Any]]:
    rows = TaskEvent.objects.for_tenant(task.tenant).filter(task_id=task.pk).order_by("created_at", "id")
    return [(e.event_type, e.actor_type, e.actor_id, e.data) for e in rows]


def types_of(task: Task) -> list[str]:
    return [e[0] for e in events_of(task)]


def created_id(result: ToolResult) -> uuid.UUID:
    return uuid.UUID(result.data["id"])


def task_of(crew: Crew, result: ToolResult) -> Task:
    return Task.objects.for_tenant(crew.team.tenant).select_related("owner").get(pk=created_id(result))


def new(crew: Crew, subject: str = "Write the report", **extra) -> Task:  # type: ignore[no-untyped-def]
    return board.create_task(crew.team, actor=crew.as_lead, subject=subject, **extra)


def running(crew: Crew, agent: Agent | None = None, **extra) -> Task:  # type: ignore[no-untyped-def]
    agent = agent or crew.alice
    task = new(crew, **extra)
    return board.claim(crew.team, task.pk, agent=agent, actor=board.BoardActor.of_agent(agent))


def in_review(crew: Crew, agent: Agent | None = None) -> Task:
    task = running(crew, agent)
    return board.review(crew.team, task.pk, actor=crew.as_alice)


# --- wiring -------------------------------------------------------------------------------------------------


def test_the_tools_are_listed_and_run_over_the_api(member_a, crew):
    listed = member_a.get(f"/api/v1/agents/{crew.lead.key}/tools?format=openai").json()
    names = json.dumps(listed)
    assert "team_tasks" in names
    assert "team_message" in names
    catalog = {t["name"]: t for t in member_a.get("/api/v1/tools/catalog/").json()["tools"]}
    assert catalog["team_tasks"]["available"] is True
    assert catalog["team_message"]["available"] is True
    response = member_a.post(
        "/api/v1/runtime/execute",
        {"agent": crew.lead.key, "tool": "team_tasks", "args": {"action": "create", "subject": "Ship it"}},
        format="json",
    )
    body = response.json()
    assert response.status_code == 200, body
    assert body["is_error"] is False, body
    assert body["for_llm"].startswith("Task created: Ship it (id=")
    row = ToolCall.objects.for_tenant(crew.team.tenant).get(pk=body["call_id"])
    assert (row.resolved_tool, row.decision, row.status) == ("team_tasks", "allowed", "ok")


def test_unknown_action_and_no_team(crew, tenant_a):
    refused(call(crew.lead, "explode"), "unknown action: explode (use create, list, get")
    loner = tenant_services.agent_create(actor=Actor.system(tenant_a), key="loner", name="Loner")
    refused(call(loner, "list"), "this agent is not part of any team")


def test_schema_refuses_unknown_arguments(crew):
    result = call(crew.lead, "create", subject="x", colour="red")
    refused(result, "Invalid arguments for team_tasks")
    assert not Task.objects.for_tenant(crew.team.tenant).exists()


def test_policy_can_deny_the_tool(crew, tenant_a):
    from apps.policy import services as policy_services

    policy_services.policy_save(
        Actor.system(tenant_a), policy_services.target("tenant"), {"deny": ["team_tasks"]}
    )
    refused(call(crew.lead, "list"), "tool not allowed by policy: team_tasks")


# --- create -------------------------------------------------------------------------------------------------


def test_create_success_unassigned(crew):
    result = call(
        crew.lead,
        "create",
        subject="Write the report",
        description="Q3",
        priority=5,
        ctx={"chat_id": "c1", "user_id": "u1", "channel": "telegram"},
    )
    text = ok(result)
    task = task_of(crew, result)
    assert text == (
        f"Task created: Write the report (id={task.pk}, task_number=1, identifier={task.identifier}, "
        "status=pending, assignee=none (any member may claim it))."
    )
    assert (task.status, task.priority, task.owner, task.chat_id, task.user_id, task.channel) == (
        S.PENDING,
        5,
        None,
        "c1",
        "u1",
        "telegram",
    )
    assert events_of(task) == [("created", "agent", crew.lead.key, None)]
    assert (
        TaskEvent.objects.for_tenant(crew.team.tenant).filter(task_id=task.pk).get().tenant_id
        == crew.team.tenant_id
    )


def test_create_with_assignee_dispatches_at_once(crew):
    result = call(crew.lead, "create", subject="Fix the build", assignee=crew.alice.key)
    task = task_of(crew, result)
    assert f"assignee={crew.alice.key}). Dispatched to {crew.alice.key}." in ok(result)
    assert (task.status, task.owner) == (S.IN_PROGRESS, crew.alice)
    assert types_of(task) == ["created", "assigned", "dispatched"]
    assert events_of(task)[-1] == ("dispatched", "system", "dispatch", None)
    assert task.metadata["dispatch_count"] == 1


def test_create_member_general_blocked(crew):
    refused(
        call(crew.alice, "create", subject="x"),
        'Members cannot create tasks. Use team_tasks(action="comment")',
    )
    assert not Task.objects.for_tenant(crew.team.tenant).exists()


def test_create_member_request_enabled(tenant_a):
    crew = make_crew(tenant_a, "Requests", member_requests={"enabled": True})
    result = call(crew.alice, "create", subject="Need a database", task_type="request")
    task = task_of(crew, result)
    assert (task.task_type, task.status, task.created_by_agent) == ("request", S.PENDING, crew.alice)
    refused(call(crew.alice, "create", subject="x"), 'Members can only create task_type="request"')


def test_create_member_request_disabled(crew):
    refused(call(crew.alice, "create", subject="x", task_type="request"), "Members cannot create tasks")


def test_create_teammate_and_system_channels_count_as_lead(crew):
    for channel in ("teammate", "system"):
        ok(call(crew.alice, "create", subject=f"via {channel}", ctx={"channel": channel}))
    refused(
        call(crew.alice, "create", subject="via dashboard", ctx={"channel": "dashboard"}), "Members cannot"
    )


def test_create_empty_subject(crew):
    refused(call(crew.lead, "create", subject="   "), "subject is required")
    refused(call(crew.lead, "create"), "subject is required")


def test_create_assignee_is_optional(crew):
    # Part A: an unassigned task is claimable by any member (upstream required an assignee).
    task = task_of(crew, call(crew.lead, "create", subject="Anyone"))
    ok(call(crew.bob, "claim", task_id=str(task.pk)))
    assert reload(task).owner == crew.bob


def test_create_self_assign_blocked(crew):
    refused(
        call(crew.lead, "create", subject="x", assignee=crew.lead.key),
        "team lead cannot assign tasks to itself",
    )


def test_create_non_member_assignee(crew, tenant_a):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="stranger", name="Stranger")
    text = refused(
        call(crew.lead, "create", subject="x", assignee="stranger"),
        "'stranger' is not a member of team Builders",
    )
    assert crew.alice.key in text
    assert crew.bob.key in text


def test_create_blocked_by_terminal(crew):
    done = running(crew)
    board.complete(crew.team, done.pk, result="ok", actor=crew.as_alice)
    refused(
        call(crew.lead, "create", subject="x", blocked_by=[str(done.pk)]),
        "already completed, failed or cancelled",
    )


def test_create_blocked_by_cross_team(crew, tenant_a):
    other = make_crew(tenant_a, "Others")
    theirs = board.create_task(other.team, actor=other.as_lead, subject="theirs")
    refused(call(crew.lead, "create", subject="x", blocked_by=[str(theirs.pk)]), "on this team's board")


def test_create_blocked_by_invalid_uuid(crew):
    refused(call(crew.lead, "create", subject="x", blocked_by=["T-001"]), "'T-001' is not a task id")


def test_create_require_approval(crew):
    result = call(crew.lead, "create", subject="Risky", assignee=crew.alice.key, require_approval=True)
    task = task_of(crew, result)
    assert "status=in_review" in ok(result)
    assert (task.status, task.require_approval) == (S.IN_REVIEW, True)
    assert types_of(task) == ["created"]


def test_create_with_blockers(crew):
    first = new(crew, "first")
    result = call(crew.lead, "create", subject="second", blocked_by=[str(first.pk)], assignee=crew.bob.key)
    task = task_of(crew, result)
    assert "status=blocked" in ok(result)
    assert (task.status, task.blocked_by, task.owner) == (S.BLOCKED, [first.pk], crew.bob)
    assert task.metadata["original_blocked_by"] == [str(first.pk)]


def test_create_compound_subject_warning(crew):
    assert "Warning: this subject looks like several pieces of work" in ok(
        call(crew.lead, "create", subject="Design the schema and implement the API")
    )
    assert "Warning" not in ok(call(crew.lead, "create", subject="Salt and pepper"))


# --- list, get, search --------------------------------------------------------------------------------------


def listed(result: ToolResult) -> dict[str, Any]:
    return json.loads(ok(result))


def test_list_filters_by_user_for_external_channels(crew):
    new(crew, "ann's", user_id="ann", channel="telegram", chat_id="c1")
    new(crew, "ben's", user_id="ben", channel="telegram", chat_id="c1")
    body = listed(call(crew.lead, "list", ctx={"channel": "telegram", "chat_id": "c1", "user_id": "ann"}))
    assert [t["subject"] for t in body["tasks"]] == ["ann's"]
    assert body["count"] == 1
    assert body["page"] == 1
    assert "has_more" not in body


def test_list_no_user_filter_for_teammate(crew):
    new(crew, "ann's", user_id="ann", chat_id="c1")
    new(crew, "ben's", user_id="ben", chat_id="c1")
    body = listed(call(crew.alice, "list", ctx={"channel": "teammate", "chat_id": "c1", "user_id": "ann"}))
    assert sorted(t["subject"] for t in body["tasks"]) == ["ann's", "ben's"]


def test_list_is_per_chat_unless_the_workspace_is_shared(crew, tenant_a):
    new(crew, "here", chat_id="c1")
    new(crew, "there", chat_id="c2")
    assert [t["subject"] for t in listed(call(crew.lead, "list", ctx={"chat_id": "c1"}))["tasks"]] == ["here"]
    shared = make_crew(tenant_a, "Shared", workspace_scope="shared")
    board.create_task(shared.team, actor=shared.as_lead, subject="here", chat_id="c1")
    board.create_task(shared.team, actor=shared.as_lead, subject="there", chat_id="c2")
    assert len(listed(call(shared.lead, "list", ctx={"chat_id": "c1"}))["tasks"]) == 2


def test_list_rows_status_filter_pages_and_hint(crew):
    blocker = new(crew, "blocker")
    board.claim(crew.team, blocker.pk, agent=crew.bob, actor=crew.as_bob)
    new(crew, "waiting", blocked_by=[blocker.pk], priority=3)
    for i in range(30):
        new(crew, f"filler {i}")
    body = listed(call(crew.lead, "list"))
    assert body["count"] == 30
    assert body["has_more"] is True
    first = body["tasks"][0]
    assert first["subject"] == "waiting"
    assert first["blocked_by"] == [
        {
            "id": str(blocker.pk),
            "subject": "blocker",
            "status": "in_progress",
            "owner_agent_key": crew.bob.key,
        }
    ]
    assert set(first) >= {
        "id",
        "identifier",
        "owner_agent_key",
        "owner_display_name",
        "created_by_agent_key",
        "progress_percent",
        "progress_step",
        "created_at",
    }
    assert body["hint"].startswith("[Task creation guide]")
    assert crew.alice.key in body["hint"]
    assert f"- {crew.lead.key}" not in body["hint"]
    assert len(listed(call(crew.lead, "list", page=2))["tasks"]) == 2
    assert listed(call(crew.lead, "list", status="completed"))["count"] == 0
    assert "hint" not in listed(call(crew.alice, "list"))
    refused(call(crew.lead, "list", status="done"), "Invalid arguments")


def test_get_detail_and_cross_team(crew, tenant_a):
    task = running(crew)
    board.comment(crew.team, task.pk, actor=crew.as_lead, text="please hurry")
    board.complete(crew.team, task.pk, result="r" * 9000, actor=crew.as_alice)
    body = json.loads(ok(call(crew.bob, "get", task_id=str(task.pk))))
    assert body["result"] == "r" * 8000 + "…"
    assert body["comments"][0]["agent_key"] == crew.lead.key
    assert body["comments"][0]["content"] == "please hurry"
    assert [e["event_type"] for e in body["events"]] == ["created", "claimed", "commented", "completed"]
    other = make_crew(tenant_a, "Others")
    theirs = board.create_task(other.team, actor=other.as_lead, subject="theirs")
    refused(call(crew.lead, "get", task_id=str(theirs.pk)), "does not belong to your team")


def test_task_id_rules(crew):
    refused(call(crew.lead, "get"), "task_id is required")
    refused(
        call(crew.lead, "get", task_id="3"),
        'invalid task_id "3" — use the UUID from task list, not the task number',
    )
    refused(call(crew.lead, "get", task_id=str(uuid.uuid4())), "not found")


def test_search(crew):
    hit = new(crew, "Deploy the gateway")
    new(crew, "Write docs")
    body = json.loads(ok(call(crew.alice, "search", query="deplo gate")))
    assert [r["id"] for r in body["results"]] == [str(hit.pk)]
    assert body["mode"] == "fts"
    assert "full-text search only" in body["note"]
    refused(call(crew.alice, "search", query=" "), "query is required")


def test_search_filters_by_user_on_external_channels(crew):
    new(crew, "report for ann", user_id="ann")
    new(crew, "report for ben", user_id="ben")
    body = json.loads(
        ok(call(crew.alice, "search", query="report", ctx={"channel": "telegram", "user_id": "ann"}))
    )
    assert [r["subject"] for r in body["results"]] == ["report for ann"]


# --- claim, complete ----------------------------------------------------------------------------------------


def test_claim_success_and_already_in_progress(crew):
    task = new(crew)
    assert (
        ok(call(crew.alice, "claim", task_id=str(task.pk)))
        == f"Task {task.pk} claimed successfully. It is now in progress."
    )
    assert events_of(task)[-1] == ("claimed", "agent", crew.alice.key, None)
    refused(
        call(crew.bob, "claim", task_id=str(task.pk)), "cannot claim: the task is in_progress, not pending"
    )
    assert reload(task).owner == crew.alice


def test_claim_team_resolution_fail(tenant_a, crew):
    loner = tenant_services.agent_create(actor=Actor.system(tenant_a), key="loner", name="Loner")
    refused(call(loner, "claim", task_id=str(new(crew).pk)), "this agent is not part of any team")


def test_complete_success_missing_result_auto_claim(crew):
    task = running(crew)
    refused(call(crew.alice, "complete", task_id=str(task.pk)), "result is required")
    assert ok(call(crew.alice, "complete", task_id=str(task.pk), result="done")) == (
        f"Task {task.pk} completed. Dependent tasks will be dispatched after this turn ends."
    )
    assert (reload(task).status, reload(task).result) == (S.COMPLETED, "done")
    assert events_of(task)[-1] == ("completed", "agent", crew.alice.key, None)
    fresh = new(crew, "unclaimed")
    ok(call(crew.bob, "complete", task_id=str(fresh.pk), result="did it"))
    assert types_of(fresh) == ["created", "claimed", "completed"]
    assert reload(fresh).owner == crew.bob


def test_complete_already_completed_and_terminal(crew):
    task = running(crew)
    ok(call(crew.alice, "complete", task_id=str(task.pk), result="done"))
    assert (
        ok(call(crew.alice, "complete", task_id=str(task.pk), result="again"))
        == f"Task {task.pk} is already completed."
    )
    failed = running(crew)
    board.fail(crew.team, failed.pk, message="boom", actor=crew.as_alice)
    refused(call(crew.alice, "complete", task_id=str(failed.pk), result="x"), "is failed — cannot complete.")


def test_complete_resumes_a_recovered_task(crew):
    task = running(crew)
    Task.objects.for_tenant(task.tenant).filter(pk=task.pk).update(
        status=S.PENDING, locked_at=None, lock_expires_at=None
    )
    ok(call(crew.alice, "complete", task_id=str(task.pk), result="done anyway"))
    assert reload(task).status == S.COMPLETED
    assert types_of(task)[-2:] == ["assigned", "completed"]


# --- cancel, assign, review, approve, reject ----------------------------------------------------------------


def test_cancel_lead_member_bypass_default_reason(crew):
    task = running(crew)
    refused(call(crew.alice, "cancel", task_id=str(task.pk)), "only the team lead can perform this action")
    assert reload(task).status == S.IN_PROGRESS
    ok(call(crew.lead, "cancel", task_id=str(task.pk)))
    assert (reload(task).status, reload(task).result) == (S.CANCELLED, "Cancelled by agent")
    assert events_of(task)[-1] == ("cancelled", "agent", crew.lead.key, {"reason": "Cancelled by agent"})
    other = new(crew, "other")
    ok(call(crew.alice, "cancel", task_id=str(other.pk), text="not needed", ctx={"channel": "system"}))
    assert events_of(other)[-1] == ("cancelled", "agent", crew.alice.key, {"reason": "not needed"})
    refused(
        call(crew.lead, "cancel", task_id=str(new(crew).pk), text="x" * 501), "longer than 500 characters"
    )


def test_assign(crew):
    task = new(crew)
    refused(call(crew.alice, "assign", task_id=str(task.pk), assignee=crew.bob.key), "only the team lead")
    refused(call(crew.lead, "assign", task_id=str(task.pk)), "assignee is required")
    refused(
        call(crew.lead, "assign", task_id=str(task.pk), assignee=crew.lead.key),
        "team lead cannot assign tasks to itself",
    )
    assert "dispatched" in ok(call(crew.lead, "assign", task_id=str(task.pk), assignee=crew.bob.key))
    assert (reload(task).status, reload(task).owner) == (S.IN_PROGRESS, crew.bob)
    assert [e[:3] for e in events_of(task)[1:]] == [
        ("assigned", "agent", crew.lead.key),
        ("assigned", "agent", crew.lead.key),
        ("dispatched", "agent", crew.lead.key),
    ]
    assert events_of(task)[1][3] == {"owner": crew.bob.key}
    waiting = new(crew, "waiting", blocked_by=[task.pk])
    assert "starts once its blockers finish" in ok(
        call(crew.lead, "assign", task_id=str(waiting.pk), assignee=crew.alice.key)
    )
    assert (reload(waiting).status, reload(waiting).owner) == (S.BLOCKED, crew.alice)


def test_review_owner_non_owner_cross_team(crew, tenant_a):
    task = running(crew)
    refused(call(crew.bob, "review", task_id=str(task.pk)), "only the task owner can submit for review")
    ok(call(crew.alice, "review", task_id=str(task.pk)))
    assert reload(task).status == S.IN_REVIEW
    assert events_of(task)[-1] == ("reviewed", "agent", crew.alice.key, None)
    other = make_crew(tenant_a, "Others")
    theirs = board.create_task(other.team, actor=other.as_lead, subject="theirs")
    refused(call(crew.alice, "review", task_id=str(theirs.pk)), "does not belong to your team")


def test_approve_lead_member_dashboard_cross_team_and_comment(crew, tenant_a):
    task = in_review(crew)
    refused(call(crew.alice, "approve", task_id=str(task.pk)), "only the team lead")
    assert ok(call(crew.lead, "approve", task_id=str(task.pk))).endswith("approved (status: completed).")
    assert reload(task).status == S.COMPLETED
    assert types_of(task)[-2:] == ["approved", "commented"]
    assert events_of(task)[-1][3]["comment_text"] == "Task approved (status: completed)."
    second = in_review(crew)
    ok(call(crew.bob, "approve", task_id=str(second.pk), ctx={"channel": "dashboard"}))
    assert reload(second).status == S.COMPLETED
    other = make_crew(tenant_a, "Others")
    theirs = board.create_task(other.team, actor=other.as_lead, subject="theirs", require_approval=True)
    refused(call(crew.lead, "approve", task_id=str(theirs.pk)), "does not belong to your team")
    assert reload(theirs).status == S.IN_REVIEW


def test_approving_a_task_that_never_ran_dispatches_it(crew):
    task = task_of(
        crew, call(crew.lead, "create", subject="Risky", assignee=crew.alice.key, require_approval=True)
    )
    text = ok(call(crew.lead, "approve", task_id=str(task.pk)))
    assert "approved (status: pending). Dispatched to" in text
    assert (reload(task).status, reload(task).owner) == (S.IN_PROGRESS, crew.alice)
    assert types_of(task) == ["created", "approved", "commented", "assigned", "dispatched"]


def test_reject_with_owner_redispatches_with_feedback(crew):
    blocker = in_review(crew)
    dependent = new(crew, "dependent", blocked_by=[blocker.pk])
    refused(call(crew.alice, "reject", task_id=str(blocker.pk)), "only the team lead")
    text = ok(call(crew.lead, "reject", task_id=str(blocker.pk), text="tests are missing"))
    assert "sent back to" in text
    task = reload(blocker)
    assert (task.status, task.owner) == (S.IN_PROGRESS, crew.alice)
    assert types_of(task)[-4:] == ["commented", "rejected", "assigned", "dispatched"]
    assert events_of(task)[-3][3] == {"reason": "tests are missing"}
    comment = TaskComment.objects.for_tenant(task.tenant).filter(task_id=task.pk).get()
    assert comment.content == "Task rejected. Reason: tests are missing"
    assert reload(dependent).status == S.BLOCKED  # dependents stay blocked


def test_reject_without_owner_cancels_and_unblocks(crew):
    task = new(crew, require_approval=True)
    dependent = new(crew, "dependent", blocked_by=[task.pk])
    ok(call(crew.bob, "reject", task_id=str(task.pk), ctx={"channel": "dashboard"}))
    assert (reload(task).status, reload(task).result) == (S.CANCELLED, "Rejected by user")
    assert events_of(task)[-1] == ("rejected", "agent", crew.bob.key, {"reason": "Rejected by user"})
    assert reload(dependent).status == S.PENDING


# --- comment, progress, update, attach ----------------------------------------------------------------------


def test_comment_note_cross_team_empty_and_too_long(crew, tenant_a):
    task = new(crew)
    assert ok(call(crew.alice, "comment", task_id=str(task.pk), text="on it")).startswith(
        "Comment added to task #1"
    )
    assert events_of(task)[-1] == (
        "commented",
        "agent",
        crew.alice.key,
        {"comment_text": "on it", "comment_type": "note"},
    )
    other = make_crew(tenant_a, "Others")
    theirs = board.create_task(other.team, actor=other.as_lead, subject="theirs")
    refused(call(crew.alice, "comment", task_id=str(theirs.pk), text="hi"), "does not belong to your team")
    refused(call(crew.alice, "comment", task_id=str(task.pk), text=" "), "text is required")
    refused(call(crew.alice, "comment", task_id=str(task.pk), text="é" * 5001), "longer than 10000 bytes")
    assert reload(task).comment_count == 1


def test_lead_comment_hints(crew):
    task = running(crew)
    assert "assignee won't see this comment" in ok(call(crew.lead, "comment", task_id=str(task.pk), text="x"))
    board.complete(crew.team, task.pk, result="ok", actor=crew.as_alice)
    assert 'use team_tasks(action="retry")' in ok(call(crew.lead, "comment", task_id=str(task.pk), text="y"))


def test_blocker_comment_fails_and_escalates(crew):
    task = running(crew)
    dependent = new(crew, "dependent", blocked_by=[task.pk])
    text = ok(call(crew.alice, "comment", task_id=str(task.pk), text="no credentials", type="blocker"))
    assert (
        text
        == f'Task #1 "{task.subject}" auto-failed due to blocker. Leader has been notified and can retry '
        "with updated instructions."
    )
    assert (reload(task).status, reload(task).result) == (S.FAILED, "FAILED: Blocked: no credentials")
    assert events_of(task)[-1] == ("failed", "agent", crew.alice.key, {"reason": "Blocked: no credentials"})
    assert Escalation.objects.for_tenant(task.tenant).get(task_id=task.pk).notified_lead is True
    assert reload(dependent).status == S.PENDING


def test_blocker_on_a_task_not_in_progress_is_only_a_comment(crew):
    task = new(crew)
    assert "no escalation needed" in ok(
        call(crew.alice, "comment", task_id=str(task.pk), text="hm", type="blocker")
    )
    assert reload(task).status == S.PENDING


def test_progress_owner_non_owner_regression_terminal_invalid(crew):
    task = running(crew)
    assert (
        ok(call(crew.alice, "progress", task_id=str(task.pk), percent=40, step="halfway"))
        == "Progress updated: 40% halfway"
    )
    assert events_of(task)[-1] == (
        "progress",
        "agent",
        crew.alice.key,
        {"progress_percent": 40, "progress_step": "halfway"},
    )
    refused(
        call(crew.bob, "progress", task_id=str(task.pk), percent=50),
        "only the task owner can report progress",
    )
    assert ok(call(crew.alice, "progress", task_id=str(task.pk), percent=10)) == "Progress updated: 40%"
    for bad in (101, -1, None):
        args: dict[str, Any] = {} if bad is None else {"percent": bad}
        refused(call(crew.alice, "progress", task_id=str(task.pk), **args), "percent must be 0-100")
    board.complete(crew.team, task.pk, result="ok", actor=crew.as_alice)
    result = call(crew.alice, "progress", task_id=str(task.pk), percent=90)
    assert ok(result) == "Task already completed — progress update skipped."
    assert types_of(task)[-1] == "completed"


def test_update_lead_member_cross_team_no_updates_priority(crew, tenant_a):
    task = new(crew)
    blocker = new(crew, "blocker")
    refused(call(crew.alice, "update", task_id=str(task.pk), subject="x"), "only the team lead")
    refused(call(crew.lead, "update", task_id=str(task.pk)), "no updates provided")
    ok(
        call(
            crew.lead,
            "update",
            task_id=str(task.pk),
            subject="New subject",
            priority=7,
            blocked_by=[str(blocker.pk)],
        )
    )
    task = reload(task)
    assert (task.subject, task.priority, task.blocked_by, task.status) == (
        "New subject",
        7,
        [blocker.pk],
        S.PENDING,
    )
    assert events_of(task)[-1] == (
        "updated",
        "agent",
        crew.lead.key,
        {"fields": ["blocked_by", "priority", "subject"]},
    )
    other = make_crew(tenant_a, "Others")
    theirs = board.create_task(other.team, actor=other.as_lead, subject="theirs")
    refused(call(crew.lead, "update", task_id=str(theirs.pk), subject="x"), "does not belong to your team")


def test_update_refuses_a_cycle(crew):
    first = new(crew, "first")
    second = new(crew, "second", blocked_by=[first.pk])
    refused(
        call(crew.lead, "update", task_id=str(first.pk), blocked_by=[str(second.pk)]), "that would be a cycle"
    )
    refused(
        call(crew.lead, "update", task_id=str(first.pk), blocked_by=[str(first.pk)]), "cannot wait on itself"
    )
    assert reload(first).blocked_by == []


def test_attach_success_idempotent_cross_team_empty(crew, tenant_a):
    task = new(crew)
    text = ok(call(crew.alice, "attach", task_id=str(task.pk), path="out/report.md"))
    attachment = TaskAttachment.objects.for_tenant(task.tenant).get(task_id=task.pk)
    assert attachment.path.endswith("/out/report.md")
    assert attachment.path.startswith("/")
    assert f"Attached {attachment.path}" in text
    assert "already attached" in ok(
        call(crew.alice, "attach", task_id=str(task.pk), path="out/../out/report.md")
    )
    assert reload(task).attachment_count == 1
    assert events_of(task)[-1] == ("attachment_added", "agent", crew.alice.key, {"path": attachment.path})
    other = make_crew(tenant_a, "Others")
    theirs = board.create_task(other.team, actor=other.as_lead, subject="theirs")
    refused(call(crew.alice, "attach", task_id=str(theirs.pk), path="x"), "does not belong to your team")
    refused(call(crew.alice, "attach", task_id=str(task.pk), path=" "), "path is required")


# --- ask_user, clear_ask_user, retry ------------------------------------------------------------------------


def test_ask_user_owner_non_owner_empty_internal(crew):
    task = running(crew, channel="telegram", chat_id="c1")
    refused(
        call(crew.bob, "ask_user", task_id=str(task.pk), text="?"), "only the task owner can ask the user"
    )
    refused(call(crew.alice, "ask_user", task_id=str(task.pk), text=" "), "text is required")
    text = ok(call(crew.alice, "ask_user", task_id=str(task.pk), text="Which region?"))
    assert "reminded on telegram every 30 minutes" in text
    task = reload(task)
    assert (task.followup_message, task.followup_channel, task.followup_chat_id, task.followup_max) == (
        "Which region?",
        "telegram",
        "c1",
        0,
    )
    assert task.followup_at is not None
    data = events_of(task)[-1][3]
    assert events_of(task)[-1][0] == "updated"
    assert data["followup"] == "set"
    assert data["followup_message"] == "Which region?"
    internal = running(crew, channel="system")
    refused(
        call(crew.alice, "ask_user", task_id=str(internal.pk), text="?", ctx={"channel": "teammate"}),
        "needs a user-facing channel",
    )


def test_ask_user_uses_team_settings_and_the_callers_channel(tenant_a):
    crew = make_crew(tenant_a, "Askers", followup_interval_minutes=10, followup_max_reminders=3)
    task = running(crew, channel="teammate")
    text = ok(
        call(
            crew.alice,
            "ask_user",
            task_id=str(task.pk),
            text="ok?",
            ctx={"channel": "slack", "chat_id": "s1"},
        )
    )
    assert "every 10 minutes, at most 3 times" in text
    assert (reload(task).followup_channel, reload(task).followup_chat_id, reload(task).followup_max) == (
        "slack",
        "s1",
        3,
    )


def test_clear_ask_user_owner_lead_other(crew):
    task = running(crew, channel="telegram")
    ok(call(crew.alice, "ask_user", task_id=str(task.pk), text="?"))
    refused(call(crew.bob, "clear_ask_user", task_id=str(task.pk)), "only the task owner or the team lead")
    ok(call(crew.alice, "clear_ask_user", task_id=str(task.pk)))
    assert reload(task).followup_at is None
    assert reload(task).followup_message == ""
    assert events_of(task)[-1] == ("updated", "agent", crew.alice.key, {"followup": "cleared"})
    ok(call(crew.alice, "ask_user", task_id=str(task.pk), text="again?"))
    assert "Follow-up cleared" in ok(call(crew.lead, "clear_ask_user", task_id=str(task.pk)))


def test_retry_lead_member_invalid_status_cross_team(crew, tenant_a):
    task = running(crew)
    board.fail(crew.team, task.pk, message="boom", actor=crew.as_alice)
    refused(call(crew.alice, "retry", task_id=str(task.pk)), "only the team lead")
    text = ok(call(crew.lead, "retry", task_id=str(task.pk), text="use the staging key"))
    assert f"reopened and dispatched to {crew.alice.key}" in text
    task = reload(task)
    assert (task.status, task.owner, task.result) == (S.IN_PROGRESS, crew.alice, "")
    assert types_of(task)[-3:] == ["retried", "assigned", "dispatched"]
    assert events_of(task)[-3][3] == {"reason": "use the staging key"}
    refused(call(crew.lead, "retry", task_id=str(task.pk)), "cannot retry: the task is in_progress")
    other = make_crew(tenant_a, "Others")
    theirs = board.create_task(other.team, actor=other.as_lead, subject="theirs")
    refused(call(crew.lead, "retry", task_id=str(theirs.pk)), "does not belong to your team")


def test_retry_works_on_completed_tasks(crew):
    task = running(crew)
    board.complete(crew.team, task.pk, result="first try", actor=crew.as_alice)
    ok(call(crew.lead, "retry", task_id=str(task.pk)))
    assert reload(task).status == S.IN_PROGRESS


def test_retry_without_assignee_and_self_dispatch(crew):
    unowned = new(crew)
    board.cancel(crew.team, unowned.pk, reason="x", actor=crew.as_lead)
    assert "any member may claim it" in ok(call(crew.lead, "retry", task_id=str(unowned.pk)))
    assert (reload(unowned).status, reload(unowned).owner) == (S.PENDING, None)
    leads = new(crew, "lead's own", owner=crew.lead)
    board.cancel(crew.team, leads.pk, reason="x", actor=crew.as_lead)
    refused(call(crew.lead, "retry", task_id=str(leads.pk)), "belongs to the team lead")
    ok(call(crew.lead, "retry", task_id=str(leads.pk), assignee=crew.bob.key))
    assert (reload(leads).status, reload(leads).owner) == (S.IN_PROGRESS, crew.bob)


def test_retry_resolves_the_escalation(crew):
    task = running(crew)
    ok(call(crew.alice, "comment", task_id=str(task.pk), text="stuck", type="blocker"))
    ok(call(crew.lead, "retry", task_id=str(task.pk)))
    assert Escalation.objects.for_tenant(task.tenant).get(task_id=task.pk).state == Escalation.State.RETRIED


def test_a_failing_step_leaves_nothing_behind(crew):
    task = in_review(crew)
    Task.objects.for_tenant(task.tenant).filter(pk=task.pk).update(owner=None)
    # Rejecting an unowned task cancels it; a reason that is too long refuses before anything is written.
    refused(call(crew.lead, "reject", task_id=str(task.pk), text="x" * 600), "longer than 500")
    assert reload(task).status == S.IN_REVIEW
    assert not TaskComment.objects.for_tenant(task.tenant).filter(task_id=task.pk).exists()


def test_tenant_isolation_of_the_tool(crew, tenant_b):
    foreign = make_crew(tenant_b, "Builders")
    theirs = board.create_task(foreign.team, actor=foreign.as_lead, subject="B's secret")
    refused(call(crew.lead, "get", task_id=str(theirs.pk)), "does not belong to your team")
    refused(call(crew.lead, "cancel", task_id=str(theirs.pk)), "does not belong to your team")
    assert "B's secret" not in ok(call(crew.lead, "list", status="all"))
    assert reload(theirs).status == S.PENDING
    assert types_of(theirs) == ["created"]
