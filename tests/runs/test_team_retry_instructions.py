"""A retry with new instructions, through the REST API: the instructions go, whole, into the retried
task's dispatch message, so the member's run (built-in runner) finds them in its session
(``team-task:<task id>``); they are kept as a comment, in the retry event and in the audit log. Too long
instructions, a viewer, and another tenant's caller change nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django_q.models import OrmQ

from apps.audit.models import AuditEvent
from apps.runs import teamwork
from apps.teams import board
from apps.teams.models import Escalation, Task, TaskComment, TaskEvent
from apps.tenants.models import Tenant
from tests.api.tenant_state import tenant_state
from tests.llm.fake_provider import chat_answer
from tests.runs.test_team_runs import builtin_runner
from tests.teams.conftest import Crew, make_crew

pytestmark = pytest.mark.django_db

INSTRUCTIONS = "Use the read replica <db-2>, not the primary.\nReport the row count."


def blocked(crew: Crew) -> Task:
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Count the rows", owner=crew.alice)
    board.assign(crew.team, task.pk, agent=crew.alice, actor=crew.as_lead)
    board.comment(crew.team, task.pk, actor=crew.as_alice, text="No access to the primary", kind="blocker")
    return task


def retry_url(crew: Crew, task: Task) -> str:
    return f"/api/v1/teams/{crew.team.pk}/tasks/{task.pk}/retry"


def test_the_instructions_reach_the_members_session(
    tenant_a: Tenant, member_a: Any, provider: Any, fake: Any, django_capture_on_commit_callbacks: Any
) -> None:
    builtin_runner(tenant_a)
    crew = make_crew(tenant_a)
    task = blocked(crew)
    OrmQ.objects.all().delete()  # the first dispatch's job
    requests: list[dict[str, Any]] = []

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        return chat_answer("Counted: 42 rows.")

    fake.chat = chat
    with django_capture_on_commit_callbacks(execute=True):
        response = member_a.post(
            retry_url(crew, task), {"reason": "try again", "instructions": INSTRUCTIONS}, format="json"
        )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "in_progress"
    assert Escalation.objects.for_tenant(tenant_a).get(task=task).state == "retried"

    [job] = [q.task["args"] for q in OrmQ.objects.all()]
    message = job[2]
    assert f"=== New instructions for this retry ===\n{INSTRUCTIONS}" in message
    run = teamwork.run_task(*job)
    assert run is not None
    assert run.session.key == f"team-task:{task.pk}"
    assert INSTRUCTIONS in requests[0]["messages"][-1]["content"]
    history = member_a.get(f"/api/v1/sessions/{run.session_id}/messages/")
    assert history.status_code == 200
    users = [m["content"] for m in history.json()["messages"] if m["role"] == "user"]
    assert any(INSTRUCTIONS in text for text in users)

    retried = TaskEvent.objects.for_tenant(tenant_a).get(task=task, event_type="retried")
    assert retried.data == {"reason": "try again", "instructions": INSTRUCTIONS}
    comment = TaskComment.objects.for_tenant(tenant_a).filter(task=task).order_by("-created_at").first()
    assert comment is not None
    assert comment.content == f"Retry instructions: {INSTRUCTIONS}"
    audit = AuditEvent.objects.for_tenant(tenant_a).get(verb="team.task.retried")
    assert audit.data["instructions"] == INSTRUCTIONS


def test_refusals_change_nothing(tenant_a: Tenant, member_a: Any, viewer_a: Any, outsider: Any) -> None:
    crew = make_crew(tenant_a)
    task = blocked(crew)
    before = tenant_state(tenant_a)
    long = member_a.post(retry_url(crew, task), {"instructions": "x" * 4001}, format="json")
    assert long.status_code == 400
    assert "instructions" in long.content.decode()
    wrong = member_a.post(retry_url(crew, task), {"instructions": ["a list"]}, format="json")
    assert wrong.status_code == 400
    assert viewer_a.post(retry_url(crew, task), {"instructions": "go"}, format="json").status_code == 403
    assert outsider.post(retry_url(crew, task), {"instructions": "go"}, format="json").status_code == 404
    assert tenant_state(tenant_a) == before
    assert Task.objects.for_tenant(tenant_a).get(pk=task.pk).status == "failed"
