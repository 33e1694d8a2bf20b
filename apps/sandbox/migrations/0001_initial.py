"""The sandbox container record moves from the runtime app to the sandbox app: in the migration state only.

The table stays ``runtime_sandboxcontainer`` (``Meta.db_table``), made by ``runtime.0002_sandboxcontainer``;
nothing is created in the database. ``runtime.0004_move_sandboxcontainer`` then removes the model from the
runtime app's state.
"""

import uuid

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("runtime", "0003_sandbox_prune_schedule"),
        ("tenants", "0006_policy_from_settings"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="SandboxContainer",
                    fields=[
                        (
                            "id",
                            models.UUIDField(
                                default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        ("key", models.CharField(max_length=64)),
                        (
                            "scope",
                            models.CharField(
                                choices=[("session", "Session"), ("agent", "Agent"), ("shared", "Shared")],
                                max_length=10,
                            ),
                        ),
                        ("session_key", models.CharField(blank=True, max_length=500)),
                        ("name", models.CharField(max_length=128)),
                        ("container_id", models.CharField(max_length=80)),
                        ("image", models.CharField(max_length=255)),
                        ("fingerprint", models.CharField(max_length=32)),
                        ("workspace_access", models.CharField(max_length=4)),
                        ("limits", models.JSONField(default=dict)),
                        ("last_used_at", models.DateTimeField(db_index=True)),
                        ("exec_count", models.PositiveIntegerField(default=0)),
                        (
                            "agent",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="tenants.agent",
                            ),
                        ),
                        (
                            "tenant",
                            models.ForeignKey(
                                editable=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="tenants.tenant",
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["-last_used_at"],
                        "db_table": "runtime_sandboxcontainer",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("tenant", "key"), name="sandbox_container_unique_key"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
