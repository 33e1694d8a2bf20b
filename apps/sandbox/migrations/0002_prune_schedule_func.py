"""The django-q2 schedule that prunes sandbox containers (``runtime.sandbox_prune``, registered by
``runtime.0003_sandbox_prune_schedule``) runs the task at its path in the sandbox app,
``apps.sandbox.tasks.prune``: every TOOLGATE_SANDBOX_PRUNE_MINUTES (5 by default, SPEC B §6.3).

Idempotent, like the registration it updates: the schedule is found by name and brought up to date (made
when it is missing), so re-running the migration never leaves a duplicate behind. Reversed, the schedule
names the task's former path again.
"""

from django.conf import settings
from django.db import migrations

SCHEDULE_NAME = "runtime.sandbox_prune"
FUNC = "apps.sandbox.tasks.prune"
FORMER_FUNC = "apps.runtime.sandbox.tasks.prune"


def register_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    minutes = max(1, int(getattr(settings, "TOOLGATE_SANDBOX_PRUNE_MINUTES", 5)))
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


def restore_former_func(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.filter(name=SCHEDULE_NAME, func=FUNC).update(func=FORMER_FUNC)


class Migration(migrations.Migration):
    dependencies = [
        ("sandbox", "0001_initial"),
        ("runtime", "0003_sandbox_prune_schedule"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(register_schedule, restore_former_func)]
