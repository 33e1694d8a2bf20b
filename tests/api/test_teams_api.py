"""The teams API: teams, members, settings and grants; the task board's list, search, detail and every
human action through the state machine (each writing exactly its task event); the blocker and review
flows; the team's event trail; another tenant's team and tasks are 404 with nothing changed."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.teams import board
from apps.teams.models import Escalation, Task, TaskEvent, Team, TeamMember, TeamUserGrant
from apps.tenants.actors import Actor
from apps.tenants.models import ApiKey, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api import roles_teams
from tests.api.personas import check_personas
from tests.api.personas import error as _error
from tests.api.tenant_state import tenant_state
from tests.api.test_roles import _targets
from tests.teams.conftest import Crew, make_crew

pytestmark = pytest.mark.django_db


def _ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content
    return response.json()


@pytest.fixture
def crew(tenant_a: Tenant) -> Crew:
    return make_crew(tenant_a)


@pytest.fixture
def hand(tenant_a: Tenant) -> tuple[APIClient, str]:
    """A member's API key and how the board names it (``api-key:<prefix>``)."""
    raw = factories.make_api_key(tenant_a, Role.MEMBER, name="board hand")
    prefix = ApiKey.objects.for_tenant(tenant_a).get(name="board hand").prefix
    return factories.key_client(raw), f"api-key:{prefix}"


def _team(crew: Crew) -> str:
    return f"/api/v1/teams/{crew.team.pk}"


def _task(crew: Crew, task: Task | str) -> str:
    return f"{_team(crew)}/tasks/{task.pk if isinstance(task, Task) else task}"


def _events(tenant: Tenant, task: Task | str) -> list[tuple[str, str, str, Any]]:
    ident = task.pk if isinstance(task, Task) else task
    return [
        (e.event_type, e.actor_type, e.actor_id, e.data)
        for e in TaskEvent.objects.for_tenant(tenant).filter(task_id=ident).order_by("created_at", "id")
    ]


def _status(tenant: Tenant, task: Task | str) -> str:
    ident = task.pk if isinstance(task, Task) else task
    return str(Task.objects.for_tenant(tenant).get(pk=ident).status)


def _in_progress(crew: Crew, subject: str = "Build the thing", owner: Any = None) -> Task:
    task = board.create_task(crew.team, actor=crew.as_lead, subject=subject)
    return board.assign(crew.team, task.pk, agent=owner or crew.alice, actor=crew.as_lead)


# --- personas on every route --------------------------------------------------------------------------


def _outsider_status(method: str, template: str, success: int) -> int:
    """Tenant B's owner: 404 on anything under A's team; its own (empty) team list; a team created in
    B naming A's agents is invalid (B has none of those keys)."""
    if "{team}" in template:
        return 404
    return 400 if method == "post" else success


@pytest.mark.parametrize(
    ("method", "template", "body", "least", "success"),
    roles_teams.ACTIONS,
    ids=[f"{a[0]} {a[1]}" for a in roles_teams.ACTIONS],
)
def test_personas_on_every_route(method, template, body, least, success, request, tenant_a):
    ids = _targets(tenant_a)
    check_personas(
        request,
        tenant_a,
        method=method,
        url=template.format(**ids),
        body=body,
        least=least,
        success=success,
        outsider_status=_outsider_status(method, template, success),
        never_shown_to_outsider=(ids["team"],),
    )


# --- teams ---------------------------------------------------------------------------------------------


def _agents(tenant: Tenant, *keys: str) -> None:
    for key in keys:
        tenant_services.agent_create(actor=Actor.system(tenant), key=key, name=key.title())


def test_create_read_rename_configure_and_archive_a_team(admin_a, viewer_a, tenant_a):
    _agents(tenant_a, "lead", "ana", "ben")
    created = _ok(
        admin_a.post(
            "/api/v1/teams/",
            {"name": "Platform", "lead": "lead", "members": ["ana", "ben", "lead"], "description": "Infra"},
            format="json",
        ),
        201,
    )
    assert (created["name"], created["lead"], created["status"], created["description"]) == (
        "Platform",
        "lead",
        "active",
        "Infra",
    )
    assert [(m["agent"], m["role"]) for m in created["members"]] == [
        ("lead", "lead"),
        ("ana", "member"),
        ("ben", "member"),
    ]
    assert created["settings"] == {"version": 2}
    url = f"/api/v1/teams/{created['id']}/"
    assert _ok(viewer_a.get(url))["id"] == created["id"]

    renamed = _ok(admin_a.patch(url, {"name": "Platform team", "description": ""}, format="json"))
    assert (renamed["name"], renamed["description"]) == ("Platform team", "")
    toggled = _ok(
        admin_a.patch(
            url, {"settings": {"version": 2, "blocker_escalation": {"enabled": False}}}, format="json"
        )
    )
    assert toggled["settings"]["blocker_escalation"] == {"enabled": False}
    assert Team.objects.for_tenant(tenant_a).get(pk=created["id"]).settings["blocker_escalation"] == {
        "enabled": False
    }

    archived = _ok(admin_a.delete(url))
    assert archived["status"] == "archived"
    error = _error(admin_a.delete(url), 409, "conflict")
    assert "already archived" in error["message"]
    assert [t["name"] for t in _ok(viewer_a.get("/api/v1/teams/?status=archived"))["results"]] == [
        "Platform team"
    ]
    assert _ok(viewer_a.get("/api/v1/teams/?status=active"))["results"] == []

    verbs = list(
        AuditEvent.objects.for_tenant(tenant_a)
        .filter(target_type="team", target_id=created["id"])
        .order_by("created_at")
        .values_list("verb", flat=True)
    )
    assert verbs == ["team.created", "team.updated", "team.updated", "team.archived"]


