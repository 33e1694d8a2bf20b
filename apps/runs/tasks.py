"""django-q2 entry points of runs (the tenant is always passed explicitly)."""

from __future__ import annotations

from apps.runs import runner


def execute_run(tenant_id: str, run_id: str) -> None:
    runner.execute(run_id, tenant_id)
