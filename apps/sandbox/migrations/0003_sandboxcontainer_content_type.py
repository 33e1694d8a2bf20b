"""The sandbox container's content type (and with it its permissions) follows the model from the runtime
app to the sandbox app, on a database where it was already made; a fresh database makes it in the
sandbox app after migrating."""

from django.db import migrations


def _relabel(apps, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    if ContentType.objects.filter(app_label=new, model="sandboxcontainer").exists():
        return
    ContentType.objects.filter(app_label=old, model="sandboxcontainer").update(app_label=new)


def to_sandbox(apps, schema_editor):
    _relabel(apps, "runtime", "sandbox")


def to_runtime(apps, schema_editor):
    _relabel(apps, "sandbox", "runtime")


class Migration(migrations.Migration):
    dependencies = [
        ("sandbox", "0002_prune_schedule_func"),
        ("runtime", "0004_move_sandboxcontainer"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(to_sandbox, to_runtime)]
