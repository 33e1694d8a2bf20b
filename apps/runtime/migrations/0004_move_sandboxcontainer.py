"""The sandbox container record now belongs to the sandbox app (``sandbox.0001_initial``): the runtime app
forgets it, in the migration state only. Its table, ``runtime_sandboxcontainer``, stays as it is."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0003_sandbox_prune_schedule"),
        ("sandbox", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="SandboxContainer")],
            database_operations=[],
        ),
    ]