def test_team_input_errors_change_nothing(admin_a, tenant_a, crew):
    _agents(tenant_a, "solo", "other")
    before = tenant_state(tenant_a)
    cases: list[tuple[dict[str, Any], int, str, str]] = [
        ({"name": "X", "lead": "ghost", "members": ["solo"]}, 400, "invalid", "lead: no agent 'ghost'"),
        ({"name": "X", "lead": "solo", "members": ["ghost"]}, 400, "invalid", "members: no agent 'ghost'"),
        ({"name": "X", "lead": "solo", "members": []}, 400, "invalid", "members"),
        ({"name": "X", "lead": "solo", "members": ["solo"]}, 400, "invalid", "at least one member besides"),
        ({"name": crew.team.name, "lead": "solo", "members": ["other"]}, 409, "conflict", "exists already"),
        ({"name": "X", "lead": crew.lead.key, "members": ["other"]}, 409, "conflict", "already leads a team"),
        (
            {"name": "X", "lead": "solo", "members": ["other"], "owner": "me"},
            400,
            "invalid",
            "owner: Unknown",
        ),
        ({"name": 7, "lead": "solo", "members": ["other"]}, 400, "invalid", "name: Must be a string"),
        (
            {"name": "X", "lead": "solo", "members": ["other"], "settings": {"bogus": 1}},
            400,
            "invalid",
            "bogus",
        ),
        (
            {"name": "X", "lead": "solo", "members": ["other"], "settings": {"blocker_escalation": "off"}},
            400,
            "invalid",
            'settings.blocker_escalation: Must be {"enabled": true|false}.',
        ),
        ({"name": "x" * 256, "lead": "solo", "members": ["other"]}, 400, "invalid", "name"),
    ]
    for body, status, code, message in cases:
        error = _error(admin_a.post("/api/v1/teams/", body, format="json"), status, code)
        assert message in error["message"], (body, error)
    url = _team(crew) + "/"
    patches: list[tuple[dict[str, Any], str]] = [
        ({}, "Nothing to change"),
        ({"settings": {"followup_interval_minutes": 0}}, "settings.followup_interval_minutes"),
        ({"settings": []}, "settings.settings: Must be a JSON object."),
        ({"name": "   "}, "name: This field may not be blank."),
        ({"lead": "solo"}, "lead: Unknown field."),
    ]
    for patch, message in patches:
        error = _error(admin_a.patch(url, patch, format="json"), 400, "invalid")
        assert message in error["message"], (patch, error)
    assert tenant_state(tenant_a) == before


def test_team_list_is_bounded_in_queries(viewer_a, tenant_a, django_assert_max_num_queries):
    for i in range(6):
        make_crew(tenant_a, f"Crew{i}")
    with django_assert_max_num_queries(6):
        body = _ok(viewer_a.get("/api/v1/teams/"))
    assert body["count"] == 6
    assert [len(t["members"]) for t in body["results"]] == [3] * 6


def test_members_are_added_and_removed_but_never_the_lead(admin_a, viewer_a, tenant_a, crew):
    _agents(tenant_a, "carol")
    url = _team(crew) + "/members/"
    added = _ok(admin_a.post(url, {"agent": "carol"}, format="json"), 201)
    assert (added["agent"], added["role"]) == ("carol", "member")
    assert [m["agent"] for m in _ok(viewer_a.get(url))["results"]] == [
        crew.lead.key,
        crew.alice.key,
        crew.bob.key,
        "carol",
    ]
    _error(admin_a.post(url, {"agent": "carol"}, format="json"), 409, "conflict")
    _error(admin_a.post(url, {"agent": "ghost"}, format="json"), 400, "invalid")
    assert admin_a.delete(url + "carol/").status_code == 204
    _error(admin_a.delete(url + "carol/"), 404, "not_found")
    error = _error(admin_a.delete(url + f"{crew.lead.key}/"), 400, "invalid")
    assert "lead cannot be removed" in error["message"]
    assert list(
        TeamMember.objects.for_tenant(tenant_a).filter(team=crew.team).values_list("agent__key", flat=True)
    ) == [crew.lead.key, crew.alice.key, crew.bob.key]
    verbs = AuditEvent.objects.for_tenant(tenant_a).filter(verb__startswith="team.member")
    assert sorted(verbs.values_list("verb", flat=True)) == ["team.member_added", "team.member_removed"]


# --- creating and changing tasks ------------------------------------------------------------------------


def test_create_task_in_each_starting_status_with_its_event(hand, tenant_a, crew):
    client, actor_id = hand
    url = _team(crew) + "/tasks/"
    plain = _ok(
        client.post(url, {"subject": "  Write the docs  ", "description": "All of them"}, format="json"), 201
    )
    assert (plain["subject"], plain["status"], plain["owner"], plain["number"]) == (
        "Write the docs",
        "pending",
        None,
        1,
    )
    assert plain["identifier"] == f"T-001-{plain['id'].replace('-', '')[-4:]}"
    assigned = _ok(
        client.post(
            url,
            {"subject": "Review", "owner": crew.bob.key, "priority": 7, "task_type": "review"},
            format="json",
        ),
        201,
    )
    # an owner gets the task at once (in progress, dispatched to its runner)
    assert (assigned["status"], assigned["owner"], assigned["priority"], assigned["task_type"]) == (
        "in_progress",
        crew.bob.key,
        7,
        "review",
    )
    waiting = _ok(client.post(url, {"subject": "Publish", "blocked_by": [plain["id"]]}, format="json"), 201)
    assert (waiting["status"], waiting["blocked_by"]) == ("blocked", [plain["id"]])
    gated = _ok(client.post(url, {"subject": "Spend money", "require_approval": True}, format="json"), 201)
    assert (gated["status"], gated["require_approval"]) == ("in_review", True)
    other_chat = _ok(client.post(url, {"subject": "Elsewhere", "chat_id": "chat-9"}, format="json"), 201)
    assert (other_chat["number"], other_chat["chat_id"]) == (1, "chat-9")

    assert _events(tenant_a, plain["id"]) == [("created", "human", actor_id, None)]
    assert _events(tenant_a, assigned["id"]) == [
        ("created", "human", actor_id, None),
        ("assigned", "human", actor_id, None),
        ("dispatched", "human", actor_id, None),
    ]
    event = TaskEvent.objects.for_tenant(tenant_a).get(task_id=plain["id"])
    assert (event.tenant_id, event.team_id, event.task_identifier) == (
        tenant_a.pk,
        crew.team.pk,
        plain["identifier"],
    )


