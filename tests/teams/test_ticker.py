"""The team ticker: its django-q2 schedule, follow-up reminders, and every sweep run per tenant — one
tenant's run never touches another's tasks — each change audited as a task event."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message
from django.utils import timezone
from django_q.models import Schedule

from apps.realtime import events
from apps.teams import board, tasks
from apps.teams.models import Task, TaskEvent
from tests.teams.conftest import Crew, make_crew

pytestmark = pytest.mark.django_db

S = Task.Status


def new(crew: Crew, subject: str = "work", **extra: Any) -> Task:
    return board.create_task(crew.team, actor=crew.as_lead, subject=subject, **extra)


def reload(task: Task) -> Task:
    return Task.objects.for_tenant(task.tenant).get(pk=task.pk)


def event_types(task: Task) -> list[str]:
    return list(
        TaskEvent.objects.for_tenant(task.tenant)
        .filter(task_id=task.pk)
        .order_by("created_at", "id")
        .values_list("event_type", flat=True)
    )


def asking(crew: Crew, question: str = "Which region?") -> Task:
    task = new(crew, channel="telegram", chat_id="c1")
    board.claim(crew.team, task.pk, agent=crew.alice, actor=crew.as_alice)
    return board.ask_user(crew.team, task.pk, question=question, actor=crew.as_alice)


def make_due(task: Task) -> None:
    Task.objects.for_tenant(task.tenant).filter(pk=task.pk).update(
        followup_at=timezone.now() - timedelta(seconds=1)
    )


@pytest.mark.usefixtures("registered_schedules")
def test_the_schedule_is_registered_every_five_minutes():
    schedule = Schedule.objects.get(name=tasks.TICKER_SCHEDULE)
    assert (schedule.func, schedule.schedule_type, schedule.minutes, schedule.repeats) == (
        "apps.teams.tasks.tick",
        "I",
        5,
        -1,
    )


@pytest.mark.usefixtures("registered_schedules")
def test_a_changed_interval_reaches_the_schedule(settings):
    settings.TOOLGATE_TEAM_TICKER_SECONDS = 90
    tasks.tick()
    assert Schedule.objects.get(name=tasks.TICKER_SCHEDULE).minutes == 2


# --- follow-ups ---------------------------------------------------------------------------------------------


def test_reminders_count_up_to_the_maximum(tenant_a):
    crew = make_crew(tenant_a, "Askers", followup_interval_minutes=10, followup_max_reminders=2)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, board.topic(crew.team)), channel)
    task = asking(crew)
    assert board.process_followups(tenant_a) == []  # not due yet

    make_due(task)
    assert [t.pk for t in board.process_followups(tenant_a)] == [task.pk]
    task = reload(task)
    assert task.followup_count == 1
    assert task.followup_at is not None
    assert timedelta(minutes=9) < task.followup_at - timezone.now() <= timedelta(minutes=10)
    first = TaskEvent.objects.for_tenant(tenant_a).filter(task_id=task.pk).order_by("created_at", "id").last()
    assert first is not None
    assert (first.event_type, first.actor_type, first.actor_id) == ("updated", "system", "ticker")
    assert first.data == {
        "followup": "reminder",
        "reminder": 1,
        "followup_max": 2,
        "text": "Reminder (1/2): Which region?",
    }

    make_due(task)
    board.process_followups(tenant_a)
    task = reload(task)
    assert (task.followup_count, task.followup_at) == (2, None)  # the maximum: no next reminder
    make_due(task)
    assert board.process_followups(tenant_a) == []
    assert reload(task).followup_count == 2

    rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
    reminders = [layer.deserialize(bytes(r))["event"] for r in rows]
    reminders = [e["data"] for e in reminders if e["type"] == "task.reminder"]
    assert [(r["text"], r["channel"], r["chat_id"], r["agent"]) for r in reminders] == [
        ("Reminder (1/2): Which region?", "telegram", "c1", crew.alice.key),
        ("Reminder (2/2): Which region?", "telegram", "c1", crew.alice.key),
    ]


def test_unlimited_reminders_and_finished_tasks(crew, tenant_a):
    task = asking(crew, "Ready?")
    make_due(task)
    board.process_followups(tenant_a)
    event = TaskEvent.objects.for_tenant(tenant_a).filter(task_id=task.pk).order_by("created_at", "id").last()
    assert event is not None
    assert event.data is not None
    assert event.data["text"] == "Reminder (1): Ready?"
    assert reload(task).followup_at is not None
    board.complete(crew.team, task.pk, result="ok", actor=crew.as_alice)
    assert reload(task).followup_at is None
    assert board.process_followups(tenant_a) == []


# --- every sweep, per tenant --------------------------------------------------------------------------------


def stage(crew: Crew) -> dict[str, Task]:
    """One task for each rule of the ticker, all due."""
    tenant = crew.team.tenant
    long_ago = timezone.now() - timedelta(hours=5)
    expired = new(crew, "expired lock")
    board.claim(crew.team, expired.pk, agent=crew.bob, actor=crew.as_bob)
    Task.objects.for_tenant(tenant).filter(pk=expired.pk).update(
        lock_expires_at=timezone.now() - timedelta(minutes=1)
    )
    idle = new(crew, "idle pending")
    reviewed = new(crew, "forgotten review", require_approval=True)
    Task.objects.for_tenant(tenant).filter(pk__in=[idle.pk, reviewed.pk]).update(updated_at=long_ago)
    gone = new(crew, "blocker")
    orphan = new(crew, "orphan", blocked_by=[gone.pk])
    Task.objects.for_tenant(tenant).filter(pk=gone.pk).update(status=S.CANCELLED)
    followup = asking(crew)
    make_due(followup)
    return {"expired": expired, "idle": idle, "reviewed": reviewed, "orphan": orphan, "followup": followup}


def test_one_tenants_sweep_never_touches_another(tenant_a, tenant_b):
    ours = stage(make_crew(tenant_a))
    theirs = stage(make_crew(tenant_b))
    before = {name: (reload(t).status, event_types(t)) for name, t in theirs.items()}

    report = tasks.tick_tenant(tenant_a)

    assert (report.reminders, report.recovered, report.stale, report.unblocked) == (1, 1, 2, 1)
    assert reload(ours["expired"]).status in (S.PENDING, S.IN_PROGRESS)  # recovered, then sent out again
    assert "recovered" in event_types(ours["expired"])
    assert (reload(ours["idle"]).status, event_types(ours["idle"])[-1]) == (S.STALE, "stale")
    assert (reload(ours["reviewed"]).status, event_types(ours["reviewed"])[-1]) == (S.STALE, "stale")
    assert (reload(ours["orphan"]).status, event_types(ours["orphan"])[-1]) == (S.PENDING, "unblocked")
    assert reload(ours["followup"]).followup_count == 1
    for event in TaskEvent.objects.for_tenant(tenant_a).filter(actor_id="ticker"):
        assert event.tenant_id == tenant_a.pk
    assert {name: (reload(t).status, event_types(t)) for name, t in theirs.items()} == before
    assert reload(theirs["followup"]).followup_count == 0

    reports = tasks.tick()
    assert set(reports) == {"tenant-b"}  # A has nothing left to do; B gets its own run
    assert reload(theirs["idle"]).status == S.STALE
    assert reload(theirs["followup"]).followup_count == 1


def test_recovered_tasks_go_back_to_their_owner(crew, tenant_a):
    task = new(crew, "x", owner=crew.alice)
    tasks.tick_tenant(tenant_a)  # the first round sends it out
    assert reload(task).status == S.IN_PROGRESS
    Task.objects.for_tenant(tenant_a).filter(pk=task.pk).update(
        lock_expires_at=timezone.now() - timedelta(minutes=1)
    )
    report = tasks.tick_tenant(tenant_a)
    assert (report.recovered, report.dispatched) == (1, 1)
    assert event_types(task)[-3:] == ["recovered", "assigned", "dispatched"]
    assert reload(task).metadata["dispatch_count"] == 2


def test_archived_teams_are_left_alone(crew, tenant_a):
    staged = stage(crew)
    from apps.teams import services
    from apps.tenants.actors import Actor

    services.team_archive(actor=Actor.system(tenant_a), team=crew.team)
    before = {name: event_types(t) for name, t in staged.items()}
    assert tasks.tick() == {}
    assert {name: event_types(t) for name, t in staged.items()} == before


def test_a_second_run_changes_nothing(crew, tenant_a):
    stage(crew)
    tasks.tick()
    count = TaskEvent.objects.for_tenant(tenant_a).count()
    assert tasks.tick() == {}
    assert TaskEvent.objects.for_tenant(tenant_a).count() == count
