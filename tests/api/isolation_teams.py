"""Tenant-isolation cases for the routes of teams, tasks, escalations and team events (merged into
``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from collections.abc import Callable

from apps.accounts import services as tenant_services
from apps.teams import board, services
from apps.teams.board import BoardActor
from apps.teams.models import Team
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case


def make_board(tenant: Tenant, name: str = "Secret") -> dict[str, str]:
    """A team of ``tenant`` with a task in each state the routes act on, an open escalation and a user
    grant; returns their ids (and member keys) by name."""
    system = Actor.system(tenant)
    prefix = name.lower()
    lead, alice, bob, carol, dave = (
        tenant_services.agent_create(actor=system, key=f"{prefix}-{role}", name=role.title())
        for role in ("lead", "alice", "bob", "carol", "dave")
    )
    created = services.team_create(actor=system, name=name, lead=lead, members=[alice, bob])
    team = Team.objects.for_tenant(tenant).select_related("tenant", "lead").get(pk=created.pk)
    as_lead, as_bob = BoardActor.of_agent(lead), BoardActor.of_agent(bob)

    pending = board.create_task(team, actor=as_lead, subject=f"{name} pending work")
    failed = board.create_task(team, actor=as_lead, subject=f"{name} failed work")
    board.assign(team, failed.pk, agent=alice, actor=as_lead)
    board.fail(team, failed.pk, message="it broke", actor=as_lead)
    review = board.create_task(team, actor=as_lead, subject=f"{name} work to approve", require_approval=True)
    done = board.create_task(team, actor=as_lead, subject=f"{name} finished work")
    board.assign(team, done.pk, agent=alice, actor=as_lead)
    board.complete(team, done.pk, result="shipped", actor=as_lead)
    blocked = board.create_task(team, actor=as_lead, subject=f"{name} blocked work")
    board.assign(team, blocked.pk, agent=bob, actor=as_lead)
    escalation = board.comment(
        team, blocked.pk, actor=as_bob, text="no credentials", kind="blocker"
    ).escalation
    assert escalation is not None
    grant = services.grant_create(actor=system, team=team, user_id=f"{prefix}-user@a.test", role="viewer")
    return {
        "team": str(team.pk),
        "task_pending": str(pending.pk),
        "task_failed": str(failed.pk),
        "task_review": str(review.pk),
        "task_done": str(done.pk),
        "escalation": str(escalation.pk),
        "grant": str(grant.pk),
        "member": bob.key,
        "outside_agent": carol.key,
        "free_agent": dave.key,
    }


def _kwargs(*names: str) -> Callable[[Tenant], dict[str, str]]:
    """A ``Case.make`` that builds the board and returns the URL kwargs ``names`` (``pk`` is the team)."""
    url_names = {
        "task_id": "task_pending",
        "key": "member",
        "escalation_id": "escalation",
        "grant_id": "grant",
    }

    def make(tenant: Tenant) -> dict[str, str]:
        made = make_board(tenant)
        return {"pk": made["team"], **{name: made[url_names[name]] for name in names}}

    return make


CASES: dict[str, Case] = {
    "team-list": Case(make=_kwargs(), collection=True),
    "team-detail": Case(
        make=_kwargs(), writes=[("patch", {"name": "hijacked", "settings": {}}), ("delete", None)]
    ),
    "team-member-list": Case(make=_kwargs(), writes=[("post", {"agent": "secret-carol"})]),
    "team-member-detail": Case(make=_kwargs("key"), writes=[("delete", None)]),
    "team-task-list": Case(
        make=_kwargs(), writes=[("post", {"subject": "B's task", "owner": "secret-alice"})]
    ),
    "team-task-detail": Case(
        make=_kwargs("task_id"), writes=[("patch", {"subject": "hijacked", "priority": 9}), ("delete", None)]
    ),
    "team-task-assign": Case(make=_kwargs("task_id"), writes=[("post", {"agent": "secret-alice"})]),
    "team-task-cancel": Case(make=_kwargs("task_id"), writes=[("post", {"reason": "B says so"})]),
    "team-task-retry": Case(make=_kwargs("task_id"), writes=[("post", {"reason": "again"})]),
    "team-task-approve": Case(make=_kwargs("task_id"), writes=[("post", None)]),
    "team-task-reject": Case(make=_kwargs("task_id"), writes=[("post", {"reason": "B says no"})]),
    "team-task-comment": Case(
        make=_kwargs("task_id"), writes=[("post", {"text": "B was here", "type": "blocker"})]
    ),
    "team-escalation-list": Case(make=_kwargs()),
    "team-escalation-resolve": Case(make=_kwargs("escalation_id"), writes=[("post", None)]),
    "team-event-list": Case(make=_kwargs()),
    "team-grant-list": Case(make=_kwargs(), writes=[("post", {"user_id": "spy@b.test", "role": "operator"})]),
    "team-grant-detail": Case(make=_kwargs("grant_id"), writes=[("delete", None)]),
}