def test_a_logged_in_user_acts_under_their_email(tenant_a, crew):
    client = APIClient()
    client.force_login(factories.make_user(tenant_a, Role.MEMBER, email="ana@tenant-a.test"))
    created = _ok(client.post(_team(crew) + "/tasks/", {"subject": "By hand"}, format="json"), 201)
    assert _events(tenant_a, created["id"]) == [("created", "human", "ana@tenant-a.test", None)]


@pytest.mark.parametrize(
    ("body", "status", "code", "message"),
    [
        ({"subject": ""}, 400, "invalid", "subject"),
        ({"subject": "   "}, 400, "invalid", "subject: This field may not be blank."),
        ({"subject": "x" * 501}, 400, "invalid", "subject"),
        ({"subject": "ok", "priority": 1001}, 400, "invalid", "priority"),
        ({"subject": "ok", "priority": True}, 400, "invalid", "priority"),
        ({"subject": "ok", "owner": "ghost"}, 400, "invalid", "owner: no agent 'ghost'"),
        ({"subject": "ok", "owner": "outside"}, 400, "invalid", "outside is not a member of team Builders"),
        ({"subject": "ok", "blocked_by": ["T-001"]}, 400, "invalid", "blocked_by: 'T-001' is not a task id"),
        (
            {"subject": "ok", "blocked_by": ["00000000-0000-0000-0000-000000000000"]},
            400,
            "invalid",
            "no task 00000000-0000-0000-0000-000000000000 on this team's board",
        ),
        ({"subject": "ok", "blocked_by": "abc"}, 400, "invalid", "blocked_by"),
        ({"subject": "ok", "blocked_by": ["x"] * 101}, 400, "invalid", "blocked_by"),
        ({"subject": "ok", "task_type": "no spaces"}, 400, "invalid", "task_type is a word"),
        ({"subject": "ok", "status": "completed"}, 400, "invalid", "status: Unknown field."),
        ({"subject": "ok", "chat_id": "c" * 256}, 400, "invalid", "chat_id"),
    ],
)
def test_task_create_refusals_change_nothing(member_a, tenant_a, crew, body, status, code, message):
    _agents(tenant_a, "outside")
    before = tenant_state(tenant_a)
    error = _error(member_a.post(_team(crew) + "/tasks/", body, format="json"), status, code)
    assert message in error["message"]
    assert tenant_state(tenant_a) == before


def test_blocked_by_a_finished_task_and_creating_on_an_archived_team_are_refused(
    member_a, admin_a, tenant_a, crew
):
    done = _in_progress(crew)
    board.complete(crew.team, done.pk, result="ok", actor=crew.as_alice)
    url = _team(crew) + "/tasks/"
    error = _error(
        member_a.post(url, {"subject": "late", "blocked_by": [str(done.pk)]}, format="json"), 400, "invalid"
    )
    assert "already completed, failed or cancelled" in error["message"]
    _ok(admin_a.delete(_team(crew) + "/"))
    before = tenant_state(tenant_a)
    error = _error(member_a.post(url, {"subject": "late"}, format="json"), 409, "conflict")
    assert "archived" in error["message"]
    assert tenant_state(tenant_a) == before


def test_update_changes_what_the_task_says_never_its_status(hand, tenant_a, crew):
    client, actor_id = hand
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Old")
    blocker = board.create_task(crew.team, actor=crew.as_lead, subject="First")
    updated = _ok(
        client.patch(
            _task(crew, task) + "/",
            {"subject": "New", "description": "More", "priority": 9, "blocked_by": [str(blocker.pk)]},
            format="json",
        )
    )
    assert (updated["subject"], updated["description"], updated["priority"], updated["status"]) == (
        "New",
        "More",
        9,
        "pending",
    )
    assert updated["blocked_by"] == [str(blocker.pk)]
    assert _events(tenant_a, task)[-1] == (
        "updated",
        "human",
        actor_id,
        {"fields": ["blocked_by", "description", "priority", "subject"]},
    )
    before = tenant_state(tenant_a)
    for body, message in [
        ({}, "no updates provided"),
        ({"subject": ""}, "subject"),
        ({"blocked_by": [str(task.pk)]}, "a task cannot wait on itself"),
        ({"status": "completed"}, "status: Unknown field."),
    ]:
        error = _error(client.patch(_task(crew, task) + "/", body, format="json"), 400, "invalid")
        assert message in error["message"], body
    assert tenant_state(tenant_a) == before


def test_only_finished_tasks_are_deleted_and_their_events_stay(hand, viewer_a, tenant_a, crew):
    client, actor_id = hand
    open_task = board.create_task(crew.team, actor=crew.as_lead, subject="Still open")
    before = tenant_state(tenant_a)
    error = _error(client.delete(_task(crew, open_task) + "/"), 409, "conflict")
    assert error["message"] == "cannot delete: the task is pending; only completed, failed or cancelled tasks"
    assert tenant_state(tenant_a) == before

    done = _in_progress(crew, "Done soon")
    board.complete(crew.team, done.pk, result="ok", actor=crew.as_alice)
    assert client.delete(_task(crew, done) + "/").status_code == 204
    _error(viewer_a.get(_task(crew, done) + "/"), 404, "not_found")
    trail = _ok(viewer_a.get(_team(crew) + "/events/?event_type=deleted"))["results"]
    assert [(e["task"], e["task_identifier"], e["actor_id"], e["data"]) for e in trail] == [
        (None, done.identifier, actor_id, {"subject": "Done soon"})
    ]


# --- actions -------------------------------------------------------------------------------------------


