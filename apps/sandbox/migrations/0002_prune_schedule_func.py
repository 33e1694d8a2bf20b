"""Once pointed the django-q2 schedule of the sandbox pruning at its task's new path. Recurring jobs are
now declared by their apps and applied after every migrate (``apps.toolkit.schedules``), which creates,
corrects and de-duplicates them by name; this migration stays, empty, for the migration graph."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sandbox", "0001_initial"),
        ("runtime", "0003_sandbox_prune_schedule"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations: list[migrations.operations.base.Operation] = []
