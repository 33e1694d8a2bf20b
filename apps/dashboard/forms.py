"""Dashboard forms. They check the shape of the input; the services decide whether the change is allowed."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from apps.audit.models import AuditEvent
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent, agent_key_validator
from apps.tenants.roles import Role, role_at_least
from apps.tenants.validators import MAX_SETTINGS_BYTES

DATETIME_INPUT = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


def add_service_error(form: forms.Form, exc: ServiceError) -> None:
    """Show a refused service call on the form: field details inline, anything else at the top."""
    placed = False
    for field, messages in exc.details.items():
        if field in form.fields:
            for message in messages if isinstance(messages, list) else [messages]:
                form.add_error(field, str(message))
            placed = True
    if not placed:
        form.add_error(None, exc.message)


class DashboardForm(forms.Form):
    """A form whose labels carry no trailing colon (the layout sets labels apart already)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)


class AgentForm(DashboardForm):
    """The editable fields of an agent (the key is set once, in :class:`AgentCreateForm`)."""

    name = forms.CharField(max_length=200)
    description = forms.CharField(max_length=2000, required=False, widget=forms.Textarea(attrs={"rows": 3}))
    type = forms.ChoiceField(choices=Agent.Type.choices, initial=Agent.Type.OPEN)
    provider = forms.CharField(max_length=100, required=False, help_text="For example: openai, anthropic.")
    model = forms.CharField(max_length=200, required=False)
    settings = forms.CharField(
        required=False,
        initial="{}",
        widget=forms.Textarea(attrs={"rows": 6, "class": "mono", "spellcheck": "false"}),
        help_text="A JSON object.",
    )

    def clean_settings(self) -> dict[str, Any]:
        raw = (self.cleaned_data.get("settings") or "").strip()
        if not raw:
            return {}
        if len(raw.encode()) > MAX_SETTINGS_BYTES:
            raise forms.ValidationError(f"At most {MAX_SETTINGS_BYTES} bytes of JSON.")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None
        if not isinstance(value, dict):
            raise forms.ValidationError('Must be a JSON object, like {"temperature": 0.2}.')
        return value

    def changes(self) -> dict[str, Any]:
        """The cleaned editable fields, as ``agent_update`` takes them."""
        return {name: self.cleaned_data[name] for name in AgentForm.base_fields}

    @staticmethod
    def initial_for(agent: Agent) -> dict[str, Any]:
        return {
            "name": agent.name,
            "description": agent.description,
            "type": agent.type,
            "provider": agent.provider,
            "model": agent.model,
            "settings": json.dumps(agent.settings, indent=2, sort_keys=True),
        }


class AgentCreateForm(AgentForm):
    key = forms.CharField(
        max_length=64,
        validators=[agent_key_validator],
        help_text="Lowercase letters, digits, '_' and '-'. Agent loops and policies refer to it; "
        "it cannot be changed later.",
    )

    field_order = ["key", "name", "description", "type", "provider", "model", "settings"]


def _roles_up_to(role: str) -> list[tuple[str, str]]:
    return [(value, label) for value, label in Role.choices if role_at_least(role, value)]


class ApiKeyCreateForm(DashboardForm):
    name = forms.CharField(max_length=100, help_text="What uses this key, e.g. “support bot (prod)”.")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER)
    expires_at = forms.DateTimeField(
        required=False,
        label="Expires at (UTC)",
        widget=DATETIME_INPUT,
        help_text="Leave empty for a key that does not expire.",
    )

    def __init__(self, *args: Any, actor_role: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Offer only roles the creator holds; the service refuses higher ones anyway.
        self.fields["role"].choices = _roles_up_to(actor_role)  # type: ignore[attr-defined]


class MemberAddForm(DashboardForm):
    email = forms.EmailField(max_length=254)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER)
    password = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="Only for a person who has no Toolgate account yet; leave empty otherwise.",
    )


class MemberRoleForm(DashboardForm):
    role = forms.ChoiceField(choices=Role.choices)


class TenantSwitchForm(DashboardForm):
    tenant_id = forms.UUIDField()


class AuditFilterForm(DashboardForm):
    verb = forms.CharField(
        max_length=100, required=False, help_text="Exact, or a prefix ending in '.' or '*'."
    )
    actor_kind = forms.ChoiceField(
        choices=[("", "Any"), *AuditEvent.ActorKind.choices], required=False, label="Actor kind"
    )
    actor_id = forms.CharField(max_length=64, required=False, label="Actor id")
    target_type = forms.CharField(max_length=100, required=False, label="Target type")
    target_id = forms.CharField(max_length=100, required=False, label="Target id")
    since = forms.DateTimeField(required=False, label="Since (UTC)", widget=DATETIME_INPUT)
    until = forms.DateTimeField(required=False, label="Until (UTC)", widget=DATETIME_INPUT)

    def filters(self) -> dict[str, Any]:
        """The valid, non-empty filters (invalid ones are reported on the form and left out)."""
        if not self.is_bound:
            return {}
        self.is_valid()
        cleaned = getattr(self, "cleaned_data", {})
        return {name: value for name, value in cleaned.items() if value not in (None, "")}