def test_assign_a_pending_task_and_refusals(hand, tenant_a, crew):
    client, actor_id = hand
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Work")
    done = _ok(client.post(_task(crew, task) + "/assign", {"agent": crew.bob.key}, format="json"))
    assert (done["status"], done["owner"]) == ("in_progress", crew.bob.key)
    assert done["lock_expires_at"] is not None
    assert _events(tenant_a, task)[-2:] == [
        ("assigned", "human", actor_id, None),
        ("dispatched", "human", actor_id, None),
    ]

    before = tenant_state(tenant_a)
    error = _error(
        client.post(_task(crew, task) + "/assign", {"agent": crew.alice.key}, format="json"), 409, "conflict"
    )
    assert error["message"] == "cannot assign: the task is in_progress, not pending"
    _agents(tenant_a, "stranger")
    before = tenant_state(tenant_a)
    other = board.create_task(crew.team, actor=crew.as_lead, subject="Other")
    before = tenant_state(tenant_a)
    error = _error(
        client.post(_task(crew, other) + "/assign", {"agent": "stranger"}, format="json"), 400, "invalid"
    )
    assert error["message"] == "stranger is not a member of team Builders"
    _error(client.post(_task(crew, other) + "/assign", {"agent": "ghost"}, format="json"), 400, "invalid")
    _error(client.post(_task(crew, other) + "/assign", {}, format="json"), 400, "invalid")
    error = _error(
        client.post(
            _task(crew, "00000000-0000-0000-0000-000000000000") + "/assign",
            {"agent": crew.bob.key},
            format="json",
        ),
        404,
        "not_found",
    )
    assert error["message"] == "task not found on this team's board"
    assert tenant_state(tenant_a) == before


def test_cancel_unblocks_dependents_and_refuses_a_finished_task(hand, tenant_a, crew):
    client, actor_id = hand
    first = board.create_task(crew.team, actor=crew.as_lead, subject="First")
    second = board.create_task(crew.team, actor=crew.as_lead, subject="Second", blocked_by=[first.pk])
    cancelled = _ok(client.post(_task(crew, first) + "/cancel", {"reason": "Not needed"}, format="json"))
    assert (cancelled["status"], cancelled["result"]) == ("cancelled", "Not needed")
    assert _events(tenant_a, first)[-1] == ("cancelled", "human", actor_id, {"reason": "Not needed"})
    assert _status(tenant_a, second) == "pending"
    assert _events(tenant_a, second)[-1] == ("unblocked", "human", actor_id, {"blocker": str(first.pk)})

    plain = board.create_task(crew.team, actor=crew.as_lead, subject="Third")
    _ok(client.post(_task(crew, plain) + "/cancel", {}, format="json"))
    assert _events(tenant_a, plain)[-1] == ("cancelled", "human", actor_id, {"reason": "Cancelled by user"})

    before = tenant_state(tenant_a)
    error = _error(
        client.post(_task(crew, first) + "/cancel", {"reason": "again"}, format="json"), 409, "conflict"
    )
    assert error["message"].startswith("cannot cancel: the task is cancelled, not ")
    error = _error(
        client.post(_task(crew, second) + "/cancel", {"reason": "r" * 501}, format="json"), 400, "invalid"
    )
    assert "reason" in error["message"]
    assert tenant_state(tenant_a) == before


def test_retry_reopens_and_dispatches_to_the_owner_and_refuses_open_work(hand, tenant_a, crew):
    client, actor_id = hand
    failed = _in_progress(crew, "Flaky")
    board.fail(crew.team, failed.pk, message="timeout", actor=crew.as_alice)
    retried = _ok(client.post(_task(crew, failed) + "/retry", {"reason": "with more memory"}, format="json"))
    assert (retried["status"], retried["owner"], retried["result"]) == ("in_progress", crew.alice.key, "")
    assert _events(tenant_a, failed)[-3:] == [
        ("retried", "human", actor_id, {"reason": "with more memory"}),
        ("assigned", "human", actor_id, None),
        ("dispatched", "human", actor_id, None),
    ]

    done = _in_progress(crew, "Done")
    board.complete(crew.team, done.pk, result="ok", actor=crew.as_alice)
    assert _ok(client.post(_task(crew, done) + "/retry", None, format="json"))["status"] == "in_progress"
    assert _events(tenant_a, done)[-3][:2] == ("retried", "human")

    nobody = board.create_task(crew.team, actor=crew.as_lead, subject="Unowned")
    board.cancel(crew.team, nobody.pk, reason="later", actor=crew.as_lead)
    reopened = _ok(client.post(_task(crew, nobody) + "/retry", {}, format="json"))
    assert (reopened["status"], reopened["owner"]) == ("pending", None)  # any member may claim it

    before = tenant_state(tenant_a)
    error = _error(client.post(_task(crew, done) + "/retry", {}, format="json"), 409, "conflict")
    assert error["message"] == (
        "cannot retry: the task is in_progress, not cancelled or completed or failed or in_review or stale"
    )
    leads = board.create_task(crew.team, actor=crew.as_lead, subject="Lead's own", owner=crew.lead)
    board.cancel(crew.team, leads.pk, reason="x", actor=crew.as_lead)
    before = tenant_state(tenant_a)
    error = _error(client.post(_task(crew, leads) + "/retry", {}, format="json"), 409, "conflict")
    assert "belongs to the team lead" in error["message"]
    assert tenant_state(tenant_a) == before


