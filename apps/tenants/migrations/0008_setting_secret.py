"""Secret-bearing runtime settings move out of the settings JSON into encrypted rows.

Until now the web search provider's key (``tools.web_search.api_key``) was kept in plain text in
``Tenant.settings`` and ``Agent.settings``. Each non-empty value becomes a ``SettingSecret`` row of its
tenant (and agent), encrypted with ``FIELD_ENCRYPTION_KEY``, and is removed from the JSON; an empty or
malformed value is only removed. Every tenant touched gets a new ``config_version`` so no cached agent
or secret outlives the move. Going backwards puts the values back into the JSON.

Audit rows written before this migration are append-only and keep what they recorded then: rotate a
key that was set before it if the audit log's readers should not have it.
"""

from __future__ import annotations

import uuid
from typing import Any

import django.db.models.deletion
import encrypted_model_fields.fields
from django.db import migrations, models
from django.db.models import F

# The secret paths when the values were moved (apps/tenants/setting_secrets.py).
SECRET_PATHS = (("tools", "web_search", "api_key"),)


def _take(settings: Any) -> tuple[bool, dict[str, str]]:
    """Remove the secrets from ``settings`` in place: whether anything was removed, and the non-empty
    values by dotted path."""
    removed, values = False, {}
    for path in SECRET_PATHS:
        node = settings
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict) or path[-1] not in node:
            continue
        value = node.pop(path[-1])
        removed = True
        if isinstance(value, str) and value.strip():
            values[".".join(path)] = value.strip()
    return removed, values


def move_secrets(apps: Any, schema_editor: Any) -> None:
    Tenant = apps.get_model("tenants", "Tenant")
    Agent = apps.get_model("tenants", "Agent")
    SettingSecret = apps.get_model("tenants", "SettingSecret")
    touched: set[uuid.UUID] = set()
    for tenant in Tenant.objects.order_by("pk"):
        settings = tenant.settings if isinstance(tenant.settings, dict) else {}
        removed, values = _take(settings)
        if removed:
            Tenant.objects.filter(pk=tenant.pk).update(settings=settings)
            for path, value in values.items():
                SettingSecret.objects.create(tenant_id=tenant.pk, agent=None, path=path, value=value)
            touched.add(tenant.pk)
    for agent in Agent.objects.order_by("pk"):
        settings = agent.settings if isinstance(agent.settings, dict) else {}
        removed, values = _take(settings)
        if removed:
            Agent.objects.filter(pk=agent.pk).update(settings=settings)
            for path, value in values.items():
                SettingSecret.objects.create(
                    tenant_id=agent.tenant_id, agent_id=agent.pk, path=path, value=value
                )
            touched.add(agent.tenant_id)
    Tenant.objects.filter(pk__in=touched).update(config_version=F("config_version") + 1)


def restore_secrets(apps: Any, schema_editor: Any) -> None:
    Tenant = apps.get_model("tenants", "Tenant")
    Agent = apps.get_model("tenants", "Agent")
    SettingSecret = apps.get_model("tenants", "SettingSecret")
    for secret in SettingSecret.objects.order_by("pk"):
        model, pk = (Agent, secret.agent_id) if secret.agent_id else (Tenant, secret.tenant_id)
        row = model.objects.get(pk=pk)
        settings = row.settings if isinstance(row.settings, dict) else {}
        node = settings
        path = secret.path.split(".")
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[path[-1]] = secret.value
        model.objects.filter(pk=pk).update(settings=settings)


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0007_apikey_origin"),
    ]

    operations = [
        migrations.CreateModel(
            name="SettingSecret",
            fields=[
                (
                    "id",
                    models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("path", models.CharField(max_length=200)),
                ("value", encrypted_model_fields.fields.EncryptedTextField()),
                (
                    "agent",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="setting_secrets",
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
                "ordering": ["path"],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("agent__isnull", True)),
                        fields=("tenant", "path"),
                        name="settingsecret_unique_tenant_path",
                    ),
                    models.UniqueConstraint(
                        fields=("tenant", "agent", "path"), name="settingsecret_unique_agent_path"
                    ),
                ],
            },
        ),
        migrations.RunPython(move_secrets, restore_secrets),
    ]
