"""The teams pages through the Django test client: the list, create and settings (admins), the board,
a task's detail and every human action on it (members), the escalations inbox, the team's audit log.

Personas: a viewer, a member, an admin and an owner of tenant A (logged-in users), and tenant B's owner,
the outsider, for whom every one of A's team pages is 404 with nothing changed.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.teams import board
from apps.teams.models import Escalation, Task, TaskComment, TaskEvent, Team, TeamMember
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.tenant_state import tenant_state
from tests.teams.conftest import Crew, make_crew

pytestmark = pytest.mark.django_db


@pytest.fixture
def crew(tenant_a: Tenant) -> Crew:
    return make_crew(tenant_a)


def new_task(crew: Crew, subject: str = "Write the report", **fields: Any) -> Task:
    return board.create_task(crew.team, actor=crew.as_lead, subject=subject, **fields)


def in_progress(crew: Crew, subject: str = "Write the report", **fields: Any) -> Task:
    task = new_task(crew, subject, **fields)
    return board.assign(crew.team, task.pk, agent=crew.alice, actor=crew.as_lead)


def blocked_by_a_comment(crew: Crew, text: str = "No access to the staging database") -> Task:
    task = in_progress(crew)
    board.comment(crew.team, task.pk, actor=crew.as_alice, text=text, kind="blocker")
    return Task.objects.for_tenant(crew.team.tenant).get(pk=task.pk)


def in_review(crew: Crew) -> Task:
    task = in_progress(crew, "Draft the release notes")
    return board.review(crew.team, task.pk, actor=crew.as_alice)


def url(name: str, *args: Any) -> str:
    return reverse(f"dashboard:{name}", args=args)


def task_url(name: str, task: Task) -> str:
    return url(name, task.team_id, task.pk)


def body(response: Any) -> str:
    return str(response.content.decode())


def followed(client: Client, path: str, data: dict[str, Any] | None = None) -> str:
    response = client.post(path, data or {}, follow=True)
    assert response.status_code == 200
    return body(response)


def status_of(task: Task) -> str:
    return str(Task.objects.for_tenant(task.tenant).get(pk=task.pk).status)


# --- reading --------------------------------------------------------------------------------------------


def test_the_list_shows_the_tenants_teams_with_open_work(viewer, crew, tenant_b):
    make_crew(tenant_b, "Theirs")
    blocked_by_a_comment(crew)
    new_task(crew, "Another one")

    page = body(viewer.get(url("teams")))

    assert url("team_board", crew.team.pk) in page
    assert "Builders" in page
    assert "Theirs" not in page
    row = page[page.index(f'data-team="{crew.team.pk}"') :]
    cells = re.findall(r"<td>([^<]*)</td>", row[: row.index("</tr>")])
    assert cells[:2] == ["3", "2"]  # members, open tasks
    assert f"{url('team_escalations', crew.team.pk)}?state=open" in row
    assert url("team_create") not in page


def test_the_board_puts_every_task_in_its_status_column(viewer, crew):
    pending = new_task(crew, "Plan the sprint", priority=5)
    working = in_progress(crew, "Build the importer")
    board.progress(crew.team, working.pk, percent=40, step="parsing", actor=crew.as_alice)
    waiting = new_task(crew, "Ship the importer", blocked_by=[working.pk])
    failed = blocked_by_a_comment(crew)

    page = body(viewer.get(url("team_board", crew.team.pk)))

    def column(status: str) -> str:
        start = page.index(f'data-column="{status}"')
        return page[start : page.index("</section>", start)]

    assert pending.identifier in column("pending")
    assert "Plan the sprint" in column("pending")
    assert re.search(r"P5</span>", column("pending"))
    assert working.identifier in column("in_progress")
    assert 'aria-valuenow="40"' in column("in_progress")
    assert crew.alice.key in column("in_progress")
    assert f"Waits on {working.identifier}" in column("blocked")
    assert waiting.identifier in column("blocked")
    assert failed.identifier in column("failed")
    assert 'data-mark="blocker"' in column("failed")
    assert re.search(r"data-count[^>]*>1<", column("failed"))
    assert "No access to the staging database" in page  # the open escalation
    assert f"team:{crew.team.pk}" in page  # the live topic
    assert "team-board.js" in page
    assert url("team_task_create", crew.team.pk) not in page  # a viewer creates nothing


def test_the_board_narrows_to_one_chat(viewer, crew):
    new_task(crew, "In chat one", chat_id="chat-1")
    new_task(crew, "In chat two", chat_id="chat-2")

    page = body(viewer.get(url("team_board", crew.team.pk), {"chat": "chat-1"}))

    assert "In chat one" in page
    assert "In chat two" not in page
    assert '<option value="chat-2">' in page
    assert '"chat": "chat-1"' in page


def test_the_task_page_shows_comments_events_result_and_attachments(viewer, crew):
    task = blocked_by_a_comment(crew, "Waiting for credentials")
    board.attach(crew.team, task.pk, path="reports/q3.pdf", actor=crew.as_alice, file_size=2048)

    page = body(viewer.get(task_url("team_task", task)))

    assert task.identifier in page
    assert "Write the report" in page
    assert "FAILED: Blocked: Waiting for credentials" in page
    assert 'class="comment comment-blocker"' in page
    assert "reports/q3.pdf" in page
    for event in ("created", "assigned", "commented", "failed", "attachment_added"):
        assert f"<strong>{event}</strong>" in page
    assert "Open" in page  # the escalation
    assert url("team_task_retry", crew.team.pk, task.pk) not in page  # viewers see no actions


def test_the_audit_log_pages_and_filters_task_events(viewer, crew):
    first = new_task(crew, "First")
    for n in range(50):
        new_task(crew, f"Task {n}")
    board.cancel(crew.team, first.pk, reason="not needed", actor=crew.as_lead)

    page = body(viewer.get(url("team_audit", crew.team.pk)))
    assert page.count("<tr data-id=") == 50
    assert "Page 1 of 2 · 52 events" in page
    assert "page=2" in page
    cancelled = body(viewer.get(url("team_audit", crew.team.pk), {"event_type": "cancelled"}))
    assert cancelled.count("<tr data-id=") == 1
    assert "not needed" in cancelled
    of_first = body(viewer.get(url("team_audit", crew.team.pk), {"task": first.identifier}))
    assert of_first.count("<tr data-id=") == 2
    bad = viewer.get(url("team_audit", crew.team.pk), {"event_type": "nope"})
    assert bad.status_code == 200
    assert "Select a valid choice" in body(bad)


def test_the_board_page_reads_in_a_bounded_number_of_queries(viewer, crew, django_assert_max_num_queries):
    for n in range(30):
        new_task(crew, f"Task {n}", blocked_by=[])
    with django_assert_max_num_queries(25):
        assert viewer.get(url("team_board", crew.team.pk)).status_code == 200


# --- configuring ----------------------------------------------------------------------------------------


def test_configuration_needs_an_admin(viewer, member, crew, tenant_a):
    before = tenant_state(tenant_a)
    for client in (viewer, member):
        assert client.get(url("team_create")).status_code == 403
        assert client.get(url("team_settings", crew.team.pk)).status_code == 403
        assert client.post(url("team_settings", crew.team.pk), {"name": "Mine"}).status_code == 403
        assert client.post(url("team_member_add", crew.team.pk), {"agent": "x"}).status_code == 403
        assert client.post(url("team_member_remove", crew.team.pk, crew.bob.key)).status_code == 403
        assert client.post(url("team_archive", crew.team.pk)).status_code == 403
    assert tenant_state(tenant_a) == before


def test_an_admin_creates_a_team_from_the_tenants_agents(admin, tenant_a):
    system = Actor.system(tenant_a)
    for key in ("planner", "coder", "tester"):
        tenant_services.agent_create(actor=system, key=key, name=key)
    form = body(admin.get(url("team_create")))
    assert 'value="coder"' in form

    response = admin.post(
        url("team_create"), {"name": "Delivery", "lead": "planner", "members": ["coder", "tester"]}
    )

    team = Team.objects.for_tenant(tenant_a).get(name="Delivery")
    assert response.status_code == 302
    assert response["Location"] == url("team_board", team.pk)
    roles = dict(TeamMember.objects.for_tenant(tenant_a).filter(team=team).values_list("agent__key", "role"))
    assert roles == {"planner": "lead", "coder": "member", "tester": "member"}
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="team.created").count() == 1


def test_team_creation_refusals(admin, crew, tenant_a):
    before = tenant_state(tenant_a)
    alone = body(
        admin.post(url("team_create"), {"name": "Solo", "lead": crew.alice.key, "members": [crew.alice.key]})
    )
    assert "Choose at least one member besides the lead." in alone
    taken = body(
        admin.post(url("team_create"), {"name": "Other", "lead": crew.lead.key, "members": [crew.bob.key]})
    )
    assert f"{crew.lead.key} already leads a team" in taken
    unknown = body(admin.post(url("team_create"), {"name": "X", "lead": "ghost", "members": [crew.bob.key]}))
    assert "Select a valid choice" in unknown
    assert tenant_state(tenant_a) == before


def settings_form(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "Builders",
        "description": "",
        "blocker_escalation": "on",
        "followup_interval_minutes": "30",
        "followup_max_reminders": "0",
        "escalation_mode": "",
        "notification_mode": "direct",
        "notify": ["dispatched", "completed", "new_task"],
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def test_the_settings_page_turns_blocker_escalation_off_and_keeps_other_keys(admin, crew, tenant_a):
    Team.objects.for_tenant(tenant_a).filter(pk=crew.team.pk).update(
        settings={"version": 2, "allow_user_ids": ["u-1"]}
    )
    page = body(admin.get(url("team_settings", crew.team.pk)))
    assert re.search(r'<input type="checkbox" name="blocker_escalation"[^>]* checked>', page)

    response = admin.post(
        url("team_settings", crew.team.pk),
        settings_form(
            name="Builders 2",
            blocker_escalation=None,
            member_requests="on",
            followup_interval_minutes="15",
            followup_max_reminders="3",
            notification_mode="leader",
            notify=["failed"],
            allow_user_ids="u-1",
        ),
        follow=True,
    )

    assert "Settings of Builders 2 saved." in body(response)
    team = Team.objects.for_tenant(tenant_a).get(pk=crew.team.pk)
    assert team.name == "Builders 2"
    assert team.settings == {
        "version": 2,
        "allow_user_ids": ["u-1"],
        "blocker_escalation": {"enabled": False},
        "member_requests": {"enabled": True, "auto_dispatch": False},
        "followup_interval_minutes": 15,
        "followup_max_reminders": 3,
        "notifications": {
            "mode": "leader",
            "dispatched": False,
            "progress": False,
            "failed": True,
            "completed": False,
            "commented": False,
            "new_task": False,
            "slow_tool": False,
        },
    }
    # With escalation off, a blocker still fails the task but the lead is not notified.
    crew.team = Team.objects.for_tenant(tenant_a).select_related("tenant", "lead").get(pk=crew.team.pk)
    task = blocked_by_a_comment(crew)
    assert Escalation.objects.for_tenant(tenant_a).get(task=task).notified_lead is False


def test_settings_refusals_change_nothing(admin, crew, tenant_a):
    make_crew(tenant_a, "Others")
    before = tenant_state(tenant_a)
    zero = body(admin.post(url("team_settings", crew.team.pk), settings_form(followup_interval_minutes="0")))
    assert "Ensure this value is greater than or equal to 1." in zero
    huge = body(admin.post(url("team_settings", crew.team.pk), settings_form(followup_max_reminders="5000")))
    assert "Ensure this value is less than or equal to 1000." in huge
    taken = body(admin.post(url("team_settings", crew.team.pk), settings_form(name="Others")))
    assert "A team named &#x27;Others&#x27; exists already." in taken
    long = body(admin.post(url("team_settings", crew.team.pk), settings_form(name="x" * 300)))
    assert "Ensure this value has at most 255 characters" in long
    assert tenant_state(tenant_a) == before


def test_members_are_added_and_removed_after_a_confirmation(admin, crew, tenant_a):
    carol = tenant_services.agent_create(actor=Actor.system(tenant_a), key="carol", name="Carol")
    page = body(admin.get(url("team_settings", crew.team.pk)))
    assert '<option value="carol">' in page
    assert url("team_member_remove", crew.team.pk, crew.lead.key) not in page

    added = followed(admin, url("team_member_add", crew.team.pk), {"agent": "carol"})
    assert "carol joined Builders." in added
    assert TeamMember.objects.for_tenant(tenant_a).filter(team=crew.team, agent=carol).exists()
    again = followed(admin, url("team_member_add", crew.team.pk), {"agent": "carol"})
    assert "Choose an agent of this tenant that is not in the team yet." in again

    remove = url("team_member_remove", crew.team.pk, "carol")
    before = tenant_state(tenant_a)
    confirm = admin.get(remove)
    assert confirm.status_code == 200
    assert "Remove carol from Builders?" in body(confirm)
    assert tenant_state(tenant_a) == before
    assert "carol left Builders." in followed(admin, remove)
    assert not TeamMember.objects.for_tenant(tenant_a).filter(team=crew.team, agent=carol).exists()

    before = tenant_state(tenant_a)
    lead = followed(admin, url("team_member_remove", crew.team.pk, crew.lead.key))
    assert "The lead cannot be removed" in lead
    assert admin.get(url("team_member_remove", crew.team.pk, "nobody")).status_code == 404
    assert tenant_state(tenant_a) == before


def test_archiving_is_confirmed_and_stops_new_tasks(admin, member, crew, tenant_a):
    archive = url("team_archive", crew.team.pk)
    before = tenant_state(tenant_a)
    assert "Archive team Builders?" in body(admin.get(archive))
    assert tenant_state(tenant_a) == before

    response = admin.post(archive, follow=True)
    assert "Team Builders archived." in body(response)
    assert Team.objects.for_tenant(tenant_a).get(pk=crew.team.pk).status == "archived"
    assert "This team is archived" in body(member.get(url("team_board", crew.team.pk)))
    again = followed(admin, archive)
    assert "Team Builders is already archived." in again
    refused = body(member.post(url("team_task_create", crew.team.pk), {"subject": "More", "priority": "0"}))
    assert "team Builders is archived; it takes no new tasks" in refused
    assert not Task.objects.for_tenant(tenant_a).exists()


# --- acting on tasks ------------------------------------------------------------------------------------


def test_actions_need_a_member(viewer, crew, tenant_a):
    task = in_review(crew)
    failed = blocked_by_a_comment(crew)
    escalation = Escalation.objects.for_tenant(tenant_a).get()
    before = tenant_state(tenant_a)
    posts = [
        url("team_task_create", crew.team.pk),
        task_url("team_task_assign", task),
        task_url("team_task_cancel", task),
        task_url("team_task_retry", failed),
        task_url("team_task_approve", task),
        task_url("team_task_reject", task),
        task_url("team_task_comment", task),
        url("team_escalation_retry", crew.team.pk, escalation.pk),
        url("team_escalation_resolve", crew.team.pk, escalation.pk),
    ]
    for path in posts:
        assert viewer.post(path, {"text": "x", "reason": "x", "subject": "x"}).status_code == 403, path
    assert viewer.get(task_url("team_task_cancel", task)).status_code == 403
    assert tenant_state(tenant_a) == before


def test_a_member_creates_a_task_that_goes_to_its_owner(member, crew, tenant_a):
    form = body(member.get(url("team_task_create", crew.team.pk)))
    assert f'<option value="{crew.alice.key}">' in form
    assert f'<option value="{crew.lead.key}">' not in form  # the lead is never dispatched work

    response = member.post(
        url("team_task_create", crew.team.pk),
        {"subject": "Fix the login page", "description": "It 500s", "priority": "3", "owner": crew.alice.key},
    )

    task = Task.objects.for_tenant(tenant_a).get(subject="Fix the login page")
    assert response["Location"] == task_url("team_task", task)
    assert (task.status, task.owner, task.priority, task.channel, task.user_id) == (
        "in_progress",
        crew.alice,
        3,
        "dashboard",
        "member@a.test",
    )
    events = list(
        TaskEvent.objects.for_tenant(tenant_a).filter(task=task).values_list("event_type", "actor_id")
    )
    assert events == [
        ("created", "member@a.test"),
        ("assigned", "member@a.test"),
        ("dispatched", "member@a.test"),
    ]
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="team.task.created").count() == 1

    unassigned = member.post(url("team_task_create", crew.team.pk), {"subject": "Anyone", "priority": "0"})
    assert unassigned.status_code == 302
    assert Task.objects.for_tenant(tenant_a).get(subject="Anyone").status == "pending"


def test_task_creation_refusals(member, crew, tenant_a):
    before = tenant_state(tenant_a)
    empty = body(member.post(url("team_task_create", crew.team.pk), {"subject": "", "priority": "0"}))
    assert "This field is required." in empty
    high = body(member.post(url("team_task_create", crew.team.pk), {"subject": "x", "priority": "5000"}))
    assert "Ensure this value is less than or equal to 1000." in high
    lead = body(
        member.post(
            url("team_task_create", crew.team.pk), {"subject": "x", "priority": "0", "owner": crew.lead.key}
        )
    )
    assert "Select a valid choice" in lead
    assert tenant_state(tenant_a) == before


def test_assign_a_pending_task_and_the_refusal_for_one_in_progress(member, crew, tenant_a):
    task = new_task(crew)
    page = body(member.get(task_url("team_task", task)))
    assert task_url("team_task_assign", task) in page

    done = followed(member, task_url("team_task_assign", task), {"agent": crew.bob.key})

    assert f"{task.identifier} assigned to {crew.bob.key} (in progress)." in done
    assert Task.objects.for_tenant(tenant_a).get(pk=task.pk).owner == crew.bob
    before = tenant_state(tenant_a)
    refused = followed(member, task_url("team_task_assign", task), {"agent": crew.alice.key})
    assert "cannot assign: the task is in_progress, not pending" in refused
    not_a_member = followed(member, task_url("team_task_assign", task), {"agent": "nobody"})
    assert "Choose a member of the team (not its lead)." in not_a_member
    assert tenant_state(tenant_a) == before


def test_cancel_is_confirmed_with_a_reason(member, crew, tenant_a):
    task = in_progress(crew)
    cancel = task_url("team_task_cancel", task)
    before = tenant_state(tenant_a)
    assert f"Cancel {task.identifier}?" in body(member.get(cancel))
    assert tenant_state(tenant_a) == before
    too_long = body(member.post(cancel, {"reason": "x" * 501}))
    assert "Ensure this value has at most 500 characters" in too_long
    assert tenant_state(tenant_a) == before

    done = followed(member, cancel, {"reason": "Out of scope"})

    assert f"{task.identifier} cancelled." in done
    cancelled = Task.objects.for_tenant(tenant_a).get(pk=task.pk)
    assert (cancelled.status, cancelled.result) == ("cancelled", "Out of scope")
    before = tenant_state(tenant_a)
    assert "cannot cancel: the task is cancelled" in followed(member, cancel, {"reason": ""})
    assert tenant_state(tenant_a) == before


def test_retry_reopens_a_failed_task_for_its_owner(member, crew, tenant_a):
    task = blocked_by_a_comment(crew)

    done = followed(member, task_url("team_task_retry", task), {"reason": "Credentials are in the vault now"})

    assert f"{task.identifier} retried (in progress)." in done
    retried = Task.objects.for_tenant(tenant_a).get(pk=task.pk)
    assert (retried.status, retried.owner) == ("in_progress", crew.alice)
    assert Escalation.objects.for_tenant(tenant_a).get().state == "retried"
    event = TaskEvent.objects.for_tenant(tenant_a).get(task=task, event_type="retried")
    assert event.data == {"reason": "Credentials are in the vault now"}

    pending = new_task(crew, "Not started")
    before = tenant_state(tenant_a)
    refused = followed(member, task_url("team_task_retry", pending), {"reason": ""})
    assert "cannot retry: the task is pending" in refused
    assert tenant_state(tenant_a) == before


def test_approve_completes_reviewed_work(member, crew, tenant_a):
    task = in_review(crew)
    page = body(member.get(task_url("team_task", task)))
    assert task_url("team_task_approve", task) in page
    assert task_url("team_task_reject", task) in page

    done = followed(member, task_url("team_task_approve", task))

    assert f"{task.identifier} approved (completed)." in done
    assert status_of(task) == "completed"
    before = tenant_state(tenant_a)
    assert "cannot approve: the task is completed, not in_review" in followed(
        member, task_url("team_task_approve", task)
    )
    assert tenant_state(tenant_a) == before


def test_reject_sends_reviewed_work_back_with_the_reason(member, crew, tenant_a):
    task = in_review(crew)
    before = tenant_state(tenant_a)
    missing = followed(member, task_url("team_task_reject", task), {"reason": ""})
    assert "Say why the work is rejected" in missing
    assert tenant_state(tenant_a) == before

    done = followed(member, task_url("team_task_reject", task), {"reason": "Tests are missing"})

    assert f"{task.identifier} rejected (in progress)." in done
    assert status_of(task) == "in_progress"
    comment = TaskComment.objects.for_tenant(tenant_a).filter(task=task).last()
    assert comment is not None
    assert comment.content == "Task rejected. Reason: Tests are missing"


def test_a_note_and_a_blocker_comment(member, crew, tenant_a):
    task = in_progress(crew)

    note = followed(
        member, task_url("team_task_comment", task), {"text": "Looks good so far", "type": "note"}
    )
    assert f"Comment added to task #{task.number} ({task.identifier})." in note
    blocker = followed(
        member, task_url("team_task_comment", task), {"text": "The API is down", "type": "blocker"}
    )
    assert "auto-failed due to blocker" in blocker

    assert status_of(task) == "failed"
    escalation = Escalation.objects.for_tenant(tenant_a).get()
    assert (escalation.blocker, escalation.member, escalation.state) == (
        "The API is down",
        crew.alice,
        "open",
    )
    kinds = list(
        TaskComment.objects.for_tenant(tenant_a).filter(task=task).values_list("comment_type", "user_id")
    )
    assert kinds == [("note", "member@a.test"), ("blocker", "member@a.test")]
    page = body(member.get(task_url("team_task", task)))
    assert page.count('class="comment comment-blocker"') == 1

    before = tenant_state(tenant_a)
    empty = followed(member, task_url("team_task_comment", task), {"text": "   ", "type": "note"})
    assert "Comment not saved" in empty
    huge = followed(member, task_url("team_task_comment", task), {"text": "é" * 6000, "type": "note"})
    assert "At most 10 000 bytes." in huge
    odd = followed(member, task_url("team_task_comment", task), {"text": "hi", "type": "shout"})
    assert "Select a valid choice" in odd
    assert tenant_state(tenant_a) == before


# --- escalations ----------------------------------------------------------------------------------------


def test_the_inbox_lists_escalations_by_state_with_their_actions(member, crew, tenant_a, tenant_b):
    first = blocked_by_a_comment(crew, "First blocker")
    second = blocked_by_a_comment(crew, "Second blocker")
    blocked_by_a_comment(make_crew(tenant_b, "Theirs"), "Their blocker")
    escalations = {e.task_id: e for e in Escalation.objects.for_tenant(tenant_a)}
    board.resolve_escalation(crew.team, escalations[second.pk].pk, actor=crew.as_lead)

    page = body(member.get(url("team_escalations", crew.team.pk)))

    assert "First blocker" in page
    assert "Second blocker" in page
    assert "Their blocker" not in page
    assert url("team_escalation_retry", crew.team.pk, escalations[first.pk].pk) in page
    assert url("team_escalation_retry", crew.team.pk, escalations[second.pk].pk) not in page
    assert "team-escalations.js" in page
    open_only = body(member.get(url("team_escalations", crew.team.pk), {"state": "open"}))
    assert "First blocker" in open_only
    assert "Second blocker" not in open_only
    everywhere = body(member.get(url("escalations")))
    assert "First blocker" in everywhere
    assert "Their blocker" not in everywhere
    assert f"team:{crew.team.pk}" in everywhere


def test_retry_and_resolve_from_the_inbox(member, crew, tenant_a):
    failed = blocked_by_a_comment(crew, "Needs a key")
    other = blocked_by_a_comment(crew, "Needs a review")
    escalations = {e.task_id: e for e in Escalation.objects.for_tenant(tenant_a)}
    inbox = url("team_escalations", crew.team.pk)

    retried = member.post(
        url("team_escalation_retry", crew.team.pk, escalations[failed.pk].pk), {"next": inbox + "?state=open"}
    )
    assert retried["Location"] == inbox + "?state=open"
    assert status_of(failed) == "in_progress"
    assert Escalation.objects.for_tenant(tenant_a).get(task=failed).state == "retried"

    resolve = url("team_escalation_resolve", crew.team.pk, escalations[other.pk].pk)
    assert f"Escalation of {other.identifier} resolved." in followed(
        member, resolve, {"next": "https://evil.test/"}
    )
    resolved = Escalation.objects.for_tenant(tenant_a).get(task=other)
    assert (resolved.state, resolved.resolved_by) == ("resolved", "member@a.test")
    assert status_of(other) == "failed"
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="team.escalation.resolved").count() == 1

    before = tenant_state(tenant_a)
    assert "the escalation is already resolved" in followed(member, resolve)
    again = followed(member, url("team_escalation_retry", crew.team.pk, escalations[failed.pk].pk))
    assert "This escalation is retried already" in again
    assert tenant_state(tenant_a) == before


# --- other tenants --------------------------------------------------------------------------------------


def test_another_tenants_team_pages_are_404_with_nothing_changed(outsider, crew, tenant_a, tenant_b):
    make_crew(tenant_b, "Theirs")
    task = in_review(crew)
    failed = blocked_by_a_comment(crew)
    escalation = Escalation.objects.for_tenant(tenant_a).get()
    team = crew.team.pk
    before = tenant_state(tenant_a)
    reads = [
        url("team_board", team),
        url("team_settings", team),
        url("team_archive", team),
        url("team_member_remove", team, crew.bob.key),
        url("team_task_create", team),
        task_url("team_task", task),
        task_url("team_task_cancel", task),
        url("team_escalations", team),
        url("team_audit", team),
    ]
    for path in reads:
        assert outsider.get(path).status_code == 404, path
    posts = [
        url("team_settings", team),
        url("team_archive", team),
        url("team_member_remove", team, crew.bob.key),
        url("team_task_create", team),
        task_url("team_task_cancel", task),
        url("team_member_add", team),
        task_url("team_task_assign", task),
        task_url("team_task_retry", failed),
        task_url("team_task_approve", task),
        task_url("team_task_reject", task),
        task_url("team_task_comment", task),
        url("team_escalation_retry", team, escalation.pk),
        url("team_escalation_resolve", team, escalation.pk),
    ]
    data = {"text": "x", "type": "blocker", "reason": "x", "agent": crew.bob.key}
    for path in posts:
        assert (
            outsider.post(path, {**data, "subject": "x", "name": "x", "priority": "0"}).status_code == 404
        ), path
    lists = body(outsider.get(url("teams"))) + body(outsider.get(url("escalations")))
    assert "Builders" not in lists
    assert "No access to the staging database" not in lists
    assert tenant_state(tenant_a) == before


def test_a_task_of_another_team_is_404_under_this_team(member, crew, tenant_a):
    other = make_crew(tenant_a, "Others")
    theirs = board.create_task(other.team, actor=other.as_lead, subject="Theirs")
    before = tenant_state(tenant_a)
    assert member.get(url("team_task", crew.team.pk, theirs.pk)).status_code == 404
    assert member.post(url("team_task_cancel", crew.team.pk, theirs.pk), {"reason": "x"}).status_code == 404
    assert tenant_state(tenant_a) == before


def test_every_role_reads_and_the_navigation_has_teams(viewer, member, admin, owner, crew):
    task = blocked_by_a_comment(crew)
    for client in (viewer, member, admin, owner):
        for path in (
            url("teams"),
            url("team_board", crew.team.pk),
            task_url("team_task", task),
            url("team_escalations", crew.team.pk),
            url("escalations"),
            url("team_audit", crew.team.pk),
        ):
            assert client.get(path).status_code == 200, path
    page = body(viewer.get(url("teams")))
    nav = page[page.index('<nav class="sidenav"') : page.index("</nav>")]
    assert re.findall(r'aria-current="page">([^<]+)<', nav) == ["Teams"]
    assert url("team_settings", crew.team.pk) not in body(member.get(url("team_board", crew.team.pk)))
    assert url("team_settings", crew.team.pk) in body(admin.get(url("team_board", crew.team.pk)))
    assert url("team_task_retry", crew.team.pk, task.pk) in body(member.get(task_url("team_task", task)))