def test_review_flow_approve_before_and_after_the_work(hand, tenant_a, crew):
    client, actor_id = hand
    gated = _ok(
        client.post(
            _team(crew) + "/tasks/", {"subject": "Buy servers", "require_approval": True}, format="json"
        ),
        201,
    )
    url = _task(crew, gated["id"])
    # approved before it ever ran: the work still has to happen
    assert _ok(client.post(url + "/approve", None, format="json"))["status"] == "pending"
    assert _events(tenant_a, gated["id"])[-2:] == [
        ("approved", "human", actor_id, None),
        (
            "commented",
            "human",
            actor_id,
            {"comment_text": "Task approved (status: pending).", "comment_type": "note"},
        ),
    ]
    _ok(client.post(url + "/assign", {"agent": crew.alice.key}, format="json"))
    board.review(crew.team, gated["id"], actor=crew.as_alice)
    # approving reviewed work completes it
    approved = _ok(client.post(url + "/approve", None, format="json"))
    assert approved["status"] == "completed"
    assert [e[0] for e in _events(tenant_a, gated["id"])] == [
        "created",
        "approved",
        "commented",
        "assigned",
        "dispatched",
        "reviewed",
        "approved",
        "commented",
    ]

    # a task approved before it ran that has an owner goes to it at once
    owned = board.create_task(
        crew.team, actor=crew.as_lead, subject="Rent a van", owner=crew.bob, require_approval=True
    )
    sent = _ok(client.post(_task(crew, owned) + "/approve", None, format="json"))
    assert (sent["status"], sent["owner"]) == ("in_progress", crew.bob.key)
    assert [e[0] for e in _events(tenant_a, owned)][-3:] == ["commented", "assigned", "dispatched"]


def test_reject_sends_owned_work_back_and_cancels_unowned_work(hand, tenant_a, crew):
    client, actor_id = hand
    work = _in_progress(crew, "Draft the plan")
    follow = board.create_task(
        crew.team, actor=crew.as_lead, subject="Execute the plan", blocked_by=[work.pk]
    )
    board.review(crew.team, work.pk, actor=crew.as_alice)
    sent_back = _ok(client.post(_task(crew, work) + "/reject", {"reason": "Too vague"}, format="json"))
    assert (sent_back["status"], sent_back["owner"]) == ("in_progress", crew.alice.key)
    assert _events(tenant_a, work)[-4:] == [
        (
            "commented",
            "human",
            actor_id,
            {"comment_text": "Task rejected. Reason: Too vague", "comment_type": "note"},
        ),
        ("rejected", "human", actor_id, {"reason": "Too vague"}),
        ("assigned", "human", actor_id, None),
        ("dispatched", "human", actor_id, None),
    ]
    dispatched = TaskEvent.objects.for_tenant(tenant_a).filter(task_id=work.pk, event_type="dispatched").get()
    assert dispatched.tenant_id == tenant_a.pk
    assert _status(tenant_a, follow) == "blocked"  # its blocker is being redone

    gated = board.create_task(crew.team, actor=crew.as_lead, subject="Spend money", require_approval=True)
    waiting = board.create_task(
        crew.team, actor=crew.as_lead, subject="After the money", blocked_by=[gated.pk]
    )
    rejected = _ok(client.post(_task(crew, gated) + "/reject", {}, format="json"))
    assert (rejected["status"], rejected["result"]) == ("cancelled", "Rejected by user")
    assert _events(tenant_a, gated)[-1] == ("rejected", "human", actor_id, {"reason": "Rejected by user"})
    assert _status(tenant_a, waiting) == "pending"

    before = tenant_state(tenant_a)
    for action in ("approve", "reject"):
        error = _error(client.post(_task(crew, waiting) + f"/{action}", {}, format="json"), 409, "conflict")
        assert error["message"] == f"cannot {action}: the task is pending, not in_review"
    assert tenant_state(tenant_a) == before


def test_human_board_actions_are_in_the_tenants_audit_log(hand, admin_a, tenant_a, crew):
    client, _ = hand
    created = _ok(client.post(_team(crew) + "/tasks/", {"subject": "Audited"}, format="json"), 201)
    url = _task(crew, created["id"])
    _ok(client.patch(url + "/", {"priority": 2}, format="json"))
    _ok(client.post(url + "/assign", {"agent": crew.alice.key}, format="json"))
    _ok(client.post(url + "/comment", {"text": "stuck", "type": "blocker"}, format="json"), 201)
    escalation = Escalation.objects.for_tenant(tenant_a).get()
    _ok(client.post(url + "/retry", {"reason": "try again"}, format="json"))
    _ok(client.post(url + "/cancel", {"reason": "stop"}, format="json"))
    _ok(client.post(_team(crew) + f"/escalations/{escalation.pk}/resolve", None, format="json"))
    assert client.delete(url + "/").status_code == 204
    rows = (
        AuditEvent.objects.for_tenant(tenant_a).filter(verb__startswith="team.").exclude(verb="team.created")
    )
    assert [(r.verb, r.actor_kind) for r in rows.order_by("created_at", "id")] == [
        ("team.task.created", "api_key"),
        ("team.task.updated", "api_key"),
        ("team.task.assigned", "api_key"),
        ("team.task.commented", "api_key"),
        ("team.task.retried", "api_key"),
        ("team.task.cancelled", "api_key"),
        ("team.escalation.resolved", "api_key"),
        ("team.task.deleted", "api_key"),
    ]
    commented = rows.get(verb="team.task.commented")
    assert (commented.target_id, commented.data["failed"], commented.data["status"]) == (
        created["id"],
        True,
        "failed",
    )
    before = AuditEvent.objects.for_tenant(tenant_a).count()
    _error(client.post(url + "/cancel", {}, format="json"), 404, "not_found")
    assert AuditEvent.objects.for_tenant(tenant_a).count() == before


def test_comments_are_bounded_and_recorded(hand, tenant_a, crew):
    client, actor_id = hand
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Discuss")
    body = _ok(client.post(_task(crew, task) + "/comment", {"text": "Looks good"}, format="json"), 201)
    assert (body["comment"]["type"], body["comment"]["user_id"], body["comment"]["agent"]) == (
        "note",
        actor_id,
        None,
    )
    assert (body["failed"], body["escalation"], body["task"]["comment_count"]) == (False, None, 1)
    assert _events(tenant_a, task)[-1] == (
        "commented",
        "human",
        actor_id,
        {"comment_text": "Looks good", "comment_type": "note"},
    )
    long_text = "é" * 4000  # 4000 characters, 8000 bytes: within the limit
    preview = _ok(client.post(_task(crew, task) + "/comment", {"text": long_text}, format="json"), 201)
    assert _events(tenant_a, task)[-1][3]["comment_text"] == "é" * 500 + "…"
    assert preview["task"]["comment_count"] == 2

    before = tenant_state(tenant_a)
    for payload, message in [
        ({"text": ""}, "text"),
        ({"text": "   "}, "text is required"),
        ({"text": "é" * 5001}, "text is longer than 10000 bytes"),
        ({"text": "x" * 10_001}, "text"),
        ({"text": "hi", "type": "shout"}, "type"),
        ({"text": 5}, "text: Must be a string, got number."),
    ]:
        error = _error(client.post(_task(crew, task) + "/comment", payload, format="json"), 400, "invalid")
        assert message in error["message"], payload
    assert tenant_state(tenant_a) == before


