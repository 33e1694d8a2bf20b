"""django-q2 jobs of the teams app: the task ticker (SPEC B §2.7).

The ticker loops over the tenants that have an active team and runs every sweep for each one
explicitly, through that tenant's scoped queries only: follow-up reminders, recovery of expired locks,
stale pending (2 h) and in-review (4 h) tasks, orphaned blocked tasks, then a dispatch round per team.
Each change is a guarded update that writes its task event, so a second run right after does nothing,
and a failure in one tenant never stops the others.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.conf import settings

from apps.teams import board, dispatch
from apps.teams.models import Team
from apps.tenants.models import Tenant

logger = logging.getLogger(__name__)

# The django-q2 Schedule (declared in TeamsConfig.schedules, applied by apps.toolkit.schedules) runs the
# ticker under this name.
TICKER_SCHEDULE = "teams.tick"
TICKER_FUNC = "apps.teams.tasks.tick"


def ticker_minutes() -> int:
    """The schedule's interval: TOOLGATE_TEAM_TICKER_SECONDS rounded up to whole minutes."""
    return max(1, math.ceil(int(settings.TOOLGATE_TEAM_TICKER_SECONDS) / 60))


@dataclass
class TickReport:
    reminders: int = 0
    recovered: int = 0
    stale: int = 0
    unblocked: int = 0
    dispatched: int = 0
    failed: int = 0


def tick_tenant(tenant: Tenant) -> TickReport:
    """Every sweep of one tenant's active teams, each step on its own so one failing leaves the rest."""
    report = TickReport()
    steps: tuple[tuple[str, Callable[[], int]], ...] = (
        ("reminders", lambda: len(board.process_followups(tenant))),
        ("recovered", lambda: len(board.recover_expired_locks(tenant))),
        ("stale", lambda: len(board.mark_stale(tenant))),
        ("unblocked", lambda: len(board.fix_orphaned_blocked(tenant))),
    )
    for name, step in steps:
        try:
            setattr(report, name, step())
        except Exception:
            logger.exception("team ticker: %s failed for tenant %s", name, tenant.pk)
    for team in (
        Team.objects.for_tenant(tenant).filter(status=Team.Status.ACTIVE).select_related("tenant", "lead")
    ):
        try:
            result = dispatch.dispatch_round(team, actor=board.BoardActor.system("ticker"))
        except Exception:
            logger.exception("team ticker: dispatch failed for team %s (tenant %s)", team.pk, tenant.pk)
            continue
        report.dispatched += len(result.dispatched)
        report.failed += len(result.failed)
    return report


def tick() -> dict[str, dict[str, int]]:
    """One run of the ticker over every tenant with an active team; returns what changed, per tenant."""
    _keep_schedule_in_step()
    tenant_ids = (
        Team.objects.dangerously_all_tenants()
        .filter(status=Team.Status.ACTIVE, tenant__status=Tenant.Status.ACTIVE)
        .values_list("tenant_id", flat=True)
        .distinct()
    )
    reports: dict[str, dict[str, int]] = {}
    for tenant in Tenant.objects.filter(pk__in=list(tenant_ids)).order_by("slug"):
        report = tick_tenant(tenant)
        if any(asdict(report).values()):
            reports[tenant.slug] = asdict(report)
    return reports


def _keep_schedule_in_step() -> None:
    """A changed TOOLGATE_TEAM_TICKER_SECONDS takes effect from the next run."""
    from django_q.models import Schedule

    Schedule.objects.filter(name=TICKER_SCHEDULE).exclude(minutes=ticker_minutes()).update(
        minutes=ticker_minutes()
    )
