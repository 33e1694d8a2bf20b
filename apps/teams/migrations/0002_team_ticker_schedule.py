"""Register the django-q2 schedule of the team task ticker, ``apps.teams.tasks.tick``: every
TOOLGATE_TEAM_TICKER_SECONDS (300 by default), rounded up to whole minutes.

Idempotent: the schedule is found by name and brought up to date, so re-running the migration never
leaves a duplicate behind.
"""

import math

from django.conf import settings
from django.db import migrations

SCHEDULE_NAME = "teams.tick"
FUNC = "apps.teams.tasks.tick"


def register_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    minutes = max(1, math.ceil(int(getattr(settings, "TOOLGATE_TEAM_TICKER_SECONDS", 300)) / 60))
    wanted = {"func": FUNC, "schedule_type": "I", "minutes": minutes, "repeats": -1}  # "I": every N minutes
    existing = list(Schedule.objects.filter(name=SCHEDULE_NAME).order_by("id"))
    if not existing:
        Schedule.objects.create(name=SCHEDULE_NAME, **wanted)
        return
    keep, *duplicates = existing
    for field, value in wanted.items():
        setattr(keep, field, value)
    keep.save(update_fields=list(wanted))
    for duplicate in duplicates:
        duplicate.delete()


def unregister_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0001_team_board"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(register_schedule, unregister_schedule)]