# --- blockers and escalations --------------------------------------------------------------------------


def test_blocker_fails_the_task_and_escalates_then_retry_and_resolve(hand, viewer_a, tenant_a, crew):
    client, actor_id = hand
    task = _in_progress(crew, "Deploy", owner=crew.bob)
    dependent = board.create_task(crew.team, actor=crew.as_lead, subject="Announce", blocked_by=[task.pk])
    body = _ok(
        client.post(
            _task(crew, task) + "/comment", {"text": "No deploy key", "type": "blocker"}, format="json"
        ),
        201,
    )
    assert body["failed"] is True
    assert body["task"]["status"] == "failed"
    assert body["task"]["result"] == "FAILED: Blocked: No deploy key"
    assert body["message"].startswith('Task #1 "Deploy" auto-failed due to blocker. Leader has been notified')
    escalation = body["escalation"]
    assert (
        escalation["member"],
        escalation["blocker"],
        escalation["notified_lead"],
        escalation["state"],
    ) == (
        crew.bob.key,
        "No deploy key",
        True,
        "open",
    )
    assert [(*e[:2], e[3]) for e in _events(tenant_a, task)[-2:]] == [
        ("commented", "human", {"comment_text": "No deploy key", "comment_type": "blocker"}),
        ("failed", "human", {"reason": "Blocked: No deploy key"}),
    ]
    assert _status(tenant_a, dependent) == "pending"  # a failed blocker unblocks like a completed one

    listed = _ok(viewer_a.get(_team(crew) + "/escalations/?state=open"))["results"]
    assert [(e["id"], e["task"]["id"], e["task"]["status"]) for e in listed] == [
        (escalation["id"], str(task.pk), "failed")
    ]

    _ok(client.post(_task(crew, task) + "/retry", {"reason": "key added"}, format="json"))
    assert _ok(viewer_a.get(_team(crew) + "/escalations/?state=open"))["results"] == []
    retried = _ok(viewer_a.get(_team(crew) + "/escalations/?state=retried"))["results"]
    assert [(e["id"], e["resolved_by"]) for e in retried] == [(escalation["id"], actor_id)]

    resolved = _ok(client.post(_team(crew) + f"/escalations/{escalation['id']}/resolve", None, format="json"))
    assert (resolved["state"], resolved["resolved_by"]) == ("resolved", actor_id)
    before = tenant_state(tenant_a)
    error = _error(
        client.post(_team(crew) + f"/escalations/{escalation['id']}/resolve", None, format="json"),
        409,
        "conflict",
    )
    assert error["message"] == "the escalation is already resolved"
    _error(
        client.post(_team(crew) + f"/escalations/{task.pk}/resolve", None, format="json"), 404, "not_found"
    )
    assert tenant_state(tenant_a) == before


def test_blocker_with_escalation_turned_off_fails_the_task_without_notifying_the_lead(
    hand, admin_a, tenant_a, crew
):
    client, _ = hand
    _ok(
        admin_a.patch(
            _team(crew) + "/",
            {"settings": {"version": 2, "blocker_escalation": {"enabled": False}}},
            format="json",
        )
    )
    task = _in_progress(crew, "Migrate")
    body = _ok(
        client.post(_task(crew, task) + "/comment", {"text": "DB is down", "type": "blocker"}, format="json"),
        201,
    )
    assert (body["failed"], body["task"]["status"]) == (True, "failed")
    assert "Escalation to the leader is turned off for this team" in body["message"]
    assert body["escalation"]["notified_lead"] is False
    assert Escalation.objects.for_tenant(tenant_a).get().notified_lead is False


def test_a_blocker_on_a_task_not_in_progress_only_saves_the_comment(hand, tenant_a, crew):
    client, _actor_id = hand
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Later")
    body = _ok(
        client.post(
            _task(crew, task) + "/comment", {"text": "Waiting on legal", "type": "blocker"}, format="json"
        ),
        201,
    )
    assert (body["failed"], body["escalation"], body["task"]["status"]) == (False, None, "pending")
    assert "no escalation needed" in body["message"]
    assert [e[0] for e in _events(tenant_a, task)] == ["created", "commented"]
    assert not Escalation.objects.for_tenant(tenant_a).exists()


# --- reading the board ---------------------------------------------------------------------------------


@pytest.fixture
def stocked(crew: Crew) -> dict[str, Task]:
    """Seven tasks in several statuses, owners, chats and types."""
    lead = crew.as_lead
    tasks = {
        "deploy": board.create_task(crew.team, actor=lead, subject="Deploy the API", priority=5),
        "docs": board.create_task(
            crew.team, actor=lead, subject="Write deployment docs", description="for the api"
        ),
        "bug": board.create_task(
            crew.team, actor=lead, subject="Fix login bug", task_type="bugfix", priority=9
        ),
        "chat": board.create_task(crew.team, actor=lead, subject="Answer the customer", chat_id="c-1"),
        "review": board.create_task(crew.team, actor=lead, subject="Approve budget", require_approval=True),
        "done": board.create_task(crew.team, actor=lead, subject="Old release"),
        "bob": board.create_task(crew.team, actor=lead, subject="Bob's chore", owner=crew.bob),
    }
    board.assign(crew.team, tasks["deploy"].pk, agent=crew.alice, actor=lead)
    board.assign(crew.team, tasks["done"].pk, agent=crew.alice, actor=lead)
    board.complete(crew.team, tasks["done"].pk, result="ok", actor=crew.as_alice)
    return tasks


