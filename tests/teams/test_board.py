"""The task board's state machine: every transition's success and refusal, numbering, auto-unblock on
every terminal status, approval and retry (with SPEC Part A's fixes), progress, blockers and
escalation, attachments, deletion, the ticker's sweeps per tenant, and the task events each writes."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.teams import board
from apps.teams.board import BoardActor, BoardError
from apps.teams.models import Escalation, Task, TaskAttachment, TaskEvent, TeamMember
from tests.teams.conftest import Crew, make_crew

pytestmark = pytest.mark.django_db

S = Task.Status


def new(crew: Crew, subject: str = "Write the report", **extra) -> Task:  # type: ignore[no-untyped-def]
    return board.create_task(crew.team, actor=crew.as_lead, subject=subject, **extra)


def events_of(task: Task) -> list[tuple[str, str, str, dict | None]]:
    rows = TaskEvent.objects.for_tenant(task.tenant).filter(task_id=task.pk).order_by("created_at", "id")
    return [(e.event_type, e.actor_type, e.actor_id, e.data) for e in rows]


def last_event(task: Task) -> tuple[str, str, str, dict | None]:
    return events_of(task)[-1]


def status(task: Task) -> str:
    return Task.objects.for_tenant(task.tenant).get(pk=task.pk).status


def running(crew: Crew, **extra) -> Task:  # type: ignore[no-untyped-def]
    task = new(crew, **extra)
    return board.claim(crew.team, task.pk, agent=crew.alice, actor=crew.as_alice)


# --- creation and numbering ---------------------------------------------------------------------------------


def test_numbering_is_per_team_and_chat_with_identifiers(crew, tenant_a):
    first, second = new(crew), new(crew)
    other_chat = new(crew, chat_id="chat-9")
    other_team = make_crew(tenant_a, "Reviewers")
    elsewhere = board.create_task(other_team.team, actor=other_team.as_lead, subject="x")
    assert [first.number, second.number, other_chat.number, elsewhere.number] == [1, 2, 1, 1]
    for task in (first, second, other_chat):
        assert re.fullmatch(r"T-\d{3}-[0-9a-f]{4}", task.identifier)
        assert task.identifier.endswith(task.pk.hex[-4:])
    assert first.identifier.startswith("T-001-")
    assert last_event(first) == ("created", "agent", crew.lead.key, None)


def test_initial_status_depends_on_approval_and_blockers(crew):
    blocker = new(crew)
    assert new(crew).status == S.PENDING
    assert new(crew, require_approval=True).status == S.IN_REVIEW
    waiting = new(crew, blocked_by=[str(blocker.pk), blocker.pk])
    assert waiting.status == S.BLOCKED
    assert waiting.blocked_by == [blocker.pk]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"subject": "  "}, "subject is required"),
        ({"subject": "x" * 501}, "longer than 500"),
        ({"priority": 5000}, "priority must be an integer"),
        ({"priority": True}, "priority must be an integer"),
        ({"blocked_by": ["T-001"]}, "is not a task id"),
        ({"task_type": "no spaces"}, "task_type"),
    ],
)
def test_create_refuses_bad_input(crew, extra, message):
    args = {"subject": "Do it", **extra}
    with pytest.raises(BoardError, match=message) as refused:
        board.create_task(crew.team, actor=crew.as_lead, **args)
    assert refused.value.code == "invalid"
    assert not Task.objects.for_tenant(crew.team.tenant).exists()


def test_blockers_must_be_open_tasks_of_the_same_team(crew, tenant_a, tenant_b):
    done = running(crew)
    board.complete(crew.team, done.pk, result="ok", actor=crew.as_alice)
    with pytest.raises(BoardError, match="already completed"):
        new(crew, blocked_by=[done.pk])
    other = make_crew(tenant_a, "Other")
    foreign = board.create_task(other.team, actor=other.as_lead, subject="theirs")
    with pytest.raises(BoardError, match=r"no task .* on this team's board"):
        new(crew, blocked_by=[foreign.pk])
    far = make_crew(tenant_b, "Far")
    far_task = board.create_task(far.team, actor=far.as_lead, subject="far away")
    with pytest.raises(BoardError, match=r"no task .* on this team's board"):
        new(crew, blocked_by=[far_task.pk])


def test_an_owner_must_be_a_member_and_an_archived_team_takes_no_tasks(crew, tenant_a):
    outsider = make_crew(tenant_a, "Else").alice
    with pytest.raises(BoardError, match="not a member"):
        new(crew, owner=outsider)
    from apps.teams import services
    from apps.tenants.actors import Actor

    services.team_archive(actor=Actor.system(tenant_a), team=crew.team)
    with pytest.raises(BoardError, match="archived"):
        new(crew)


# --- claim, assign, complete --------------------------------------------------------------------------------


def test_claim_takes_an_unassigned_pending_task_once(crew):
    task = new(crew)
    claimed = board.claim(crew.team, task.pk, agent=crew.alice, actor=crew.as_alice)
    assert (claimed.status, claimed.owner_id) == (S.IN_PROGRESS, crew.alice.pk)
    assert claimed.lock_expires_at is not None
    assert claimed.locked_at is not None
    assert claimed.lock_expires_at - claimed.locked_at == timedelta(minutes=60)
    assert claimed.started_at is not None
    assert last_event(task) == ("claimed", "agent", crew.alice.key, None)
    with pytest.raises(BoardError, match="the task is in_progress, not pending"):
        board.claim(crew.team, task.pk, agent=crew.bob, actor=crew.as_bob)


def test_an_assigned_task_is_not_claimable_and_a_non_member_cannot_claim(crew, tenant_a):
    task = new(crew, owner=crew.bob)
    with pytest.raises(BoardError, match=f"assigned to {crew.bob.key}"):
        board.claim(crew.team, task.pk, agent=crew.alice, actor=crew.as_alice)
    stranger = make_crew(tenant_a, "Strangers").alice
    with pytest.raises(BoardError, match="not a member") as refused:
        board.claim(crew.team, new(crew).pk, agent=stranger, actor=BoardActor.of_agent(stranger))
    assert refused.value.code == "forbidden"


def test_assign_and_complete(crew):
    task = new(crew)
    assigned = board.assign(crew.team, task.pk, agent=crew.bob, actor=crew.as_lead)
    assert (assigned.status, assigned.owner_id) == (S.IN_PROGRESS, crew.bob.pk)
    with pytest.raises(BoardError, match="result is required"):
        board.complete(crew.team, task.pk, result=" ", actor=crew.as_bob)
    done = board.complete(crew.team, task.pk, result="Report written.", actor=crew.as_bob)
    assert (done.status, done.result, done.lock_expires_at) == (S.COMPLETED, "Report written.", None)
    assert [e[0] for e in events_of(task)] == ["created", "assigned", "completed"]
    with pytest.raises(BoardError, match="the task is completed, not in_progress"):
        board.complete(crew.team, task.pk, result="again", actor=crew.as_bob)


def test_another_teams_task_is_not_found(crew, tenant_a, tenant_b):
    mine = new(crew)
    other = make_crew(tenant_a, "Other")
    far = make_crew(tenant_b, "Far")
    for team in (other, far):
        with pytest.raises(BoardError, match="not found") as refused:
            board.claim(team.team, mine.pk, agent=team.alice, actor=team.as_alice)
        assert refused.value.code == "not_found"
    assert status(mine) == S.PENDING
    with pytest.raises(BoardError, match="invalid task_id"):
        board.get_task(crew.team, "3")


# --- terminal statuses unblock dependents -------------------------------------------------------------------


def _finish(crew: Crew, task: Task, how: str) -> None:
    if how == "complete":
        board.complete(crew.team, task.pk, result="done", actor=crew.as_alice)
    elif how == "fail":
        board.fail(crew.team, task.pk, message="broke", actor=BoardActor.system("post_turn"))
    elif how == "cancel":
        board.cancel(crew.team, task.pk, reason="not needed", actor=crew.as_lead)
    elif how == "reject":
        board.review(crew.team, task.pk, actor=crew.as_alice)
        board.reject(crew.team, task.pk, reason="wrong approach", actor=crew.as_lead)
    elif how == "blocker":
        board.comment(crew.team, task.pk, actor=crew.as_alice, text="no access to the repo", kind="blocker")


@pytest.mark.parametrize("how", ["complete", "fail", "cancel", "reject", "blocker"])
def test_every_terminal_status_unblocks_dependents(crew, how):
    first, second = running(crew), running(crew, subject="other blocker")
    both = new(crew, subject="needs both", blocked_by=[first.pk, second.pk])
    only_first = new(crew, subject="needs first", blocked_by=[first.pk])
    _finish(crew, first, how)
    assert status(only_first) == S.PENDING
    assert last_event(only_first) == ("unblocked", *events_of(first)[-1][1:3], {"blocker": str(first.pk)})
    assert status(both) == S.BLOCKED
    assert Task.objects.for_tenant(crew.team.tenant).get(pk=both.pk).blocked_by == [second.pk]
    board.complete(crew.team, second.pk, result="ok", actor=crew.as_alice)
    assert status(both) == S.PENDING


def test_fail_records_the_reason_and_pending_failures(crew):
    task = running(crew)
    failed = board.fail(crew.team, task.pk, message="the build broke", actor=BoardActor.system("post_turn"))
    assert failed.result == "FAILED: the build broke"
    assert last_event(task) == ("failed", "system", "post_turn", {"reason": "the build broke"})
    pending = new(crew)
    with pytest.raises(BoardError, match="not in_progress"):
        board.fail(crew.team, pending.pk, message="x", actor=crew.as_lead)
    assert (
        board.fail(crew.team, pending.pk, message="bad blocked_by", actor=crew.as_lead, pending=True).status
        == S.FAILED
    )


def test_cancel_works_from_any_open_status_but_not_twice(crew):
    for task in (new(crew), running(crew), new(crew, require_approval=True)):
        cancelled = board.cancel(crew.team, task.pk, reason="", actor=crew.as_lead)
        assert (cancelled.status, cancelled.result) == (S.CANCELLED, "Cancelled")
    with pytest.raises(BoardError, match="the task is cancelled"):
        board.cancel(crew.team, task.pk, reason="again", actor=crew.as_lead)


# --- review, approval, retry --------------------------------------------------------------------------------


def test_approving_reviewed_work_completes_it(crew):
    task = running(crew)
    board.review(crew.team, task.pk, actor=crew.as_alice)
    approved = board.approve(crew.team, task.pk, actor=crew.as_lead)
    assert approved.status == S.COMPLETED
    assert [e[0] for e in events_of(task)][-2:] == ["reviewed", "approved"]


def test_approving_a_task_that_never_ran_makes_it_pending_or_blocked(crew):
    plain = new(crew, require_approval=True)
    assert board.approve(crew.team, plain.pk, actor=crew.as_lead).status == S.PENDING
    blocker = running(crew)
    waiting = new(crew, require_approval=True, blocked_by=[blocker.pk])
    assert waiting.status == S.IN_REVIEW
    assert board.approve(crew.team, waiting.pk, actor=crew.as_lead).status == S.BLOCKED
    board.complete(crew.team, blocker.pk, result="ok", actor=crew.as_alice)
    assert status(waiting) == S.PENDING
    with pytest.raises(BoardError, match="not in_review"):
        board.approve(crew.team, plain.pk, actor=crew.as_lead)


def test_retry_works_on_completed_failed_and_stale_tasks(crew):
    done = running(crew)
    board.complete(crew.team, done.pk, result="v1", actor=crew.as_alice)
    again = board.reset(crew.team, done.pk, actor=crew.as_lead, note="needs a second pass")
    assert (again.status, again.result, again.owner_id) == (S.PENDING, "", crew.alice.pk)
    assert last_event(done) == ("retried", "agent", crew.lead.key, {"reason": "needs a second pass"})
    with pytest.raises(BoardError, match="the task is pending"):
        board.reset(crew.team, done.pk, actor=crew.as_lead)


def test_progress_never_goes_backwards_and_renews_the_lock(crew):
    task = running(crew)
    before = Task.objects.for_tenant(task.tenant).get(pk=task.pk).lock_expires_at
    assert (
        board.progress(crew.team, task.pk, percent=40, step="half", actor=crew.as_alice).progress_percent
        == 40
    )
    kept = board.progress(crew.team, task.pk, percent=10, step="oops", actor=crew.as_alice)
    assert (kept.progress_percent, kept.progress_step) == (40, "oops")
    assert before is not None
    assert kept.lock_expires_at is not None
    assert kept.lock_expires_at >= before
    assert last_event(task) == (
        "progress",
        "agent",
        crew.alice.key,
        {"progress_percent": 40, "progress_step": "oops"},
    )
    bad_values: tuple[Any, ...] = (-1, 101, True, "50")  # what a model may send
    for bad in bad_values:
        with pytest.raises(BoardError, match="percent must be 0-100"):
            board.progress(crew.team, task.pk, percent=bad, step="", actor=crew.as_alice)
    board.complete(crew.team, task.pk, result="ok", actor=crew.as_alice)
    with pytest.raises(BoardError, match="the task is completed"):
        board.progress(crew.team, task.pk, percent=90, step="late", actor=crew.as_alice)


def test_update_changes_text_and_priority_never_status(crew):
    blocker = new(crew)
    task = new(crew)
    updated = board.update(
        crew.team, task.pk, actor=crew.as_lead, priority=7, subject="Sharper", blocked_by=[blocker.pk]
    )
    assert (updated.priority, updated.subject, updated.status, updated.blocked_by) == (
        7,
        "Sharper",
        S.PENDING,
        [blocker.pk],
    )
    assert last_event(task) == (
        "updated",
        "agent",
        crew.lead.key,
        {"fields": ["blocked_by", "priority", "subject"]},
    )
    with pytest.raises(BoardError, match="no updates provided"):
        board.update(crew.team, task.pk, actor=crew.as_lead)
    with pytest.raises(BoardError, match="cannot wait on itself"):
        board.update(crew.team, task.pk, actor=crew.as_lead, blocked_by=[task.pk])


# --- comments, blockers, escalation -------------------------------------------------------------------------


def test_a_note_counts_and_is_audited_with_a_preview(crew):
    task = new(crew)
    outcome = board.comment(crew.team, task.pk, actor=crew.as_alice, text="x" * 600)
    assert not outcome.failed
    assert outcome.task.comment_count == 1
    event = last_event(task)
    assert event[0] == "commented"
    assert event[3] == {"comment_text": "x" * 500 + "…", "comment_type": "note"}
    with pytest.raises(BoardError, match="longer than 10000 bytes"):
        board.comment(crew.team, task.pk, actor=crew.as_alice, text="é" * 5001)
    with pytest.raises(BoardError, match="text is required"):
        board.comment(crew.team, task.pk, actor=crew.as_alice, text=" ")


def test_a_blocker_fails_an_in_progress_task_and_escalates(crew):
    task = running(crew)
    outcome = board.comment(
        crew.team, task.pk, actor=crew.as_alice, text="the API key is missing", kind="blocker"
    )
    assert outcome.failed
    assert outcome.task.status == S.FAILED
    assert outcome.task.result == "FAILED: Blocked: the API key is missing"
    assert "auto-failed due to blocker. Leader has been notified" in outcome.message
    escalation = Escalation.objects.for_tenant(task.tenant).get(task=task)
    assert (escalation.state, escalation.member_id, escalation.notified_lead) == ("open", crew.alice.pk, True)
    assert [e[0] for e in events_of(task)][-2:] == ["commented", "failed"]
    assert last_event(task)[3] == {"reason": "Blocked: the API key is missing"}
    board.reset(crew.team, task.pk, actor=crew.as_lead)
    escalation.refresh_from_db()
    assert escalation.state == "retried"


def test_blocker_escalation_can_be_turned_off_per_team(tenant_a):
    crew = make_crew(tenant_a, "Quiet", blocker_escalation={"enabled": False})
    task = running(crew)
    outcome = board.comment(crew.team, task.pk, actor=crew.as_alice, text="stuck", kind="blocker")
    assert outcome.failed
    assert "Escalation to the leader is turned off" in outcome.message
    assert Escalation.objects.for_tenant(tenant_a).get(task=task).notified_lead is False


def test_a_blocker_on_a_task_not_in_progress_only_saves_the_comment(crew):
    task = new(crew)
    outcome = board.comment(crew.team, task.pk, actor=crew.as_alice, text="stuck", kind="blocker")
    assert not outcome.failed
    assert "no escalation needed" in outcome.message
    assert status(task) == S.PENDING
    assert not Escalation.objects.for_tenant(task.tenant).exists()


def test_the_blocker_reason_is_cut_at_500_characters(crew):
    task = running(crew)
    outcome = board.comment(crew.team, task.pk, actor=crew.as_alice, text="y" * 900, kind="blocker")
    data = last_event(task)[3]
    assert data is not None
    reason = data["reason"]
    assert reason == ("Blocked: " + "y" * 900)[:500] + "…"
    assert outcome.task.result == "FAILED: " + reason


# --- attachments and deletion -------------------------------------------------------------------------------


def test_attach_is_idempotent_and_audited(crew):
    task = new(crew)
    _, created = board.attach(crew.team, task.pk, path="reports/q3.md", actor=crew.as_alice)
    _, again = board.attach(crew.team, task.pk, path="reports/q3.md", actor=crew.as_alice)
    assert (created, again) == (True, False)
    assert Task.objects.for_tenant(task.tenant).get(pk=task.pk).attachment_count == 1
    assert TaskAttachment.objects.for_tenant(task.tenant).filter(task=task).count() == 1
    assert [e[0] for e in events_of(task)].count("attachment_added") == 1


def test_only_finished_tasks_are_deleted_and_their_history_stays(crew):
    task = new(crew)
    with pytest.raises(BoardError, match="only completed, failed or cancelled"):
        board.delete(crew.team, task.pk, actor=BoardActor.human("ops@example.com"))
    board.cancel(crew.team, task.pk, reason="dup", actor=crew.as_lead)
    board.delete(crew.team, task.pk, actor=BoardActor.human("ops@example.com"))
    assert not Task.objects.for_tenant(task.tenant).filter(pk=task.pk).exists()
    trail = (
        TaskEvent.objects.for_tenant(task.tenant)
        .filter(task_identifier=task.identifier)
        .order_by("created_at", "id")
    )
    assert [e.event_type for e in trail] == ["created", "cancelled", "deleted"]
    deleted = trail.last()
    assert deleted is not None
    assert (deleted.actor_type, deleted.actor_id) == ("human", "ops@example.com")


# --- the ticker's sweeps ------------------------------------------------------------------------------------


def _age(task: Task, **delta: float) -> None:
    Task.objects.for_tenant(task.tenant).filter(pk=task.pk).update(
        updated_at=timezone.now() - timedelta(**delta)
    )


def test_sweeps_touch_only_the_tenant_they_are_given(crew, tenant_a, tenant_b):
    far = make_crew(tenant_b, "Far")
    mine, theirs = running(crew), running(far)
    for task in (mine, theirs):
        Task.objects.for_tenant(task.tenant).filter(pk=task.pk).update(
            lock_expires_at=timezone.now() - timedelta(minutes=1)
        )
    recovered = board.recover_expired_locks(tenant_a)
    assert [t.pk for t in recovered] == [mine.pk]
    assert (status(mine), status(theirs)) == (S.PENDING, S.IN_PROGRESS)
    assert last_event(mine) == ("recovered", "system", "ticker", None)
    assert Task.objects.for_tenant(tenant_a).get(pk=mine.pk).owner_id == crew.alice.pk


def test_stale_pending_after_two_hours_and_in_review_after_four(crew):
    old_pending, fresh_pending = new(crew), new(crew)
    old_review, young_review = new(crew, require_approval=True), new(crew, require_approval=True)
    _age(old_pending, hours=2, minutes=1)
    _age(fresh_pending, hours=1, minutes=59)
    _age(old_review, hours=4, minutes=1)
    _age(young_review, hours=3)
    stale = {t.pk for t in board.mark_stale(crew.team.tenant)}
    assert stale == {old_pending.pk, old_review.pk}
    assert last_event(old_pending) == ("stale", "system", "ticker", None)
    assert board.reset(crew.team, old_pending.pk, actor=crew.as_lead).status == S.PENDING


def test_orphaned_blocked_tasks_become_pending(crew):
    blocker = new(crew)
    waiting = new(crew, blocked_by=[blocker.pk])
    board.cancel(crew.team, blocker.pk, reason="x", actor=crew.as_lead)  # unblocks at once
    assert status(waiting) == S.PENDING
    gone = new(crew)
    orphan = new(crew, blocked_by=[gone.pk])
    # The blocker disappears without the transition that would unblock (e.g. removed by hand).
    Task.objects.for_tenant(gone.tenant).filter(pk=gone.pk).delete()
    assert [t.pk for t in board.fix_orphaned_blocked(crew.team.tenant)] == [orphan.pk]
    fixed = Task.objects.for_tenant(orphan.tenant).get(pk=orphan.pk)
    assert (fixed.status, fixed.blocked_by) == (S.PENDING, [])


def test_task_events_carry_the_tasks_tenant(crew, tenant_a):
    task = running(crew)
    board.complete(crew.team, task.pk, result="ok", actor=crew.as_alice)
    assert set(
        TaskEvent.objects.for_tenant(tenant_a).filter(task=task).values_list("tenant_id", flat=True)
    ) == {tenant_a.pk}
    assert TeamMember.objects.for_tenant(tenant_a).filter(team=crew.team).count() == 3
