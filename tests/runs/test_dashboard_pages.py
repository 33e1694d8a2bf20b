"""The runs, sessions and scheduled-jobs pages of the dashboard through the Django test client: the runs
list and its filters, one run with its transcript (tool calls and results) and subagents, cancelling
after a confirmation; sessions with their paged history, archiving and deleting; scheduled jobs with
their form (creating a django-q2 schedule, refusals shown with nothing lost), switches, run now,
firings and deleting.

Personas (tests/dashboard/conftest.py): a viewer of tenant A sees none of it (403); a member reads
and cancels runs; an admin and an owner also change sessions and jobs; tenant B's owner, the outsider,
gets 404 for A's objects with nothing changed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django_q.models import Schedule

from apps.audit.models import AuditEvent
from apps.runs import cron, services
from apps.runs.models import CronFiring, CronJob, Run
from apps.sessions import services as session_services
from apps.sessions.models import Session
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api.tenant_state import tenant_state
from tests.dashboard.conftest import admin, bot, member, outsider, owner, viewer  # noqa: F401

pytestmark = pytest.mark.django_db

SECRET = "the vault opens with 4711"
LONG_RESULT = "line of output\n" * 300


def body(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


@pytest.fixture
def run(tenant_a: Tenant, bot: Agent) -> Run:  # noqa: F811
    """A run of ``bot`` whose transcript has a tool call, its (long) result and an answer."""
    system = Actor.system(tenant_a)
    made = services.run_create(actor=system, agent=bot, session_key="chat-1", message=f"Find {SECRET}")
    source = f"run:{made.pk}"
    session = made.session
    for role, fields in (
        ("user", {"content": f"Find {SECRET}"}),
        (
            "assistant",
            {
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": "notes.md"})},
                    }
                ],
            },
        ),
        ("tool", {"content": LONG_RESULT, "name": "read_file", "tool_call_id": "call_1"}),
        ("assistant", {"content": "The notes say hello."}),
    ):
        session_services.message_append(
            actor=system, session=session, role=role, source=source, audit=False, **fields
        )
    session_services.message_append(
        actor=system, session=session, role="user", content="another run's words", source="run:other"
    )
    return made


@pytest.fixture
def job(tenant_a: Tenant, bot: Agent) -> CronJob:  # noqa: F811
    return cron.job_create(
        actor=Actor.system(tenant_a), agent=bot, name="digest", schedule="0 9 * * 1-5", message="Summarise"
    )


def all_pages(run: Run, job: CronJob) -> list[str]:
    return [
        reverse("dashboard:runs"),
        reverse("dashboard:runs_detail", args=[run.pk]),
        reverse("dashboard:runs_sessions"),
        reverse("dashboard:runs_session", args=[run.session_id]),
        reverse("dashboard:cron"),
        reverse("dashboard:cron_job", args=[job.pk]),
    ]


def test_the_runs_list_shows_runs_newest_first_and_filters(member, tenant_a, run, bot):  # noqa: F811
    other = services.run_create(
        actor=Actor.system(tenant_a), agent=bot, session_key="cron:x", message="tick", kind=Run.Kind.CRON
    )
    page = body(member.get(reverse("dashboard:runs")))
    assert page.index(f'data-id="{other.pk}"') < page.index(f'data-id="{run.pk}"')
    assert "chat-1" in page
    assert "Find the vault" in page
    assert "data-runs-live" in page
    assert "runs-live-config" in page
    crons = body(member.get(reverse("dashboard:runs"), {"kind": "cron"}))
    assert str(other.pk) in crons
    assert str(run.pk) not in crons
    queued = body(member.get(reverse("dashboard:runs"), {"status": "completed"}))
    assert "No runs match these filters" in queued
    bad = body(member.get(reverse("dashboard:runs"), {"agent": "nobody"}))
    assert str(run.pk) not in bad
    assert "has-errors" in bad


def test_a_run_page_shows_its_transcript_with_tool_calls_and_results(member, run):  # noqa: F811
    page = body(member.get(reverse("dashboard:runs_detail", args=[run.pk])))
    transcript = page.split("data-transcript")[1].split("Subagents")[0]
    assert transcript.index('data-role="user"') < transcript.index('data-role="assistant"')
    assert 'data-field="tool-name">read_file<' in transcript
    assert "&quot;path&quot;: &quot;notes.md&quot;" in transcript
    assert 'data-field="tool-call-id">call_1<' in transcript
    assert '<details class="message-content"><summary>' in transcript  # the long result is folded
    assert f"({len(LONG_RESULT)} characters)" in transcript
    assert "The notes say hello." in transcript
    assert "another run&#x27;s words" not in page
    assert "Cancel run…" in page
    assert '"source": "run:' + str(run.pk) in page


def test_a_run_page_shows_its_subagents_as_a_tree(member, tenant_a, run, bot):  # noqa: F811
    system = Actor.system(tenant_a)
    child = services.run_create(
        actor=system, agent=bot, session_key="sub-1", message="look", kind=Run.Kind.SUBAGENT, parent=run
    )
    grandchild = services.run_create(
        actor=system, agent=bot, session_key="sub-1-a", message="deeper", kind=Run.Kind.SUBAGENT, parent=child
    )
    in_child_session = services.run_create(
        actor=system, agent=bot, session_key="sub-2", message="other", kind=Run.Kind.SUBAGENT
    )
    Session.objects.for_tenant(tenant_a).filter(pk=in_child_session.session_id).update(parent=run.session)
    unrelated = services.run_create(actor=system, agent=bot, session_key="elsewhere", message="no")
    tree = body(member.get(reverse("dashboard:runs_detail", args=[run.pk]))).split("data-subagents")[1]
    assert f'data-run-id="{child.pk}"' in tree
    assert f'data-run-id="{in_child_session.pk}"' in tree
    assert str(unrelated.pk) not in tree
    nested = tree.split(f'data-run-id="{child.pk}"')[1].split("</li>")[0]
    assert f'data-run-id="{grandchild.pk}"' in nested


def test_a_member_cancels_a_run_after_confirming(member, tenant_a, run):  # noqa: F811
    url = reverse("dashboard:runs_cancel", args=[run.pk])
    assert "Cancel run" in body(member.get(url))
    assert Run.objects.for_tenant(tenant_a).get(pk=run.pk).status == "queued"
    done = member.post(url)
    assert done.status_code == 302
    assert done.url == reverse("dashboard:runs_detail", args=[run.pk])
    assert Run.objects.for_tenant(tenant_a).get(pk=run.pk).status == "cancelled"
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="run.cancelled").exists()
    page = body(member.get(reverse("dashboard:runs_detail", args=[run.pk])))
    assert "Cancel run…" not in page
    again = member.post(url, follow=True)
    assert "already cancelled" in again.content.decode()


def test_sessions_list_filters_and_searches(member, tenant_a, run, bot):  # noqa: F811
    session_services.session_open(actor=Actor.system(tenant_a), agent=bot, key="support-42", user_id="alice")
    page = body(member.get(reverse("dashboard:runs_sessions")))
    assert "chat-1" in page
    assert "support-42" in page
    alice = body(member.get(reverse("dashboard:runs_sessions"), {"user": "alice"}))
    assert "support-42" in alice
    assert "chat-1" not in alice
    found = body(member.get(reverse("dashboard:runs_sessions"), {"q": "chat"}))
    assert "chat-1" in found
    assert "support-42" not in found
    archived = body(member.get(reverse("dashboard:runs_sessions"), {"status": "archived"}))
    assert "No sessions match these filters" in archived


def test_a_session_page_pages_its_history_and_links_relatives(member, tenant_a, run, bot):  # noqa: F811
    system = Actor.system(tenant_a)
    session = run.session
    for n in range(120):
        session_services.message_append(
            actor=system, session=session, role="user", content=f"msg-{n}-end", source="api", audit=False
        )
    child, _ = session_services.session_open(actor=system, agent=bot, key="child-s", parent=session)
    first = body(member.get(reverse("dashboard:runs_session", args=[session.pk])))
    assert first.count('class="transcript-message') == 100
    assert "Page 1 of 2" in first
    assert "msg-94-end" in first
    assert "msg-96-end" not in first
    second = body(member.get(reverse("dashboard:runs_session", args=[session.pk]), {"page": 2}))
    assert second.count('class="transcript-message') == 25
    assert "msg-119-end" in second
    assert reverse("dashboard:runs_session", args=[child.pk]) in first
    assert "Archive…" not in first
    assert "Delete…" not in first
    child_page = body(member.get(reverse("dashboard:runs_session", args=[child.pk])))
    assert f'href="{reverse("dashboard:runs_session", args=[session.pk])}" data-parent' in child_page


def test_an_admin_archives_unarchives_and_deletes_a_session(admin, tenant_a, run):  # noqa: F811
    session = run.session
    archive = reverse("dashboard:runs_session_archive", args=[session.pk])
    assert "Archive session" in body(admin.get(archive))
    assert Session.objects.for_tenant(tenant_a).get(pk=session.pk).status == "active"
    assert admin.post(archive).status_code == 302
    assert Session.objects.for_tenant(tenant_a).get(pk=session.pk).status == "archived"
    page = body(admin.get(reverse("dashboard:runs_session", args=[session.pk])))
    assert "Unarchive" in page
    assert admin.post(reverse("dashboard:runs_session_unarchive", args=[session.pk])).status_code == 302
    assert Session.objects.for_tenant(tenant_a).get(pk=session.pk).status == "active"

    delete = reverse("dashboard:runs_session_delete", args=[session.pk])
    assert "Delete session" in body(admin.get(delete))
    assert Session.objects.for_tenant(tenant_a).filter(pk=session.pk).exists()
    done = admin.post(delete)
    assert done.status_code == 302
    assert done.url == reverse("dashboard:runs_sessions")
    assert not Session.objects.for_tenant(tenant_a).filter(pk=session.pk).exists()
    assert not Run.objects.for_tenant(tenant_a).filter(pk=run.pk).exists()
    verbs = set(AuditEvent.objects.for_tenant(tenant_a).values_list("verb", flat=True))
    assert {"session.updated", "session.deleted"} <= verbs


def test_the_cron_form_creates_a_job_with_its_schedule(admin, tenant_a, bot):  # noqa: F811
    form = body(admin.get(reverse("dashboard:cron_create")))
    assert '<option value="bot">bot</option>' in form
    response = admin.post(
        reverse("dashboard:cron_create"),
        {"agent": "bot", "name": "morning", "schedule": "every 2h", "message": "Check in", "enabled": "on"},
    )
    assert response.status_code == 302
    job = CronJob.objects.for_tenant(tenant_a).get(name="morning")
    assert response.url == reverse("dashboard:cron_job", args=[job.pk])
    schedule = Schedule.objects.get(pk=job.q_schedule_id)
    assert (schedule.name, schedule.schedule_type, schedule.minutes) == (f"cron:{job.pk}", "I", 120)
    assert job.next_run_at is not None
    listing = body(admin.get(reverse("dashboard:cron")))
    assert "morning" in listing
    assert "every 2h" in listing
    assert "enabled" in listing


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"schedule": "every day at nine"}, "is neither a five-field cron expression"),
        ({"schedule": "every 0m"}, "an interval from 1 minute"),
        ({"name": "digest"}, "already has a job named"),
        ({"message": ""}, "This field is required"),
        ({"agent": "nobody"}, "Select a valid choice"),
    ],
)
def test_a_refused_cron_form_shows_why_and_keeps_the_input(admin, tenant_a, job, fields, error):  # noqa: F811
    before = tenant_state(tenant_a)
    schedules = Schedule.objects.count()
    data = {
        "agent": "bot",
        "name": "evening",
        "schedule": "0 18 * * *",
        "message": "Wrap up the day",
    } | fields
    response = admin.post(reverse("dashboard:cron_create"), data)
    assert response.status_code == 400
    page = response.content.decode()
    assert error in page
    for value in data.values():
        if value and value not in {"bot", "nobody"}:
            assert value in page  # nothing typed is lost
    assert tenant_state(tenant_a) == before
    assert Schedule.objects.count() == schedules


def test_an_admin_edits_switches_runs_and_deletes_a_job(admin, tenant_a, job):  # noqa: F811
    edit = reverse("dashboard:cron_edit", args=[job.pk])
    assert "Summarise" in body(admin.get(edit))
    refused = admin.post(edit, {"name": "digest", "schedule": "61 * * * *", "message": "Summarise"})
    assert refused.status_code == 400
    assert "61 * * * *" in refused.content.decode()
    saved = admin.post(
        edit, {"name": "digest", "schedule": "every 30m", "message": "Shorter", "enabled": "on"}
    )
    assert saved.status_code == 302
    job.refresh_from_db()
    assert (job.schedule, job.message) == ("every 30m", "Shorter")
    assert Schedule.objects.get(pk=job.q_schedule_id).minutes == 30

    assert admin.post(reverse("dashboard:cron_enabled", args=[job.pk]), {"enabled": "0"}).status_code == 302
    job.refresh_from_db()
    assert not job.enabled
    assert job.q_schedule_id is None
    assert admin.post(reverse("dashboard:cron_enabled", args=[job.pk]), {"enabled": "1"}).status_code == 302
    job.refresh_from_db()
    assert job.enabled
    assert Schedule.objects.filter(pk=job.q_schedule_id).exists()

    ran = admin.post(reverse("dashboard:cron_run", args=[job.pk]), follow=True)
    firing = CronFiring.objects.for_tenant(tenant_a).get(job=job)
    assert firing.manual
    assert firing.status == "started"
    assert firing.run is not None
    assert firing.run.kind == "cron"
    assert firing.run.session.key == f"cron:{job.pk}"
    page = ran.content.decode()
    assert "started" in page
    assert reverse("dashboard:runs_detail", args=[firing.run.pk]) in page
    skipped = admin.post(reverse("dashboard:cron_run", args=[job.pk]), follow=True)
    assert "did not start: the previous run of this job is still at work" in skipped.content.decode()

    delete = reverse("dashboard:cron_delete", args=[job.pk])
    assert "Delete job" in body(admin.get(delete))
    assert CronJob.objects.for_tenant(tenant_a).filter(pk=job.pk).exists()
    schedule_id = job.q_schedule_id
    assert admin.post(delete).status_code == 302
    assert not CronJob.objects.for_tenant(tenant_a).filter(pk=job.pk).exists()
    assert not Schedule.objects.filter(pk=schedule_id).exists()


def test_viewers_see_none_of_it(viewer, tenant_a, run, job):  # noqa: F811
    before = tenant_state(tenant_a)
    for url in all_pages(run, job):
        assert viewer.get(url).status_code == 403
    assert viewer.post(reverse("dashboard:runs_cancel", args=[run.pk])).status_code == 403
    assert tenant_state(tenant_a) == before


def test_members_read_and_cancel_but_change_no_session_or_job(member, tenant_a, run, job):  # noqa: F811
    for url in all_pages(run, job):
        assert member.get(url).status_code == 200, url
    assert "New scheduled job" not in body(member.get(reverse("dashboard:cron")))
    assert "Run now" not in body(member.get(reverse("dashboard:cron_job", args=[job.pk])))
    before = tenant_state(tenant_a)
    session = run.session_id
    for url, data in (
        (reverse("dashboard:runs_session_archive", args=[session]), {}),
        (reverse("dashboard:runs_session_unarchive", args=[session]), {}),
        (reverse("dashboard:runs_session_delete", args=[session]), {}),
        (
            reverse("dashboard:cron_create"),
            {"agent": "bot", "name": "x", "schedule": "every 5m", "message": "m"},
        ),
        (
            reverse("dashboard:cron_edit", args=[job.pk]),
            {"name": "x", "schedule": "every 5m", "message": "m"},
        ),
        (reverse("dashboard:cron_enabled", args=[job.pk]), {"enabled": "0"}),
        (reverse("dashboard:cron_run", args=[job.pk]), {}),
        (reverse("dashboard:cron_delete", args=[job.pk]), {}),
    ):
        assert member.post(url, data).status_code == 403, url
    assert member.get(reverse("dashboard:cron_create")).status_code == 403
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize("persona", ["admin", "owner"])
def test_admins_and_owners_see_the_controls(request, persona, run, job):
    client: Client = request.getfixturevalue(persona)
    for url in all_pages(run, job):
        assert client.get(url).status_code == 200, url
    assert "Delete…" in body(client.get(reverse("dashboard:runs_session", args=[run.session_id])))
    assert "Run now" in body(client.get(reverse("dashboard:cron_job", args=[job.pk])))
    assert client.get(reverse("dashboard:cron_create")).status_code == 200


def test_the_outsider_gets_404_everywhere_with_nothing_changed(outsider, tenant_a, run, job):  # noqa: F811
    before = tenant_state(tenant_a)
    schedules = list(Schedule.objects.values())
    session = run.session_id
    gets = [
        *all_pages(run, job)[1::2],
        reverse("dashboard:runs_cancel", args=[run.pk]),
        reverse("dashboard:cron_edit", args=[job.pk]),
        reverse("dashboard:cron_delete", args=[job.pk]),
    ]
    posts = [
        reverse("dashboard:runs_cancel", args=[run.pk]),
        reverse("dashboard:runs_session_archive", args=[session]),
        reverse("dashboard:runs_session_unarchive", args=[session]),
        reverse("dashboard:runs_session_delete", args=[session]),
        reverse("dashboard:cron_edit", args=[job.pk]),
        reverse("dashboard:cron_enabled", args=[job.pk]),
        reverse("dashboard:cron_run", args=[job.pk]),
        reverse("dashboard:cron_delete", args=[job.pk]),
    ]
    for url in gets:
        response = outsider.get(url)
        assert response.status_code == 404, url
        assert SECRET not in response.content.decode()
    for url in posts:
        assert (
            outsider.post(
                url, {"enabled": "0", "name": "x", "schedule": "every 5m", "message": "m"}
            ).status_code
            == 404
        )
    for url in (reverse("dashboard:runs"), reverse("dashboard:runs_sessions"), reverse("dashboard:cron")):
        page = body(outsider.get(url))
        assert str(run.pk) not in page
        assert "chat-1" not in page
        assert "digest" not in page
    assert tenant_state(tenant_a) == before
    assert list(Schedule.objects.values()) == schedules
