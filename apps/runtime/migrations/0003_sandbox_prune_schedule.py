"""Once registered the django-q2 schedule of the sandbox pruning. Recurring jobs are now declared by their apps
and applied after every migrate (``apps.toolkit.schedules``), which creates, corrects and de-duplicates
them by name; this migration stays, empty, for the migration graph."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0002_sandboxcontainer"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations: list[migrations.operations.base.Operation] = []
