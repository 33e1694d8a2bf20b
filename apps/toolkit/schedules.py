"""The one registry of Toolgate's recurring django-q2 jobs, applied after every ``migrate``.

An app declares its jobs on its ``AppConfig`` as a ``schedules()`` method returning ``(name, func,
minutes)`` tuples (plain data: no app imports this module to declare them, whatever its layer). After
``migrate``, :func:`apply` brings each declared schedule up to date by name: created when missing, its
function and interval corrected when they changed (a moved task, a new interval setting), and duplicates
removed. No migration registers a schedule. Schedules an operator creates (cron jobs) have other names
and are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from django.apps import AppConfig
from django.apps import apps as django_apps
from django.db.models.signals import post_migrate
from django_q.models import Schedule


class Every(NamedTuple):
    """A job run every ``minutes`` minutes under ``name`` (``func``: the task's dotted path)."""

    name: str
    func: str
    minutes: int


def declared() -> list[Every]:
    """Every schedule the installed apps declare, in app order."""
    found: list[Every] = []
    for config in django_apps.get_app_configs():
        schedules = getattr(config, "schedules", None)
        if callable(schedules):
            found.extend(Every(*item) for item in schedules())
    return found


def apply(schedules: Iterable[Every] | None = None, *, using: str = "default") -> None:
    """Create or correct each schedule (by name), and remove its duplicates. Idempotent."""
    for item in declared() if schedules is None else schedules:
        wanted = {
            "func": item.func,
            "schedule_type": Schedule.MINUTES,
            "minutes": max(1, item.minutes),
            "repeats": -1,
        }
        existing = list(Schedule.objects.using(using).filter(name=item.name).order_by("id"))
        if not existing:
            Schedule.objects.using(using).create(name=item.name, **wanted)
            continue
        keep, *duplicates = existing
        if any(getattr(keep, field) != value for field, value in wanted.items()):
            for field, value in wanted.items():
                setattr(keep, field, value)
            keep.save(using=using, update_fields=list(wanted))
        for duplicate in duplicates:
            duplicate.delete()


def _after_migrate(sender: AppConfig, using: str = "default", plan: Any = None, **kwargs: Any) -> None:
    # ``flush`` sends the signal too, without a plan: an emptied database stays empty (a test that needs
    # the schedules applies them itself).
    if plan is not None:
        apply(using=using)


def connect() -> None:
    """Apply the registry after django-q2's tables are migrated (called once, by the toolkit app)."""
    post_migrate.connect(_after_migrate, sender=django_apps.get_app_config("django_q"), dispatch_uid=__name__)
