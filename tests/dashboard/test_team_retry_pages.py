"""Retrying an escalated task with new instructions from the dashboard (the escalations inbox and the
task's page): the instructions reach the retried task's dispatch (its retry event, a comment, the audit
log); too long ones, a viewer and another tenant's user change nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.teams import board
from apps.teams.models import Escalation, Task, TaskComment, TaskEvent
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api.tenant_state import tenant_state
from tests.dashboard.personas import login
from tests.teams.conftest import Crew, make_crew

pytestmark = pytest.mark.django_db


@pytest.fixture
def crew(tenant_a: Tenant) -> Crew:
    return make_crew(tenant_a)


def blocked(crew: Crew) -> Task:
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Count the rows")
    board.assign(crew.team, task.pk, agent=crew.alice, actor=crew.as_lead)
    board.comment(crew.team, task.pk, actor=crew.as_alice, text="No access", kind="blocker")
    return task


def retry_url(crew: Crew, task: Task) -> str:
    escalation = Escalation.objects.for_tenant(crew.team.tenant).get(task=task)
    return reverse("dashboard:team_escalation_retry", args=[crew.team.pk, escalation.pk])


def test_the_inbox_retries_with_instructions(member: Any, crew: Crew, tenant_a: Tenant) -> None:
    task = blocked(crew)
    inbox = reverse("dashboard:team_escalations", args=[crew.team.pk])
    page = member.get(inbox).content.decode()
    escalation = Escalation.objects.for_tenant(tenant_a).get(task=task)
    assert f'<label class="small" for="retry-instructions-{escalation.pk}">New instructions' in page
    assert f'id="retry-instructions-{escalation.pk}" name="instructions"' in page

    response = member.post(retry_url(crew, task), {"next": inbox, "instructions": "Use <b>replica</b> 2"})
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.status == "in_progress"
    event = TaskEvent.objects.for_tenant(tenant_a).get(task=task, event_type="retried")
    assert event.data == {"instructions": "Use <b>replica</b> 2"}
    assert (
        TaskComment.objects.for_tenant(tenant_a)
        .filter(task=task, content="Retry instructions: Use <b>replica</b> 2", user_id="member@a.test")
        .exists()
    )
    audit = AuditEvent.objects.for_tenant(tenant_a).get(verb="team.task.retried")
    assert audit.data["instructions"] == "Use <b>replica</b> 2"
    shown = member.get(reverse("dashboard:team_task", args=[crew.team.pk, task.pk])).content.decode()
    assert "Retry instructions: Use &lt;b&gt;replica&lt;/b&gt; 2" in shown


def test_the_task_page_offers_instructions_with_a_retry(member: Any, crew: Crew, tenant_a: Tenant) -> None:
    task = blocked(crew)
    page = member.get(reverse("dashboard:team_task", args=[crew.team.pk, task.pk])).content.decode()
    assert 'name="instructions"' in page
    assert '<label for="retry_instructions"' in page
    member.post(
        reverse("dashboard:team_task_retry", args=[crew.team.pk, task.pk]), {"instructions": "Go slowly"}
    )
    assert TaskEvent.objects.for_tenant(tenant_a).get(task=task, event_type="retried").data == {
        "instructions": "Go slowly"
    }


def test_refusals_change_nothing(
    member: Any, viewer: Any, crew: Crew, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    task = blocked(crew)
    before = tenant_state(tenant_a)
    long = member.post(retry_url(crew, task), {"instructions": "x" * 4001}, follow=True).content.decode()
    assert "the instructions at most 4000" in long
    assert viewer.post(retry_url(crew, task), {"instructions": "go"}).status_code == 403
    outsider = login(factories.make_user(tenant_b, Role.OWNER, email="owner@b.test"))
    assert outsider.post(retry_url(crew, task), {"instructions": "go"}).status_code == 404
    assert tenant_state(tenant_a) == before