def _subjects(client: APIClient, url: str) -> list[str]:
    return [t["subject"] for t in _ok(client.get(url))["results"]]


def test_task_list_filters(viewer_a, crew, stocked):
    url = _team(crew) + "/tasks/"
    assert _subjects(viewer_a, url) == [
        "Fix login bug",
        "Deploy the API",
        "Write deployment docs",
        "Answer the customer",
        "Approve budget",
        "Old release",
        "Bob's chore",
    ]
    assert _subjects(viewer_a, url + "?status=in_progress,completed") == ["Deploy the API", "Old release"]
    assert "Old release" not in _subjects(viewer_a, url + "?status=active")
    assert len(_subjects(viewer_a, url + "?status=all")) == 7
    assert _subjects(viewer_a, url + f"?owner={crew.alice.key}") == ["Deploy the API", "Old release"]
    assert _subjects(viewer_a, url + "?chat_id=c-1") == ["Answer the customer"]
    assert _subjects(viewer_a, url + "?task_type=bugfix") == ["Fix login bug"]
    assert _subjects(viewer_a, url + "?status=pending&owner=" + crew.bob.key) == ["Bob's chore"]


def test_a_list_cuts_long_results_and_the_detail_has_them_whole(viewer_a, crew):
    task = _in_progress(crew, "Long report")
    board.complete(crew.team, task.pk, result="r" * 2000, actor=crew.as_alice)
    listed = _ok(viewer_a.get(_team(crew) + "/tasks/?status=completed"))["results"]
    assert [t["result"] for t in listed] == ["r" * 500 + "…"]
    assert _ok(viewer_a.get(_task(crew, task) + "/"))["result"] == "r" * 2000


def test_task_search_is_full_text_with_prefixes_and_ranked(viewer_a, crew, stocked):
    url = _team(crew) + "/tasks/?q="
    assert sorted(_subjects(viewer_a, url + "deploy")) == ["Deploy the API", "Write deployment docs"]
    assert _subjects(viewer_a, url + "deploy%20api") == ["Deploy the API", "Write deployment docs"]
    assert _subjects(viewer_a, url + "login&status=pending") == ["Fix login bug"]
    assert _subjects(viewer_a, url + "nothing-like-this") == []
    error = _error(viewer_a.get(url + "%21%21%21"), 400, "invalid")
    assert error["message"] == "q: no searchable words (letters or digits)."


def test_task_list_pages_by_number_and_by_cursor(viewer_a, crew, stocked, django_assert_max_num_queries):
    url = _team(crew) + "/tasks/"
    everything = _subjects(viewer_a, url)
    first = _ok(viewer_a.get(url + "?page=1&page_size=3"))
    assert first["count"] == 7
    assert [t["subject"] for t in first["results"]] == everything[:3]
    assert [t["subject"] for t in _ok(viewer_a.get(url + "?page=3&page_size=3"))["results"]] == everything[6:]

    seen: list[str] = []
    page = _ok(viewer_a.get(url + "?page_size=2"))
    assert "count" not in page
    while True:
        seen += [t["subject"] for t in page["results"]]
        if not page["next"]:
            break
        with django_assert_max_num_queries(6):
            response = viewer_a.get(page["next"])
        page = _ok(response)
    assert seen == everything


def test_task_list_input_errors(viewer_a, crew, stocked):
    url = _team(crew) + "/tasks/"
    for query, message in [
        ("?status=done", "status: Unknown status 'done'"),
        ("?page=0", "page"),
        ("?page_size=201", "page_size"),
        ("?q=deploy&cursor=abc", "cursor: Search results are ranked"),
        ("?cursor=abc&page=2", "page: Give cursor or page, not both."),
        ("?colour=red", "colour: Unknown field."),
        ("?q=" + "x" * 501, "q"),
    ]:
        error = _error(viewer_a.get(url + query), 400, "invalid")
        assert message in error["message"], query
    _error(viewer_a.get(url + "?cursor=not-a-cursor"), 404, "not_found")


def test_task_list_is_bounded_in_queries(viewer_a, crew, django_assert_max_num_queries):
    for i in range(40):
        board.create_task(crew.team, actor=crew.as_lead, subject=f"Task {i}", owner=crew.alice)
    with django_assert_max_num_queries(7):
        body = _ok(viewer_a.get(_team(crew) + "/tasks/?page=1"))
    assert body["count"] == 40


def test_task_detail_has_blockers_comments_events_and_attachments(viewer_a, hand, crew):
    client, actor_id = hand
    first = board.create_task(crew.team, actor=crew.as_lead, subject="First")
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Second", blocked_by=[first.pk])
    board.comment(crew.team, task.pk, actor=crew.as_alice, text="On it")
    _ok(client.post(_task(crew, task) + "/comment", {"text": "Thanks"}, format="json"), 201)
    board.attach(
        crew.team,
        task.pk,
        path="reports/plan.md",
        actor=crew.as_alice,
        file_size=12,
        mime_type="text/markdown",
    )
    detail = _ok(viewer_a.get(_task(crew, task) + "/"))
    assert (detail["subject"], detail["status"], detail["comment_count"], detail["attachment_count"]) == (
        "Second",
        "blocked",
        2,
        1,
    )
    assert detail["blockers"] == [
        {
            "id": str(first.pk),
            "identifier": first.identifier,
            "subject": "First",
            "status": "pending",
            "owner": None,
        }
    ]
    assert [(c["agent"], c["user_id"], c["content"]) for c in detail["comments"]] == [
        (crew.alice.key, "", "On it"),
        (None, actor_id, "Thanks"),
    ]
    assert [(e["event_type"], e["actor_id"]) for e in detail["events"]] == [
        ("created", crew.lead.key),
        ("commented", crew.alice.key),
        ("commented", actor_id),
        ("attachment_added", crew.alice.key),
    ]
    assert [(a["path"], a["file_size"], a["created_by_agent"]) for a in detail["attachments"]] == [
        ("reports/plan.md", 12, crew.alice.key)
    ]


