"""Register the django-q2 schedule that archives finished subagent runs,
``apps.runs.tasks.archive_subagents``: every 10 minutes (a subagent is archived 60 minutes after it ends).

Idempotent: the schedule is found by name and brought up to date, so re-running the migration never
leaves a duplicate behind.
"""

from django.db import migrations

SCHEDULE_NAME = "runs.archive_subagents"
FUNC = "apps.runs.tasks.archive_subagents"


def register_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    wanted = {"func": FUNC, "schedule_type": "I", "minutes": 10, "repeats": -1}  # "I": every N minutes
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
        ("runs", "0002_subagents"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(register_schedule, unregister_schedule)]
