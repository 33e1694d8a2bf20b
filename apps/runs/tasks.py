"""django-q2 entry points of runs (the tenant is always passed explicitly)."""

from __future__ import annotations

from apps.runs import runner

# The django-q2 Schedule (declared in RunsConfig.schedules, applied by apps.toolkit.schedules) runs the
# archiving every 10 minutes under this name.
ARCHIVE_SCHEDULE = "runs.archive_subagents"
# The sweep that queues again the work of runs whose job was lost (runner.recover), every minute.
RECOVER_SCHEDULE = "runs.recover"


def execute_run(tenant_id: str, run_id: str) -> None:
    runner.execute(run_id, tenant_id)


def resume_run(tenant_id: str, run_id: str) -> None:
    runner.resume(run_id, tenant_id)


def recover_runs() -> int:
    return runner.recover()


def announce(tenant_id: str, parent_session_id: str) -> None:
    from apps.runs import subagents

    subagents.announce(tenant_id, parent_session_id)


def archive_subagents() -> int:
    from apps.runs import subagents

    return subagents.archive()


def run_team_task(tenant_id: str, task_id: str, message: str, user_id: str) -> None:
    from apps.runs import teamwork

    teamwork.run_task(tenant_id, task_id, message, user_id)


def fire_cron(tenant_id: str, job_id: str) -> None:
    from apps.runs import cron

    cron.fire(tenant_id, job_id)
