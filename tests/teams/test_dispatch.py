"""Dispatch: the task.dispatched event contract, one task per owner per round by priority, busy owners,
the circuit breaker, lead-owned and cyclic tasks really failed, and the post-turn rules of a member's run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message
from django.utils import timezone

from apps.realtime import events
from apps.teams import board, dispatch
from apps.teams.models import Task, TaskEvent
from tests.teams.conftest import Crew

pytestmark = pytest.mark.django_db

S = Task.Status


@pytest.fixture
def team_events(crew):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(crew.team.tenant_id, board.topic(crew.team)), channel)

    def read(type: str | None = None) -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        found = [layer.deserialize(bytes(row))["event"] for row in rows]
        return [e for e in found if type is None or e["type"] == type]

    return read


def new(crew: Crew, subject: str = "Write the report", **extra) -> Task:  # type: ignore[no-untyped-def]
    return board.create_task(crew.team, actor=crew.as_lead, subject=subject, **extra)


def reload(task: Task) -> Task:
    return Task.objects.for_tenant(task.tenant).select_related("owner").get(pk=task.pk)


def last_event(task: Task) -> tuple[str, str, str, Any]:
    e = TaskEvent.objects.for_tenant(task.tenant).filter(task_id=task.pk).order_by("created_at", "id").last()
    assert e is not None
    return (e.event_type, e.actor_type, e.actor_id, e.data)


def test_the_dispatched_event_carries_the_contract(crew, team_events):
    blocker = new(crew, "Collect the numbers")
    board.claim(crew.team, blocker.pk, agent=crew.bob, actor=crew.as_bob)
    task = new(
        crew,
        "Write the report",
        description="Use the Q3 template.",
        owner=crew.alice,
        blocked_by=[blocker.pk],
        chat_id="c1",
        channel="telegram",
        user_id="ann",
        metadata={"original_blocked_by": [str(blocker.pk)], "peer_kind": "group"},
    )
    for i in range(4):
        board.comment(crew.team, task.pk, actor=crew.as_lead, text=f"note {i} " + "x" * 600)
    board.complete(crew.team, blocker.pk, result="Revenue 42M", actor=crew.as_bob)
    assert reload(task).status == S.PENDING

    result = dispatch.dispatch_round(crew.team)

    assert [t.pk for t in result.dispatched] == [task.pk]
    [event] = team_events("task.dispatched")
    assert event["data"]["status"] == "in_progress"
    assert event["data"]["event"] == {
        "type": "dispatched",
        "actor_type": "system",
        "actor_id": "dispatch_unblocked",
        "data": None,
    }
    contract = event["data"]["dispatch"]
    message = contract.pop("message")
    assert contract == {
        "team": str(crew.team.pk),
        "team_name": "Builders",
        "task": str(task.pk),
        "agent": crew.alice.key,
        "channel": "system",
        "sender": "teammate:dashboard",
        "chat_id": "c1",
        "origin": {"channel": "telegram", "chat_id": "c1", "user_id": "ann", "peer_kind": "group"},
        "attempt": 1,
        "reason": "unblocked",
    }
    assert message.startswith(f"[Assigned task #1 (id: {task.pk})]: Write the report\n\nUse the Q3 template.")
    assert "=== Completed blocker task results ===" in message
    assert f'#1 "Collect the numbers" ({blocker.identifier}) ---\nRevenue 42M' in message
    assert "note 0" not in message  # only the three most recent comments
    assert all(f"note {i} " in message for i in (1, 2, 3))
    assert "x" * 501 not in message  # each cut to 500 characters
    assert f'team_tasks(action="complete", task_id="{task.pk}"' in message
    assert last_event(task) == ("dispatched", "system", "dispatch_unblocked", None)
    assert reload(task).metadata["dispatch_count"] == 1


def test_one_task_per_owner_per_round_by_priority(crew):
    low = new(crew, "low", owner=crew.alice, priority=1)
    high = new(crew, "high", owner=crew.alice, priority=5)
    bobs = new(crew, "bob's", owner=crew.bob)
    unowned = new(crew, "anyone's")

    first = dispatch.dispatch_round(crew.team)

    assert {t.pk for t in first.dispatched} == {high.pk, bobs.pk}
    assert [t.pk for t in first.skipped] == [low.pk]
    assert (reload(low).status, reload(unowned).status) == (S.PENDING, S.PENDING)
    # alice is busy with "high": the next round leaves her alone.
    second = dispatch.dispatch_round(crew.team)
    assert second.dispatched == []
    assert reload(low).status == S.PENDING


def test_after_a_members_turn_the_next_task_goes_out(crew):
    first = new(crew, "first", owner=crew.alice, priority=2)
    second = new(crew, "second", owner=crew.alice, priority=1)
    dispatch.dispatch_round(crew.team)
    started = timezone.now()
    board.complete(crew.team, first.pk, result="done", actor=crew.as_alice)

    outcome = dispatch.after_member_turn(
        crew.team, task_id=first.pk, agent_key=crew.alice.key, started_at=started, content="all done"
    )

    assert outcome.action == "handled"
    assert reload(first).result == "done"  # the tool's result, not the turn's content
    assert [t.pk for t in outcome.round.dispatched] == [second.pk]
    assert reload(second).status == S.IN_PROGRESS


def test_the_circuit_breaker_really_fails_the_task(crew):
    task = new(crew, "flaky", owner=crew.alice)
    for attempt in (1, 2, 3):
        dispatch.dispatch_round(crew.team)
        assert reload(task).metadata["dispatch_count"] == attempt
        # the member's runner never reports back: the lock expires and the task goes out again
        Task.objects.for_tenant(task.tenant).filter(pk=task.pk).update(
            lock_expires_at=timezone.now() - timedelta(minutes=1)
        )
    result = dispatch.dispatch_round(crew.team)
    task = reload(task)
    assert [t.pk for t in result.failed] == [task.pk]
    assert (task.status, task.result) == (S.FAILED, "FAILED: Task auto-failed after 3 dispatch attempts")
    assert last_event(task) == (
        "failed",
        "system",
        "dispatch_unblocked",
        {"reason": "Task auto-failed after 3 dispatch attempts"},
    )
    reasons = list(
        TaskEvent.objects.for_tenant(task.tenant)
        .filter(task_id=task.pk, event_type="dispatched")
        .values_list("actor_id", flat=True)
    )
    assert len(reasons) == 3


def test_the_circuit_breaker_fails_a_pending_task_and_a_retry_starts_afresh(crew):
    task = new(crew, "flaky", owner=crew.alice, metadata={"dispatch_count": 3})
    dispatch.dispatch_round(crew.team)
    assert reload(task).status == S.FAILED
    retried = dispatch.retry(crew.team, task.pk, actor=crew.as_lead)
    assert (retried.status, retried.metadata["dispatch_count"]) == (S.IN_PROGRESS, 1)


def test_lead_owned_pending_tasks_really_fail(crew):
    task = new(crew, "the lead's", owner=crew.lead)
    result = dispatch.dispatch_round(crew.team)
    task = reload(task)
    assert [t.pk for t in result.failed] == [task.pk]
    assert task.status == S.FAILED
    assert task.result.startswith("FAILED: the team lead cannot be dispatched its own task")


def test_cycles_and_self_references_fail(crew):
    a = new(crew, "a")
    b = new(crew, "b", blocked_by=[a.pk])
    c = new(crew, "c", blocked_by=[b.pk])
    selfish = new(crew, "selfish")
    tenant = crew.team.tenant
    # What validation refuses can still arrive through concurrent updates: the round catches it.
    Task.objects.for_tenant(tenant).filter(pk=a.pk).update(status=S.BLOCKED, blocked_by=[c.pk])
    Task.objects.for_tenant(tenant).filter(pk=selfish.pk).update(status=S.BLOCKED, blocked_by=[selfish.pk])
    fine = new(crew, "fine", blocked_by=[new(crew, "open").pk])

    result = dispatch.dispatch_round(crew.team)

    assert {t.pk for t in result.failed} == {a.pk, b.pk, c.pk, selfish.pk}
    assert reload(selfish).result == "FAILED: blocked_by references the task itself"
    assert reload(a).result.startswith("FAILED: blocked_by forms a cycle")
    assert reload(fine).status == S.BLOCKED


def test_a_recovered_task_is_dispatched_again(crew):
    task = new(crew, "x", owner=crew.alice)
    dispatch.dispatch_round(crew.team)
    Task.objects.for_tenant(task.tenant).filter(pk=task.pk).update(
        lock_expires_at=timezone.now() - timedelta(minutes=1)
    )
    result = dispatch.dispatch_round(crew.team)
    assert [t.pk for t in result.dispatched] == [task.pk]
    task = reload(task)
    assert task.lock_expires_at is not None
    assert task.lock_expires_at > timezone.now() + timedelta(minutes=59)
    assert task.metadata["dispatch_count"] == 2


def test_archived_teams_are_not_dispatched(crew):
    task = new(crew, "x", owner=crew.alice)
    crew.team.status = "archived"
    assert dispatch.dispatch_round(crew.team).dispatched == []
    assert reload(task).status == S.PENDING


# --- post-turn rules ----------------------------------------------------------------------------------------


def dispatched(crew: Crew, **extra: Any) -> Task:
    task = new(crew, "work", owner=crew.alice, **extra)
    dispatch.dispatch_round(crew.team)
    assert reload(task).status == S.IN_PROGRESS
    return task


def turn(crew: Crew, task: Task, **extra: Any) -> dispatch.TurnOutcome:
    return dispatch.after_member_turn(
        crew.team,
        task_id=task.pk,
        agent_key=crew.alice.key,
        started_at=extra.pop("started_at", timezone.now() - timedelta(seconds=5)),
        **extra,
    )


def test_a_run_error_fails_the_task(crew):
    task = dispatched(crew)
    outcome = turn(crew, task, error="provider timed out")
    assert outcome.action == "failed"
    assert (reload(task).status, reload(task).result) == (S.FAILED, "FAILED: provider timed out")
    assert last_event(task) == ("failed", "system", "post_turn", {"reason": "provider timed out"})


def test_a_blocker_during_the_turn_is_left_alone(crew):
    task = dispatched(crew)
    board.comment(crew.team, task.pk, actor=crew.as_alice, text="no access", kind="blocker")
    outcome = turn(crew, task, content="I could not go on")
    assert outcome.action == "handled"
    assert reload(task).result == "FAILED: Blocked: no access"


def test_a_review_during_the_turn_renews_the_lock(crew):
    task = dispatched(crew)
    board.review(crew.team, task.pk, actor=crew.as_alice)
    assert turn(crew, task, content="please review").action == "reviewed"
    assert reload(task).status == S.IN_REVIEW


def test_the_loop_detector_fails_the_task(crew):
    task = dispatched(crew)
    assert turn(crew, task, loop_detected=True).action == "failed"
    assert reload(task).result == "FAILED: Agent run terminated by loop detector"
    assert last_event(task)[:3] == ("failed", "system", "loop_detector")


def test_anything_else_auto_completes(crew):
    task = dispatched(crew)
    board.progress(crew.team, task.pk, percent=50, step="half", actor=crew.as_alice)
    outcome = turn(crew, task, content="The report is in out/report.md")
    assert outcome.action == "completed"
    assert (reload(task).status, reload(task).result) == (S.COMPLETED, "The report is in out/report.md")
    assert last_event(task) == ("completed", "system", "post_turn", None)


def test_auto_complete_joins_deliverables_truncates_and_has_a_default(crew):
    one = dispatched(crew)
    turn(crew, one, deliverables=["part one", "part two"])
    assert reload(one).result == "part one\n\n---\n\npart two"
    two = dispatched(crew)
    turn(crew, two, content="y" * 100_500)
    assert len(reload(two).result) == 100_000
    three = dispatched(crew)
    turn(crew, three)
    assert reload(three).result == "Agent run ended without explicit result"


def test_an_earlier_completion_does_not_count_for_this_turn(crew):
    task = dispatched(crew)
    later = timezone.now() + timedelta(seconds=30)
    outcome = turn(crew, task, content="final words", started_at=later)
    assert outcome.action == "completed"
    assert reload(task).result == "final words"


def test_another_agents_turn_changes_nothing(crew):
    task = dispatched(crew)
    outcome = dispatch.after_member_turn(
        crew.team, task_id=task.pk, agent_key=crew.bob.key, started_at=timezone.now(), error="boom"
    )
    assert outcome.action == "skipped"
    assert reload(task).status == S.IN_PROGRESS
