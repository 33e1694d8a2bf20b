"""Scheduled jobs through the cron tool (POST /api/v1/runtime/execute): create, list, update, enable and
disable with their django-q2 schedules, a job fired by django-q2's own scheduler running the agent,
a skipped firing while the previous run works, run now, history, delete, and bad input."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.models import OrmQ, Schedule
from django_q.scheduler import scheduler

from apps.runs import tasks
from apps.runs.models import CronFiring, CronJob, Run
from tests.llm.fake_provider import chat_answer

pytestmark = pytest.mark.django_db


def cron(client, agent="bot", **args: Any) -> dict[str, Any]:
    body = {"agent": agent, "tool": "cron", "args": args, "context": {"user_id": "alice"}}
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_create_list_update_and_disable_keep_the_schedule_in_step(member_a, agent, tenant_a):
    made = cron(
        member_a, action="create", name="standup", schedule="0 9 * * 1-5", message="Post the standup."
    )
    assert made["is_error"] is False, made
    job = CronJob.objects.for_tenant(tenant_a).get()
    schedule = Schedule.objects.get(pk=job.q_schedule_id)
    assert (schedule.name, schedule.func, schedule.schedule_type, schedule.cron) == (
        f"cron:{job.pk}",
        "apps.runs.tasks.fire_cron",
        Schedule.CRON,
        "0 9 * * 1-5",
    )
    assert schedule.args == repr((str(tenant_a.pk), str(job.pk)))
    assert schedule.next_run.hour == 9
    assert job.user_id == "alice"

    listed = cron(member_a, action="list")["for_llm"]
    assert "“standup”: 0 9 * * 1-5 (enabled" in listed

    cron(member_a, action="update", id="standup", schedule="every 15m")
    schedule.refresh_from_db()
    assert (schedule.schedule_type, schedule.minutes) == (Schedule.MINUTES, 15)

    cron(member_a, action="disable", id=str(job.pk))
    assert not Schedule.objects.filter(name=f"cron:{job.pk}").exists()
    assert "(disabled" in cron(member_a, action="list")["for_llm"]
    cron(member_a, action="enable", id="standup")
    assert Schedule.objects.filter(name=f"cron:{job.pk}").count() == 1

    cron(member_a, action="delete", id="standup")
    assert not CronJob.objects.for_tenant(tenant_a).exists()
    assert not Schedule.objects.filter(name__startswith="cron:").exists()


@pytest.mark.django_db(transaction=True)  # django-q2's scheduler manages its own connection
def test_a_job_fires_on_schedule_and_runs_the_agent(member_a, agent, provider, fake, tenant_a):
    fake.chat = lambda request: chat_answer(f"Report: {request['messages'][-1]['content']}")
    cron(member_a, action="create", name="report", schedule="every 5m", message="Summarise the day.")
    job = CronJob.objects.for_tenant(tenant_a).get()
    Schedule.objects.filter(pk=job.q_schedule_id).update(next_run=timezone.now() - timedelta(seconds=1))

    scheduler(broker=get_broker())  # django-q2's scheduler, as the cluster calls it

    [queued] = [q for q in OrmQ.objects.all() if q.task["func"] == "apps.runs.tasks.fire_cron"]
    assert queued.task["args"] == (str(tenant_a.pk), str(job.pk))
    assert Schedule.objects.get(pk=job.q_schedule_id).next_run > timezone.now()  # the next time is set
    tasks.fire_cron(*queued.task["args"])  # the worker's call

    run = Run.objects.for_tenant(tenant_a).get()
    assert (run.kind, run.status, run.user_id, run.session.key) == (
        "cron",
        "completed",
        "alice",
        f"cron:{job.pk}",
    )
    assert run.output == "Report: Summarise the day."
    job.refresh_from_db()
    assert job.fire_count == 1
    assert job.last_fired_at is not None
    history = cron(member_a, action="history", id="report")["for_llm"]
    assert "started" in history
    assert "Report: Summarise the day." in history


def test_a_firing_is_skipped_while_the_previous_run_works(member_a, agent, tenant_a):
    cron(member_a, action="create", name="slow", schedule="every 1m", message="Work.")
    job = CronJob.objects.for_tenant(tenant_a).get()
    started = cron(member_a, action="run", id="slow")
    assert started["is_error"] is False
    assert Run.objects.for_tenant(tenant_a).get().status == "queued"  # its worker has not taken it yet
    tasks.fire_cron(str(tenant_a.pk), str(job.pk))
    firings = list(
        CronFiring.objects.for_tenant(tenant_a).order_by("created_at").values_list("status", "manual")
    )
    assert firings == [("started", True), ("skipped", False)]
    assert Run.objects.for_tenant(tenant_a).count() == 1
    assert "skipped" in cron(member_a, action="history", id="slow")["for_llm"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"action": "create", "schedule": "61 * * * *", "message": "x"}, "neither a five-field cron"),
        ({"action": "create", "schedule": "every 0m", "message": "x"}, "an interval from 1 minute"),
        ({"action": "create", "schedule": "every 5m"}, "message: is required"),
        ({"action": "create", "message": "x"}, "schedule: is required"),
        ({"action": "update", "id": "nope", "schedule": "every 5m"}, "no job 'nope'"),
        ({"action": "run"}, "id is required"),
        ({"action": "update", "id": "daily"}, "needs at least one of"),
    ],
)
def test_bad_cron_calls_are_clear_errors_with_nothing_changed(member_a, agent, tenant_a, args, expected):
    cron(member_a, action="create", name="daily", schedule="0 0 * * *", message="x")
    before = list(Schedule.objects.values_list("pk", "cron", "minutes"))
    answer = cron(member_a, **args)
    assert answer["is_error"] is True
    assert expected in answer["for_llm"]
    assert list(Schedule.objects.values_list("pk", "cron", "minutes")) == before
    assert CronJob.objects.for_tenant(tenant_a).count() == 1


def test_an_agent_sees_only_its_own_jobs(member_a, agent, tenant_a):
    from apps.accounts import services as tenant_services
    from apps.tenants.actors import Actor

    tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    cron(member_a, action="create", name="mine", schedule="every 5m", message="x")
    assert "no scheduled jobs" in cron(member_a, agent="other", action="list")["for_llm"]
    assert cron(member_a, agent="other", action="delete", id="mine")["is_error"] is True
    assert CronJob.objects.for_tenant(tenant_a).count() == 1


def test_the_cron_api_creates_runs_and_lists_firings(admin_a, member_a, agent, tenant_a):
    bad = admin_a.post(
        "/api/v1/cron/", {"agent": "bot", "name": "x", "schedule": "sometimes", "message": "m"}, format="json"
    )
    assert bad.status_code == 400
    assert "schedule" in bad.json()["error"]["details"]
    made = admin_a.post(
        "/api/v1/cron/",
        {"agent": "bot", "name": "digest", "schedule": "30 7 * * *", "message": "Digest."},
        format="json",
    )
    assert made.status_code == 201, made.content
    job = made.json()
    assert (job["schedule"], job["enabled"]) == ("30 7 * * *", True)
    assert job["next_run_at"] is not None
    duplicate = admin_a.post(
        "/api/v1/cron/",
        {"agent": "bot", "name": "digest", "schedule": "30 7 * * *", "message": "x"},
        format="json",
    )
    assert duplicate.status_code == 409
    started = admin_a.post(f"/api/v1/cron/{job['id']}/run")
    assert started.status_code == 202
    assert started.json()["status"] == "started"
    assert Run.objects.for_tenant(tenant_a).get().kind == "cron"
    again = admin_a.post(f"/api/v1/cron/{job['id']}/run")
    assert again.status_code == 409  # the first run has not finished
    firings = member_a.get(f"/api/v1/cron/{job['id']}/firings/").json()
    assert [f["status"] for f in firings] == ["skipped", "started"]
    off = admin_a.patch(f"/api/v1/cron/{job['id']}/", {"enabled": False}, format="json").json()
    assert (off["enabled"], off["next_run_at"]) == (False, None)
    assert [j["name"] for j in member_a.get("/api/v1/cron/?agent=bot").json()["results"]] == ["digest"]


from tests.messaging.conftest import allow_local, hook, webhook_channel  # noqa: E402, F401


def test_a_message_job_sends_its_text_to_a_channel(member_a, agent, hook, webhook_channel, tenant_a):  # noqa: F811
    webhook_channel()
    refused = cron(
        member_a,
        action="create",
        name="bad",
        schedule="every 5m",
        message="x",
        kind="message",
        channel="nope",
    )
    assert refused["is_error"] is True
    assert "no channel 'nope'" in refused["for_llm"]
    made = cron(
        member_a,
        action="create",
        name="standup",
        schedule="0 9 * * 1-5",
        message="Standup in 5 minutes.",
        kind="message",
        channel="hooks",
    )
    assert made["is_error"] is False, made
    job = CronJob.objects.for_tenant(tenant_a).get()

    tasks.fire_cron(str(tenant_a.pk), str(job.pk))

    [delivery] = hook.sent
    assert (delivery["text"], delivery["chat_id"], delivery["agent"]) == (
        "Standup in 5 minutes.",
        "general",
        "bot",
    )
    assert not Run.objects.for_tenant(tenant_a).exists()  # no agent turn for a message job
    firing = CronFiring.objects.for_tenant(tenant_a).get()
    assert (firing.status, firing.detail) == ("started", "sent to hooks")
    assert "sent to hooks" in cron(member_a, action="history", id="standup")["for_llm"]
