"""Tenant-isolation cases for the runs routes (merged into ``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from apps.accounts import services as tenant_services
from apps.runs import services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case


def make_run(tenant: Tenant, prefix: str = "secret", runner: str = "builtin") -> dict[str, str]:
    """A queued run of an agent of ``tenant``; returns the agent's key and the run's id."""
    system = Actor.system(tenant)
    agent = tenant_services.agent_create(actor=system, key=f"{prefix}-run-agent", name="Agent")
    run = services.run_create(
        actor=system, agent=agent, session_key=f"{prefix}-chat", message=f"{prefix} task", runner=runner
    )
    return {"key": agent.key, "pk": str(run.pk)}


def make_cron_job(tenant: Tenant, prefix: str = "secret") -> dict[str, str]:
    """An agent of ``tenant`` with a scheduled job; returns the job's id."""
    from apps.runs import cron

    system = Actor.system(tenant)
    agent = tenant_services.agent_create(actor=system, key=f"{prefix}-cron-agent", name="Agent")
    job = cron.job_create(
        actor=system, agent=agent, name=f"{prefix}-job", schedule="every 5m", message=f"{prefix} chores"
    )
    return {"pk": str(job.pk)}


def _agent_kwargs(tenant: Tenant) -> dict[str, str]:
    return {"key": make_run(tenant)["key"]}


def _external_run(tenant: Tenant) -> dict[str, str]:
    return {"pk": make_run(tenant, runner="external")["pk"]}


def _run_kwargs(tenant: Tenant) -> dict[str, str]:
    return {"pk": make_run(tenant)["pk"]}


CASES: dict[str, Case] = {
    "agent-run-create": Case(
        make=_agent_kwargs, writes=[("post", {"session_key": "b-chat", "message": "hijack", "wait": False})]
    ),
    "run-list": Case(make=make_run, collection=True),
    "run-detail": Case(make=_run_kwargs),
    "run-cancel": Case(make=_run_kwargs, writes=[("post", None)]),
    "run-claim": Case(make=_external_run, writes=[("post", None)]),
    "run-finish": Case(make=_external_run, writes=[("post", {"status": "completed", "output": "hijacked"})]),
    "run-messages": Case(make=_external_run, writes=[("post", {"role": "assistant", "content": "hijacked"})]),
    "cron-job-list": Case(make=make_cron_job, collection=True),
    "cron-job-detail": Case(
        make=make_cron_job, writes=[("patch", {"message": "hijacked", "enabled": False}), ("delete", None)]
    ),
    "cron-job-run": Case(make=make_cron_job, writes=[("post", None)]),
    "cron-job-firings": Case(make=make_cron_job),
}
