"""The API-key expiry sweep moved from ``apps.tenants.tasks`` to ``apps.accounts.tasks``: point the
django-q2 schedule that tenants 0002 registered at its new home, so existing databases keep running it.

Only the schedule of that name with the old function is changed; going backwards puts the old path back.
"""

from django.db import migrations

SCHEDULE_NAME = "tenants.expire_api_keys"
OLD_FUNC = "apps.tenants.tasks.expire_api_keys"
NEW_FUNC = "apps.accounts.tasks.expire_api_keys"


def _rewrite(apps, old: str, new: str) -> None:
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.filter(name=SCHEDULE_NAME, func=old).update(func=new)


def forwards(apps, schema_editor):
    _rewrite(apps, OLD_FUNC, NEW_FUNC)


def backwards(apps, schema_editor):
    _rewrite(apps, NEW_FUNC, OLD_FUNC)


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0002_expire_api_keys_schedule"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
