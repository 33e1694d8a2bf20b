"""Team user grants decide which humans reach a team, through the REST API and the dashboard.

A team without grants is open (tenant roles decide). A team with a grant is restricted for logged-in
users below admin: without a grant of their own (by email, any case) it does not exist for them; a
viewer grant reads but may not act (403); an operator grant acts. Admins and API keys are unaffected,
and withdrawing the last grant opens the team again.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from apps.audit.models import AuditEvent
from apps.teams import board, services
from apps.teams.models import Escalation, Task, TeamUserGrant
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api.tenant_state import tenant_state
from tests.teams.conftest import Crew, make_crew

pytestmark = pytest.mark.django_db

MIA = "mia@tenant-a.test"


def grant(crew: Crew, user_id: str, role: str) -> TeamUserGrant:
    return services.grant_create(
        actor=Actor.system(crew.team.tenant), team=crew.team, user_id=user_id, role=role
    )


def api_user(tenant: Tenant, role: str, email: str) -> APIClient:
    client = APIClient()
    client.force_login(factories.make_user(tenant, role, email=email))
    return client


def page_user(tenant: Tenant, role: str, email: str) -> Client:
    client = Client()
    client.force_login(factories.make_user(tenant, role, email=email))
    return client


def escalated(crew: Crew) -> tuple[Task, Escalation]:
    """A task in progress whose member reported a blocker: failed, with an open escalation."""
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Migrate the database")
    board.assign(crew.team, task.pk, agent=crew.alice, actor=crew.as_lead)
    board.comment(crew.team, task.pk, actor=crew.as_alice, text="No access to staging", kind="blocker")
    escalation = Escalation.objects.for_tenant(crew.team.tenant).get(task_id=task.pk)
    return Task.objects.for_tenant(crew.team.tenant).get(pk=task.pk), escalation


@pytest.fixture
def restricted(tenant_a: Tenant) -> tuple[Crew, Crew, Task, Escalation]:
    """Builders, restricted by a grant to someone else, with an escalated task; and Openers, open."""
    crew = make_crew(tenant_a)
    opener = make_crew(tenant_a, "Openers")
    task, escalation = escalated(crew)
    grant(crew, "someone@tenant-a.test", TeamUserGrant.Role.OPERATOR)
    return crew, opener, task, escalation


def _team(crew: Crew) -> str:
    return f"/api/v1/teams/{crew.team.pk}/"


def _error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    return error


def _names(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [t["name"] for t in response.json()["results"]]


def _reads(crew: Crew, task: Task) -> list[str]:
    base = _team(crew)
    return [
        base,
        f"{base}tasks/",
        f"{base}tasks/{task.pk}/",
        f"{base}escalations/",
        f"{base}events/",
        f"{base}grants/",
        f"{base}members/",
    ]


def _acts(crew: Crew, task: Task, escalation: Escalation) -> list[tuple[str, dict[str, Any]]]:
    base = _team(crew)
    return [
        (f"{base}tasks/", {"subject": "Sneaky"}),
        (f"{base}tasks/{task.pk}/retry", {}),
        (f"{base}tasks/{task.pk}/cancel", {}),
        (f"{base}tasks/{task.pk}/comment", {"text": "hello"}),
        (f"{base}escalations/{escalation.pk}/resolve", {}),
    ]


# --- the REST API ---------------------------------------------------------------------------------------


def test_api_a_member_without_a_grant_finds_no_such_team(tenant_a, restricted):
    crew, opener, task, escalation = restricted
    client = api_user(tenant_a, Role.MEMBER, MIA)
    before = tenant_state(tenant_a)

    assert _names(client.get("/api/v1/teams/")) == ["Openers"]
    for url in _reads(crew, task):
        _error(client.get(url), 404, "not_found")
    for url, body in _acts(crew, task, escalation):
        _error(client.post(url, body, format="json"), 404, "not_found")
    _error(client.patch(f"{_team(crew)}tasks/{task.pk}/", {"priority": 5}, format="json"), 404, "not_found")
    _error(client.delete(f"{_team(crew)}tasks/{task.pk}/"), 404, "not_found")

    assert tenant_state(tenant_a) == before
    # The open team stays the member's to act on.
    created = client.post(f"{_team(opener)}tasks/", {"subject": "Open work"}, format="json")
    assert created.status_code == 201, created.content


def test_api_a_viewer_grant_reads_but_may_not_act(tenant_a, restricted):
    crew, _, task, escalation = restricted
    grant(crew, MIA.upper(), TeamUserGrant.Role.VIEWER)
    client = api_user(tenant_a, Role.MEMBER, MIA)
    before = tenant_state(tenant_a)

    assert _names(client.get("/api/v1/teams/")) == ["Builders", "Openers"]
    for url in _reads(crew, task):
        assert client.get(url).status_code == 200, url
    assert client.get(f"{_team(crew)}tasks/").json()["results"][0]["identifier"] == task.identifier
    for url, body in _acts(crew, task, escalation):
        error = _error(client.post(url, body, format="json"), 403, "permission_denied")
        assert error["message"] == (
            "Your grant on team Builders is viewer: acting on its tasks and escalations needs an "
            "operator grant."
        )
    _error(
        client.patch(f"{_team(crew)}tasks/{task.pk}/", {"priority": 5}, format="json"),
        403,
        "permission_denied",
    )
    assert tenant_state(tenant_a) == before


def test_api_an_operator_grant_acts(tenant_a, restricted):
    crew, _, task, escalation = restricted
    grant(crew, "Mia@Tenant-A.test", TeamUserGrant.Role.OPERATOR)
    client = api_user(tenant_a, Role.MEMBER, MIA)

    resolved = client.post(f"{_team(crew)}escalations/{escalation.pk}/resolve")
    assert resolved.status_code == 200, resolved.content
    assert resolved.json()["state"] == Escalation.State.RESOLVED
    retried = client.post(f"{_team(crew)}tasks/{task.pk}/retry", {"reason": "Access granted"}, format="json")
    assert retried.status_code == 200, retried.content
    assert retried.json()["status"] == Task.Status.IN_PROGRESS
    created = client.post(f"{_team(crew)}tasks/", {"subject": "Follow-up"}, format="json")
    assert created.status_code == 201, created.content
    assert Task.objects.for_tenant(tenant_a).filter(team=crew.team, subject="Follow-up").exists()


def test_api_an_operator_grant_does_not_lift_a_viewer_role(tenant_a, restricted):
    crew, _, task, _ = restricted
    grant(crew, MIA, TeamUserGrant.Role.OPERATOR)
    client = api_user(tenant_a, Role.VIEWER, MIA)
    before = tenant_state(tenant_a)
    assert client.get(f"{_team(crew)}tasks/{task.pk}/").status_code == 200
    _error(client.post(f"{_team(crew)}tasks/{task.pk}/cancel", {}, format="json"), 403, "permission_denied")
    assert tenant_state(tenant_a) == before


def test_api_admins_and_api_keys_are_not_restricted(tenant_a, restricted):
    crew, _, task, _ = restricted
    admin = api_user(tenant_a, Role.ADMIN, "ada@tenant-a.test")
    key = factories.key_client(factories.make_api_key(tenant_a, Role.MEMBER))
    for client in (admin, key):
        assert _names(client.get("/api/v1/teams/")) == ["Builders", "Openers"]
        assert client.get(f"{_team(crew)}tasks/{task.pk}/").status_code == 200
    cancelled = key.post(f"{_team(crew)}tasks/{task.pk}/cancel", {"reason": "By key"}, format="json")
    assert cancelled.status_code == 200, cancelled.content
    created = admin.post(f"{_team(crew)}tasks/", {"subject": "By admin"}, format="json")
    assert created.status_code == 201, created.content


def test_api_withdrawing_the_last_grant_reopens_the_team(tenant_a, restricted):
    crew, _, task, _ = restricted
    mia = api_user(tenant_a, Role.MEMBER, MIA)
    admin = api_user(tenant_a, Role.ADMIN, "ada@tenant-a.test")
    assert _names(mia.get("/api/v1/teams/")) == ["Openers"]

    grants = admin.get(f"{_team(crew)}grants/").json()["results"]
    assert [g["user_id"] for g in grants] == ["someone@tenant-a.test"]
    assert admin.delete(f"{_team(crew)}grants/{grants[0]['id']}/").status_code == 204

    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="team.grant_deleted").count() == 1
    assert _names(mia.get("/api/v1/teams/")) == ["Builders", "Openers"]
    cancelled = mia.post(f"{_team(crew)}tasks/{task.pk}/cancel", {}, format="json")
    assert cancelled.status_code == 200, cancelled.content


def test_api_another_tenants_grant_does_not_open_a_team(tenant_a, tenant_b, restricted):
    crew, _, task, _ = restricted
    theirs = make_crew(tenant_b, "Theirs")
    grant(theirs, MIA, TeamUserGrant.Role.OPERATOR)
    client = api_user(tenant_a, Role.MEMBER, MIA)
    _error(client.get(f"{_team(crew)}tasks/{task.pk}/"), 404, "not_found")


# --- the dashboard --------------------------------------------------------------------------------------


def _pages(crew: Crew, task: Task) -> list[str]:
    ids = [crew.team.pk]
    return [
        reverse("dashboard:team_board", args=ids),
        reverse("dashboard:team_task", args=[*ids, task.pk]),
        reverse("dashboard:team_escalations", args=ids),
        reverse("dashboard:team_audit", args=ids),
        reverse("dashboard:team_task_create", args=ids),
        reverse("dashboard:team_task_cancel", args=[*ids, task.pk]),
    ]


def _posts(crew: Crew, task: Task, escalation: Escalation) -> list[tuple[str, dict[str, Any]]]:
    ids = [crew.team.pk]
    return [
        (reverse("dashboard:team_task_create", args=ids), {"subject": "Sneaky", "priority": 0}),
        (reverse("dashboard:team_task_retry", args=[*ids, task.pk]), {}),
        (reverse("dashboard:team_task_cancel", args=[*ids, task.pk]), {"reason": "no"}),
        (reverse("dashboard:team_task_comment", args=[*ids, task.pk]), {"text": "hi", "type": "note"}),
        (reverse("dashboard:team_escalation_retry", args=[*ids, escalation.pk]), {}),
        (reverse("dashboard:team_escalation_resolve", args=[*ids, escalation.pk]), {}),
    ]


def test_pages_a_member_without_a_grant_finds_no_such_team(tenant_a, restricted):
    crew, _, task, escalation = restricted
    client = page_user(tenant_a, Role.MEMBER, MIA)
    before = tenant_state(tenant_a)

    listing = client.get(reverse("dashboard:teams"))
    assert listing.status_code == 200
    assert b"Openers" in listing.content
    assert b"Builders" not in listing.content
    inbox = client.get(reverse("dashboard:escalations"))
    assert inbox.status_code == 200
    assert b"No access to staging" not in inbox.content
    assert str(crew.team.pk).encode() not in inbox.content
    for url in _pages(crew, task):
        assert client.get(url).status_code == 404, url
    for url, body in _posts(crew, task, escalation):
        assert client.post(url, body).status_code == 404, url
    assert tenant_state(tenant_a) == before


def test_pages_a_viewer_grant_reads_but_may_not_act(tenant_a, restricted):
    crew, _, task, escalation = restricted
    grant(crew, MIA, TeamUserGrant.Role.VIEWER)
    client = page_user(tenant_a, Role.MEMBER, MIA)
    before = tenant_state(tenant_a)

    assert b"Builders" in client.get(reverse("dashboard:teams")).content
    inbox = client.get(reverse("dashboard:escalations"))
    assert b"No access to staging" in inbox.content
    board_page = client.get(reverse("dashboard:team_board", args=[crew.team.pk]))
    assert board_page.status_code == 200
    assert task.identifier.encode() in board_page.content
    assert reverse("dashboard:team_task_create", args=[crew.team.pk]).encode() not in board_page.content
    detail = client.get(reverse("dashboard:team_task", args=[crew.team.pk, task.pk]))
    assert detail.status_code == 200
    assert reverse("dashboard:team_task_retry", args=[crew.team.pk, task.pk]).encode() not in detail.content
    for url, body in _posts(crew, task, escalation):
        refused = client.post(url, body)
        assert refused.status_code == 403, url
        assert b"Your grant on team Builders is viewer" in refused.content
    assert tenant_state(tenant_a) == before


def test_pages_an_operator_grant_acts(tenant_a, restricted):
    crew, _, task, _ = restricted
    grant(crew, MIA.upper(), TeamUserGrant.Role.OPERATOR)
    client = page_user(tenant_a, Role.MEMBER, MIA)
    detail = client.get(reverse("dashboard:team_task", args=[crew.team.pk, task.pk]))
    assert reverse("dashboard:team_task_retry", args=[crew.team.pk, task.pk]).encode() in detail.content

    response = client.post(
        reverse("dashboard:team_task_cancel", args=[crew.team.pk, task.pk]), {"reason": "Done"}
    )
    assert response.status_code == 302
    assert Task.objects.for_tenant(tenant_a).get(pk=task.pk).status == Task.Status.CANCELLED


def test_pages_an_admin_is_not_restricted(tenant_a, restricted):
    crew, _, task, _ = restricted
    client = page_user(tenant_a, Role.ADMIN, "ada@tenant-a.test")
    assert b"Builders" in client.get(reverse("dashboard:teams")).content
    assert client.get(reverse("dashboard:team_board", args=[crew.team.pk])).status_code == 200
    response = client.post(
        reverse("dashboard:team_task_cancel", args=[crew.team.pk, task.pk]), {"reason": "x"}
    )
    assert response.status_code == 302
    assert Task.objects.for_tenant(tenant_a).get(pk=task.pk).status == Task.Status.CANCELLED


def test_pages_withdrawing_the_last_grant_reopens_the_team(tenant_a, restricted):
    crew, *_ = restricted
    client = page_user(tenant_a, Role.MEMBER, MIA)
    board_url = reverse("dashboard:team_board", args=[crew.team.pk])
    assert client.get(board_url).status_code == 404
    only = TeamUserGrant.objects.for_tenant(tenant_a).get(team=crew.team)
    services.grant_delete(actor=Actor.system(tenant_a), team=crew.team, grant=only)
    assert client.get(board_url).status_code == 200
    assert b"Builders" in client.get(reverse("dashboard:teams")).content