def test_event_trail_is_newest_first_with_filters_and_cursor(viewer_a, tenant_a, crew, stocked):
    url = _team(crew) + "/events/"
    everything = list(
        TaskEvent.objects.for_tenant(tenant_a)
        .filter(team=crew.team)
        .order_by("-created_at", "-id")
        .values_list("id", flat=True)
    )
    seen: list[str] = []
    page = _ok(viewer_a.get(url + "?page_size=4"))
    while True:
        seen += [e["id"] for e in page["results"]]
        if not page["next"]:
            break
        page = _ok(viewer_a.get(page["next"]))
    assert seen == [str(i) for i in everything]

    done = stocked["done"]
    assert [e["event_type"] for e in _ok(viewer_a.get(url + f"?task={done.pk}"))["results"]] == [
        "completed",
        "assigned",
        "created",
    ]
    assert {e["task"] for e in _ok(viewer_a.get(url + "?event_type=assigned"))["results"]} == {
        str(stocked["deploy"].pk),
        str(done.pk),
    }
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    assert _ok(viewer_a.get(url + f"?since={later}"))["results"] == []
    assert len(_ok(viewer_a.get(url + f"?until={later}&page_size=200"))["results"]) == len(everything)
    for query, field in [
        ("?event_type=exploded", "event_type"),
        ("?task=T-001", "task"),
        ("?since=yesterday", "since"),
    ]:
        error = _error(viewer_a.get(url + query), 400, "invalid")
        assert error["message"].startswith(field), query


# --- grants --------------------------------------------------------------------------------------------


def test_user_grants_are_added_listed_and_withdrawn_with_audit(admin_a, viewer_a, tenant_a, crew):
    url = _team(crew) + "/grants/"
    grant = _ok(admin_a.post(url, {"user_id": " ana@a.test ", "role": "operator"}, format="json"), 201)
    assert (grant["user_id"], grant["role"], grant["team"]) == ("ana@a.test", "operator", str(crew.team.pk))
    assert grant["granted_by"].startswith("key ")
    viewer_grant = _ok(admin_a.post(url, {"user_id": "ben"}, format="json"), 201)
    assert viewer_grant["role"] == "viewer"
    assert [g["user_id"] for g in _ok(viewer_a.get(url))["results"]] == ["ana@a.test", "ben"]

    before = tenant_state(tenant_a)
    error = _error(
        admin_a.post(url, {"user_id": "ana@a.test", "role": "viewer"}, format="json"), 409, "conflict"
    )
    assert "already has a grant" in error["message"]
    for body, message in [
        ({"user_id": "x", "role": "admin"}, "role"),
        ({"user_id": "   "}, "user_id: This field may not be blank."),
        ({"user_id": "u" * 256}, "user_id"),
        ({"role": "viewer"}, "user_id"),
    ]:
        error = _error(admin_a.post(url, body, format="json"), 400, "invalid")
        assert message in error["message"], body
    assert tenant_state(tenant_a) == before

    assert admin_a.delete(url + f"{grant['id']}/").status_code == 204
    _error(admin_a.delete(url + f"{grant['id']}/"), 404, "not_found")
    assert list(TeamUserGrant.objects.for_tenant(tenant_a).values_list("user_id", flat=True)) == ["ben"]
    verbs = (
        AuditEvent.objects.for_tenant(tenant_a).filter(target_type="team_user_grant").order_by("created_at")
    )
    assert list(verbs.values_list("verb", flat=True)) == [
        "team.grant_created",
        "team.grant_created",
        "team.grant_deleted",
    ]


# --- isolation -----------------------------------------------------------------------------------------


def test_another_tenants_team_and_tasks_are_404_everywhere_with_nothing_changed(
    outsider, tenant_a, tenant_b, crew
):
    task = _in_progress(crew, "A's secret")
    theirs = make_crew(tenant_b, "Theirs")
    before = tenant_state(tenant_a)
    # A's task under B's own team: not on that board either
    b_url = f"/api/v1/teams/{theirs.team.pk}/tasks/{task.pk}"
    for method, url, body in [
        ("get", b_url + "/", None),
        ("patch", b_url + "/", {"subject": "hijacked"}),
        ("delete", b_url + "/", None),
        ("post", b_url + "/cancel", {"reason": "B"}),
        ("post", b_url + "/comment", {"text": "B", "type": "blocker"}),
        ("post", b_url + "/assign", {"agent": theirs.alice.key}),
    ]:
        error = _error(getattr(outsider, method)(url, body, format="json"), 404, "not_found")
        assert "A's secret" not in error["message"]
    # B's task list and event trail hold nothing of A's
    assert _ok(outsider.get(f"/api/v1/teams/{theirs.team.pk}/tasks/"))["results"] == []
    assert str(task.pk) not in outsider.get(f"/api/v1/teams/{theirs.team.pk}/events/").content.decode()
    # B creating a task blocked by A's task, or a team led by A's agent, is refused
    error = _error(
        outsider.post(
            f"/api/v1/teams/{theirs.team.pk}/tasks/",
            {"subject": "x", "blocked_by": [str(task.pk)]},
            format="json",
        ),
        400,
        "invalid",
    )
    assert "on this team's board" in error["message"]
    _error(
        outsider.post(
            "/api/v1/teams/",
            {"name": "Spy", "lead": crew.lead.key, "members": [crew.alice.key]},
            format="json",
        ),
        400,
        "invalid",
    )
    assert tenant_state(tenant_a) == before


def test_a_task_of_another_team_in_the_same_tenant_is_404(member_a, tenant_a, crew):
    other = make_crew(tenant_a, "Others")
    task = board.create_task(other.team, actor=other.as_lead, subject="Theirs")
    before = tenant_state(tenant_a)
    _error(member_a.get(_task(crew, task) + "/"), 404, "not_found")
    _error(member_a.post(_task(crew, task) + "/cancel", {}, format="json"), 404, "not_found")
    assert tenant_state(tenant_a) == before
