"""Dashboard forms. They check the shape of the input; the services decide whether the change is allowed."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django import forms

from apps.audit.models import AuditEvent, ToolCall
from apps.policy import services as policy_services
from apps.policy.documents import MAX_DOCUMENT_BYTES
from apps.policy.models import Scope
from apps.teams import team_settings
from apps.teams.models import Escalation, TaskComment, TaskEvent, Team
from apps.tenants import setting_secrets
from apps.tenants.api.parsers import strict_loads
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent, ApiKey, agent_key_validator
from apps.tenants.roles import Role, role_at_least
from apps.tenants.validators import MAX_SETTINGS_BYTES
from apps.toolkit import sandbox_config
from apps.toolkit.runtime_settings import DEFAULTS, SANDBOX_MODES
from apps.toolkit.runtime_settings import validate as validate_runtime
from apps.toolkit.sandbox_config import SandboxConfig

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


def parse_json_object(
    raw: str | None, *, example: str, max_bytes: int | None = MAX_SETTINGS_BYTES
) -> dict[str, Any]:
    """A form field's JSON object text as a dict (blank is ``{}``), bounded to ``max_bytes`` (None: the
    field's own length limit is the bound), with the parser's line and column in the error."""
    text = (raw or "").strip()
    if not text:
        return {}
    if max_bytes is not None and len(text.encode()) > max_bytes:
        raise forms.ValidationError(f"At most {max_bytes} bytes of JSON.")
    try:
        value = strict_loads(text)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(
            f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
        ) from None
    except ValueError as exc:
        raise forms.ValidationError(f"Not valid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise forms.ValidationError(f"Must be a JSON object, like {example}.")
    return value


def stored_secret_help(noun: str, *, stored: bool, hint: str) -> str:
    """The help text of a write-only secret field on an edit form: whether a ``noun`` is stored (with
    ``hint``, its last characters, when given) and that a blank field keeps it."""
    if not stored:
        return f"No {noun} is stored. Leave blank for none."
    shown = f"A {noun} ending in …{hint} is stored" if hint else f"A {noun} is stored"
    return f"{shown}. Leave blank to keep it."


def stored_headers_help(names: Iterable[str]) -> str | None:
    """The help text of a write-only headers field on an edit form naming the stored headers, or None
    when none is stored."""
    listed = ", ".join(sorted(names))
    if not listed:
        return None
    return f"Write-only; stored: {listed}. Leave blank to keep them, or enter {{}} to remove them."


class DashboardForm(forms.Form):
    """A form whose labels carry no trailing colon (the layout sets labels apart already)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)


# The secret-bearing setting the settings forms edit apart from the JSON (write-only, never rendered).
WEB_SEARCH_KEY = "tools.web_search.api_key"


def add_web_search_key_fields(form: forms.Form, *, stored: bool) -> None:
    """Add the write-only web search API key to a settings form: a password field never filled in
    (blank keeps the stored key) and a box that clears it. The label says whether one is set."""
    form.fields["web_search_api_key"] = forms.CharField(
        required=False,
        max_length=setting_secrets.MAX_SECRET_LENGTH,
        label=f"Web search API key ({'set' if stored else 'not set'})",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=stored_secret_help("web search API key", stored=stored, hint="")
        + " Brave's key, used when tools.web_search.provider is brave; stored encrypted, never shown.",
    )
    form.fields["web_search_api_key_clear"] = forms.BooleanField(
        required=False, label="Clear the stored web search API key"
    )


def web_search_key_change(form: forms.Form) -> tuple[bool, str | None]:
    """Whether the form asks to change the web search key, and to what (None: clear). Call after
    ``is_valid``; a new key wins over the clear box."""
    value = (form.cleaned_data.get("web_search_api_key") or "").strip()
    if value:
        return True, value
    if form.cleaned_data.get("web_search_api_key_clear"):
        return True, None
    return False, None


def clean_web_search_key(form: forms.Form) -> None:
    """The rule the services apply to the key (no control characters, bounded), shown on its field."""
    value = form.cleaned_data.get("web_search_api_key") or ""
    if value:
        document = setting_secrets.with_values({}, {WEB_SEARCH_KEY: value})
        for messages in setting_secrets.validate(document).values():
            for message in messages:
                form.add_error("web_search_api_key", message)


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
        help_text="A JSON object: sandbox, per-tool settings and the agent's own keys. What tools the "
        "agent gets and how they may run is its policy.",
    )

    def __init__(self, *args: Any, secret_paths: frozenset[str] = frozenset(), **kwargs: Any) -> None:
        """``secret_paths``: the agent's stored setting secrets (only whether each is set is shown)."""
        super().__init__(*args, **kwargs)
        add_web_search_key_fields(self, stored=WEB_SEARCH_KEY in secret_paths)

    def clean_settings(self) -> dict[str, Any]:
        return parse_json_object(self.cleaned_data.get("settings"), example='{"temperature": 0.2}')

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        clean_web_search_key(self)
        return cleaned

    def changes(self) -> dict[str, Any]:
        """The cleaned editable fields, as ``agent_update`` takes them; the web search key, when the form
        sets or clears it, goes into the settings (the service takes it out again and encrypts it)."""
        changes = {name: self.cleaned_data[name] for name in AgentForm.base_fields}
        changed, value = web_search_key_change(self)
        if changed:
            changes["settings"] = setting_secrets.with_values(changes["settings"], {WEB_SEARCH_KEY: value})
        return changes

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
    origin = forms.ChoiceField(
        choices=ApiKey.Origin.choices,
        initial=ApiKey.Origin.USER,
        required=False,  # left out: user
        help_text="Who the key's tool calls come from, for the policy's origin restrictions: User for a "
        "person's agent loop or script; another origin for a channel integration, an application or a "
        "skill. A call cannot change it.",
    )
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


class FilterForm(DashboardForm):
    """A GET form of list filters."""

    def filters(self) -> dict[str, Any]:
        """The valid, non-empty filters (invalid ones are reported on the form and left out)."""
        if not self.is_bound:
            return {}
        self.is_valid()
        cleaned = getattr(self, "cleaned_data", {})
        return {name: value for name, value in cleaned.items() if value not in (None, "")}


def _suggested(datalist_id: str) -> forms.TextInput:
    """A text input offered the values of the ``<datalist>`` with ``datalist_id`` (the page renders it)."""
    return forms.TextInput(attrs={"list": datalist_id, "autocomplete": "off"})


class AuditFilterForm(FilterForm):
    verb = forms.CharField(
        max_length=100,
        required=False,
        help_text="Exact, or a prefix ending in '.' or '*'.",
        widget=_suggested("suggest-verb"),
    )
    actor_kind = forms.ChoiceField(
        choices=[("", "Any"), *AuditEvent.ActorKind.choices], required=False, label="Actor kind"
    )
    actor_id = forms.CharField(
        max_length=64, required=False, label="Actor id", widget=_suggested("suggest-actor_id")
    )
    target_type = forms.CharField(
        max_length=100, required=False, label="Target type", widget=_suggested("suggest-target_type")
    )
    target_id = forms.CharField(max_length=100, required=False, label="Target id")
    since = forms.DateTimeField(required=False, label="Since (UTC)", widget=DATETIME_INPUT)
    until = forms.DateTimeField(required=False, label="Until (UTC)", widget=DATETIME_INPUT)


class ToolCallFilterForm(FilterForm):
    agent = forms.CharField(
        max_length=64, required=False, help_text="Agent key, exact.", widget=_suggested("suggest-agent_key")
    )
    tool = forms.CharField(
        max_length=200,
        required=False,
        help_text="The name as called, exact.",
        widget=_suggested("suggest-tool"),
    )
    decision = forms.ChoiceField(choices=[("", "Any"), *ToolCall.Decision.choices], required=False)
    status = forms.ChoiceField(choices=[("", "Any"), *ToolCall.Status.choices], required=False)
    session_key = forms.CharField(
        max_length=200, required=False, label="Session key", widget=_suggested("suggest-session_key")
    )
    run = forms.UUIDField(required=False, label="Run", help_text="A run's id: the calls its model made.")
    since = forms.DateTimeField(required=False, label="Since (UTC)", widget=DATETIME_INPUT)
    until = forms.DateTimeField(required=False, label="Until (UTC)", widget=DATETIME_INPUT)


class RuntimeSettingsForm(DashboardForm):
    """The tenant's runtime settings (sandbox, per-tool settings) as form fields; the policy values are
    changed in the policy editor.

    :meth:`changes` returns only the keys whose submitted value differs from what is in effect now, so
    saving an untouched form changes nothing and a key left at its default stays marked "default".
    """

    sandbox_mode = forms.ChoiceField(
        choices=[(v, v) for v in SANDBOX_MODES],
        label="Sandbox mode",
        help_text="jail (the default): commands run in a bubblewrap jail that sees only their workspace; "
        "docker: in Docker containers (see Sandbox); host: on this server, offered only where the operator "
        "allows it.",
    )
    tools = forms.CharField(
        required=False,
        label="Per-tool settings",
        widget=forms.Textarea(attrs={"rows": 6, "class": "mono", "spellcheck": "false"}),
        help_text='A JSON object of tool name → settings object, e.g. {"exec": {"timeout": 120}}.',
    )

    def __init__(
        self, *args: Any, current: dict[str, Any], secret_paths: frozenset[str] = frozenset(), **kwargs: Any
    ) -> None:
        """``current``: the tenant's effective runtime settings (defaults < tenant), the form's baseline;
        ``secret_paths``: the tenant's stored setting secrets (only whether each is set is shown)."""
        self.current = current
        kwargs.setdefault("initial", self.initial_for(current))
        super().__init__(*args, **kwargs)
        add_web_search_key_fields(self, stored=WEB_SEARCH_KEY in secret_paths)
        # Host only where the operator allows it; a mode saved before the jail only while it is current.
        mode = current["sandbox"].get("mode")
        offered = [m for m in SANDBOX_MODES if m != sandbox_config.HOST or sandbox_config.host_allowed()]
        legacy = [mode] if mode in sandbox_config.LEGACY_MODES else []
        self.fields["sandbox_mode"].choices = [(v, v) for v in (*offered, *legacy)]  # type: ignore[attr-defined]

    @staticmethod
    def initial_for(current: dict[str, Any]) -> dict[str, Any]:
        return {
            "sandbox_mode": current["sandbox"].get("mode", sandbox_config.JAIL),
            "tools": json.dumps(current["tools"], indent=2, sort_keys=True),
        }

    def main_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.fields if name != "tools"]

    def clean_tools(self) -> dict[str, Any]:
        return parse_json_object(self.cleaned_data.get("tools"), example='{"exec": {"timeout": 120}}')

    def settings_values(self) -> dict[str, Any]:
        """Every runtime key as the submitted form sets it (call after ``is_valid``)."""
        data = self.cleaned_data
        return {
            # Keys the form does not show are kept (the API may have set them).
            "sandbox": {**self.current["sandbox"], "mode": data.get("sandbox_mode")},
            "tools": data.get("tools", {}),
        }

    # Where the runtime validator's errors for each key are shown.
    ERROR_FIELDS = {"sandbox": "sandbox_mode", "tools": "tools"}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        clean_web_search_key(self)
        if self.errors:
            return cleaned
        # The same rule the model and the API apply, so a refusal is shown next to its field.
        for key, messages in validate_runtime(self.changes()).items():
            for message in messages:
                self.add_error(self.ERROR_FIELDS.get(key), message)
        return cleaned

    def changes(self) -> dict[str, Any]:
        """The runtime keys whose submitted value differs from the one in effect now; ``tools`` with the
        web search key when the form sets or clears it (the service takes it out and encrypts it)."""
        changes = {
            key: value
            for key, value in self.settings_values().items()
            if _normalized(key, value) != _normalized(key, self.current[key])
        }
        changed, value = web_search_key_change(self)
        if changed:
            values = setting_secrets.with_values(self.settings_values(), {WEB_SEARCH_KEY: value})
            changes["tools"] = values["tools"]
        return changes


def _normalized(key: str, value: Any) -> Any:
    """A value in a comparable form, with the parts the pipeline defaults filled in (a sandbox object
    set through the API without ``mode`` means mode ``off``), so an untouched form never counts as a
    change."""
    if key == "sandbox" and isinstance(value, dict):
        return {"mode": "off", **value}
    return value


class RuntimeResetForm(DashboardForm):
    key = forms.ChoiceField(choices=[(k, k) for k in DEFAULTS])


class PolicyEditForm(DashboardForm):
    """A policy document as JSON text, an optional note, and the version the editor was opened on.

    The document's own rules are the policy service's; errors it reports by path ("allow[2]",
    "byProvider.openai.allow[0]") are kept in :attr:`path_errors` for the page to list."""

    document = forms.CharField(
        required=False,
        strip=False,
        label="Policy document (JSON)",
        widget=forms.Textarea(
            attrs={"rows": 18, "class": "mono policy-text", "spellcheck": "false", "autocomplete": "off"}
        ),
    )
    note = forms.CharField(
        max_length=200,
        required=False,
        label="Note",
        help_text="Optional: why this change (shown in the history).",
    )
    base_version = forms.IntegerField(min_value=0, max_value=2**31 - 1, widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.path_errors: list[tuple[str, list[str]]] = []

    def clean_document(self) -> Any:
        text = self.cleaned_data.get("document") or ""
        if len(text.encode()) > MAX_DOCUMENT_BYTES:
            raise forms.ValidationError(f"At most {MAX_DOCUMENT_BYTES} bytes of JSON.")
        if not text.strip():
            return {}
        try:
            value = strict_loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('Must be a JSON object, like {"deny": ["exec"]}.')
        return value

    def add_service_errors(self, exc: ServiceError) -> None:
        """Show a refused save: every problem by its path, and a summary at the top."""
        self.path_errors = [
            (str(path), [str(m) for m in (messages if isinstance(messages, list) else [messages])])
            for path, messages in exc.details.items()
        ]
        count = sum(len(messages) for _, messages in self.path_errors) or 1
        self.add_error(None, f"Not saved: {count} problem{'s' if count != 1 else ''} in the document.")
        if not self.path_errors:
            self.path_errors = [("document", [exc.message])]


class PolicyContextForm(DashboardForm):
    """The call context the live explain uses (agent, provider, channel, chat, subagent depth)."""

    agent = forms.ChoiceField(required=False, label="Agent")
    provider = forms.CharField(max_length=100, required=False, label="Provider")
    channel = forms.CharField(max_length=100, required=False, label="Channel")
    chat_id = forms.CharField(max_length=200, required=False, label="Chat id")
    subagent_depth = forms.IntegerField(min_value=0, max_value=10, initial=0, label="Subagent depth")

    def __init__(self, *args: Any, agents: list[str], target: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "explain_%s")
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = [(key, key) for key in agents]  # type: ignore[attr-defined]
        if target.agent is not None:
            self.fields["agent"].choices = [(target.agent.key, target.agent.key)]  # type: ignore[attr-defined]
            self.fields["agent"].disabled = True
        if target.scope == Scope.CHANNEL:
            self.initial.update(channel=target.channel, chat_id=target.chat_id)
            self.fields["channel"].disabled = True
            self.fields["chat_id"].disabled = True

    @staticmethod
    def parse(value: Any) -> dict[str, Any] | str:
        """The context of an explain request, or why it is refused."""
        if value is None:
            value = {}
        if not isinstance(value, dict):
            return '"context" must be an object.'
        limits = {"agent": 64, "provider": 100, "channel": 100, "chat_id": 200}
        result: dict[str, Any] = {}
        for key, limit in limits.items():
            item = value.get(key) or ""
            if not isinstance(item, str) or len(item) > limit or not item.isprintable():
                return f"context.{key} must be a string of at most {limit} printable characters."
            result[key] = item.strip()
        depth = value.get("subagent_depth") or 0
        if isinstance(depth, str) and depth.strip().isdigit():
            depth = int(depth)
        if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= 10:
            return "context.subagent_depth must be an integer from 0 to 10."
        result["subagent_depth"] = depth
        return result


class PolicyTargetForm(DashboardForm):
    """A channel group to open: a channel name and an optional chat id."""

    channel = forms.CharField(max_length=100, label="Channel", help_text="For example: telegram, slack, web.")
    chat_id = forms.CharField(
        max_length=200, required=False, label="Chat id", help_text="Optional: one chat of the channel."
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        try:
            cleaned["target"] = policy_services.target(
                Scope.CHANNEL, channel=cleaned.get("channel", ""), chat_id=cleaned.get("chat_id", "")
            )
        except ServiceError as exc:
            self.add_error("channel", exc.message)
        return cleaned


# --- teams ----------------------------------------------------------------------------------------------


def _agent_choices(agents: list[Agent]) -> list[tuple[str, str]]:
    return [(a.key, a.key if a.name == a.key else f"{a.key} · {a.name}") for a in agents]


class TeamCreateForm(DashboardForm):
    """A new team: its name, its lead and its members (the tenant's agents)."""

    name = forms.CharField(max_length=255)
    description = forms.CharField(max_length=5000, required=False, widget=forms.Textarea(attrs={"rows": 3}))
    lead = forms.ChoiceField(help_text="The agent that plans and hands out the work; it leads one team only.")
    members = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple,
        help_text="At least one besides the lead.",
    )

    def __init__(self, *args: Any, agents: list[Agent], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.agents = {a.key: a for a in agents}
        choices = _agent_choices(agents)
        self.fields["lead"].choices = [("", "Choose the lead"), *choices]  # type: ignore[attr-defined]
        self.fields["members"].choices = choices  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        lead, members = cleaned.get("lead"), cleaned.get("members") or []
        if lead and members and not [m for m in members if m != lead]:
            self.add_error("members", "Choose at least one member besides the lead.")
        return cleaned

    def lead_agent(self) -> Agent:
        return self.agents[self.cleaned_data["lead"]]

    def member_agents(self) -> list[Agent]:
        return [self.agents[key] for key in self.cleaned_data["members"]]


ACCESS_LIST_MAX = 1000


class TeamSettingsForm(DashboardForm):
    """A team's name and description, and the settings that matter most as fields (the access lists
    among them); the keys the form does not show (workspace) are kept as they are."""

    name = forms.CharField(max_length=255)
    description = forms.CharField(max_length=5000, required=False, widget=forms.Textarea(attrs={"rows": 3}))
    blocker_escalation = forms.BooleanField(
        required=False,
        label="Escalate blockers to the lead",
        help_text="A blocker comment on a task in progress always fails it; with this on, the lead is told "
        "and can retry it with new instructions.",
    )
    member_requests = forms.BooleanField(
        required=False, label="Members may ask for work", help_text="Members can create tasks for the team."
    )
    member_requests_auto_dispatch = forms.BooleanField(
        required=False, label="Dispatch member requests at once"
    )
    followup_interval_minutes = forms.IntegerField(
        min_value=1,
        max_value=7 * 24 * 60,
        label="Follow-up interval (minutes)",
        help_text="How often a task waiting for the user reminds them.",
    )
    followup_max_reminders = forms.IntegerField(
        min_value=0, max_value=1000, label="Follow-up reminders at most", help_text="0: until answered."
    )
    escalation_mode = forms.ChoiceField(
        choices=[("", "Not set"), *((m, m) for m in team_settings.ESCALATION_MODES)], required=False
    )
    notification_mode = forms.ChoiceField(
        choices=[
            ("direct", "direct: to the chat the task came from"),
            ("leader", "leader: through the lead"),
        ],
        label="Notifications go",
    )
    notify = forms.MultipleChoiceField(
        choices=[(k, k.replace("_", " ")) for k in team_settings.NOTIFICATION_KEYS],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Notify on",
    )

    allow_user_ids = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Allowed users",
        help_text="User ids that may use the team's tools, one per line or comma-separated. Empty: anyone "
        "not denied.",
    )
    deny_user_ids = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Denied users",
        help_text="User ids that may never use the team's tools (denial beats allowing).",
    )
    allow_channels = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Allowed channels",
        help_text="Channels (e.g. telegram, dashboard) the team's tools answer on. Empty: every channel not "
        "denied. Teammates and the system always pass.",
    )
    deny_channels = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Denied channels",
        help_text="Channels the team's tools refuse (denial beats allowing).",
    )

    def __init__(self, *args: Any, current: dict[str, Any], **kwargs: Any) -> None:
        """``current``: the team's stored settings, the base the form's values are written over."""
        self.current = dict(current)
        super().__init__(*args, **kwargs)

    @staticmethod
    def _entries(text: str) -> list[str]:
        """One entry per line or comma-separated, blanks dropped, each once in the order given."""
        parts = (p.strip() for line in text.splitlines() for p in line.split(","))
        return list(dict.fromkeys(p for p in parts if p))

    def _clean_list(self, key: str) -> list[str]:
        entries = self._entries(self.cleaned_data.get(key) or "")
        if len(entries) > ACCESS_LIST_MAX:
            raise forms.ValidationError(f"At most {ACCESS_LIST_MAX} entries.")
        too_long = [e for e in entries if len(e) > 255]
        if too_long:
            raise forms.ValidationError(f"Each entry may have at most 255 characters ({too_long[0][:40]}…).")
        return entries

    def clean_allow_user_ids(self) -> list[str]:
        return self._clean_list("allow_user_ids")

    def clean_deny_user_ids(self) -> list[str]:
        return self._clean_list("deny_user_ids")

    def clean_allow_channels(self) -> list[str]:
        return self._clean_list("allow_channels")

    def clean_deny_channels(self) -> list[str]:
        return self._clean_list("deny_channels")

    @staticmethod
    def initial_for(team: Team) -> dict[str, Any]:
        stored = team.settings or {}
        enabled, auto = team_settings.member_requests(stored)
        notifications = team_settings.notifications(stored)
        return {
            "name": team.name,
            "description": team.description,
            "blocker_escalation": team_settings.blocker_escalation(stored),
            "member_requests": enabled,
            "member_requests_auto_dispatch": auto,
            "followup_interval_minutes": team_settings.followup_interval_minutes(stored),
            "followup_max_reminders": team_settings.followup_max_reminders(stored),
            "escalation_mode": stored.get("escalation_mode", ""),
            "notification_mode": notifications["mode"],
            "notify": [k for k in team_settings.NOTIFICATION_KEYS if notifications.get(k)],
            **{
                key: "\n".join(v for v in stored.get(key, []) if isinstance(v, str))
                for key in team_settings.LIST_KEYS
                if isinstance(stored.get(key), list)
            },
        }

    def settings(self) -> dict[str, Any]:
        """The settings document to save: the stored one with the form's keys replaced."""
        data = self.cleaned_data
        result = {
            **self.current,
            "blocker_escalation": {"enabled": data["blocker_escalation"]},
            "member_requests": {
                "enabled": data["member_requests"],
                "auto_dispatch": data["member_requests_auto_dispatch"],
            },
            "followup_interval_minutes": data["followup_interval_minutes"],
            "followup_max_reminders": data["followup_max_reminders"],
            "notifications": {
                "mode": data["notification_mode"],
                **{k: k in data["notify"] for k in team_settings.NOTIFICATION_KEYS},
            },
        }
        for key in team_settings.LIST_KEYS:
            # An emptied list is dropped: an absent list and an empty one both mean "no restriction".
            if data.get(key):
                result[key] = data[key]
            else:
                result.pop(key, None)
        if data.get("escalation_mode"):
            result["escalation_mode"] = data["escalation_mode"]
        else:
            result.pop("escalation_mode", None)
        return result

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        for key, messages in team_settings.validate(self.settings()).items():
            for message in messages:
                self.add_error(None, f"{key}: {message}")
        return cleaned


class TeamMemberAddForm(DashboardForm):
    agent = forms.ChoiceField(label="Agent")

    def __init__(self, *args: Any, agents: list[Agent], **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "member_%s")
        super().__init__(*args, **kwargs)
        self.agents = {a.key: a for a in agents}
        self.fields["agent"].choices = _agent_choices(agents)  # type: ignore[attr-defined]


class TaskCreateForm(DashboardForm):
    subject = forms.CharField(max_length=500)
    description = forms.CharField(
        max_length=100_000, required=False, widget=forms.Textarea(attrs={"rows": 5})
    )
    priority = forms.IntegerField(min_value=-1000, max_value=1000, initial=0, help_text="Higher runs first.")
    owner = forms.ChoiceField(
        required=False,
        help_text="Leave empty for any member to claim it; an owner gets it at once when it can start.",
    )
    chat_id = forms.CharField(
        max_length=255, required=False, label="Chat id", help_text="The conversation it belongs to, if any."
    )
    require_approval = forms.BooleanField(
        required=False, label="Needs approval first", help_text="It waits in review until a human approves."
    )

    def __init__(self, *args: Any, members: list[Agent], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.members = {a.key: a for a in members}
        choices = [("", "Nobody yet"), *_agent_choices(members)]
        self.fields["owner"].choices = choices  # type: ignore[attr-defined]

    def owner_agent(self) -> Agent | None:
        key = self.cleaned_data.get("owner")
        return self.members[key] if key else None


class TaskAssignForm(DashboardForm):
    agent = forms.ChoiceField(label="Member")

    def __init__(self, *args: Any, members: list[Agent], **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "assign_%s")
        super().__init__(*args, **kwargs)
        self.members = {a.key: a for a in members}
        self.fields["agent"].choices = _agent_choices(members)  # type: ignore[attr-defined]


class TaskCommentForm(DashboardForm):
    text = forms.CharField(
        max_length=10_000, widget=forms.Textarea(attrs={"rows": 3}), label="Comment", strip=True
    )
    type = forms.ChoiceField(
        choices=TaskComment.Type.choices,
        initial=TaskComment.Type.NOTE,
        widget=forms.RadioSelect,
        help_text="A blocker on a task in progress fails it and escalates it.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "comment_%s")
        super().__init__(*args, **kwargs)

    def clean_text(self) -> str:
        text: str = self.cleaned_data["text"]
        if len(text.encode()) > 10_000:
            raise forms.ValidationError("At most 10 000 bytes.")
        return text


class TaskReasonForm(DashboardForm):
    """The reason of a cancel, reject or retry (500 characters, like the board's)."""

    reason = forms.CharField(max_length=500, required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args: Any, required: bool = False, id_prefix: str = "reason", **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", f"{id_prefix}_%s")
        super().__init__(*args, **kwargs)
        self.fields["reason"].required = required


class TaskRetryForm(TaskReasonForm):
    """A retry's note and the new instructions the member gets with the task (whole, in the dispatch)."""

    instructions = forms.CharField(
        max_length=4000,
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="New instructions",
        help_text="Sent to the member with the task when it is dispatched again (at most 4000 characters).",
    )


class TaskEventFilterForm(FilterForm):
    event_type = forms.ChoiceField(
        choices=[("", "Any"), *TaskEvent.Type.choices], required=False, label="Event type"
    )
    task = forms.CharField(
        max_length=20, required=False, label="Task", help_text="Its identifier, e.g. T-001-a3f9."
    )


class EscalationFilterForm(FilterForm):
    state = forms.ChoiceField(choices=[("", "Any"), *Escalation.State.choices], required=False)


# --- sandbox ----------------------------------------------------------------------------------------------

SANDBOX_LABELS = {
    "mode": "Mode",
    "scope": "Scope",
    "workspace_access": "Workspace access",
    "image": "Image",
    "memory_mb": "Memory (MB)",
    "cpus": "CPUs",
    "pids_limit": "Processes at most",
    "timeout_seconds": "Command timeout (seconds)",
    "network": "Network",
    "read_only_root": "Read-only root file system",
    "tmpfs_size_mb": "tmpfs size (MB)",
    "cpu_seconds": "CPU seconds per process",
    "address_space_mb": "Address space per process (MB)",
    "file_size_mb": "Largest file (MB)",
    "open_files": "Open files per process",
}
SANDBOX_HELP = {
    "mode": "jail (the default): each command runs in a bubblewrap jail that sees only its own workspace "
    "(at /workspace) and the system's programs, read-only; docker: in a Docker container with the limits "
    "below; host: on this server itself, offered only where the operator allows it "
    "(TOOLGATE_ALLOW_HOST_EXEC). Settings saved before the jail (off, non-main, all) are read as jail, "
    "docker for agents other than main/default, and docker.",
    "scope": "session: a container per session; agent: one per agent; shared: one for the whole tenant, "
    "with every agent's workspace.",
    "workspace_access": "The agent's workspace at /workspace: read-write (rw), read-only (ro) or not "
    "mounted (none).",
    "image": "One of the images this server allows (TOOLGATE_SANDBOX_IMAGES).",
    "memory_mb": "No swap beyond it; a command over it is killed.",
    "cpus": "CPU cores the container may use.",
    "pids_limit": "Processes and threads at once (a fork bomb stops here).",
    "timeout_seconds": "The longest a command may run inside the sandbox.",
    "network": "Off (the default): the jail or container has no network at all. Warning: on lets "
    "commands open connections like this server itself (in a container, through Docker's bridge): the "
    "internet, the hosts around this server and, in the jail, services listening on this server's "
    "addresses.",
    "cpu_seconds": "Jail: CPU time a process may use before it is stopped.",
    "address_space_mb": "Jail: virtual memory a process may map (programs such as node reserve more than "
    "they use).",
    "file_size_mb": "Jail: the largest file a process may write.",
    "open_files": "Jail: files and sockets a process may hold open at once.",
    "read_only_root": "The image's file system is read-only; the workspace and the tmpfs mounts stay "
    "writable.",
    "tmpfs_size_mb": "Each of /tmp, /var/tmp and /run (noexec, nosuid, nodev).",
}
_ON_OFF = {"on": True, "off": False}
# The choices and bounds the sandbox settings are validated with, so the form offers exactly those.
SANDBOX_CHOICES: dict[str, tuple[str, ...]] = sandbox_config.CHOICES
SANDBOX_NUMBERS: dict[str, tuple[type, float, float]] = sandbox_config.NUMBERS
SANDBOX_BOOLEANS: tuple[str, ...] = sandbox_config.BOOLEANS


class SandboxSettingsForm(DashboardForm):
    """Every sandbox key (``apps.toolkit.sandbox_config.KEYS``) as a field.

    For the tenant (``inherited`` None) every key is set. For an agent, ``inherited`` is the tenant's
    configuration in effect and each key may be left to inherit it (an empty choice or number);
    :meth:`values` then holds only the keys the agent overrides."""

    def __init__(self, *args: Any, inherited: SandboxConfig | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inherited = inherited
        for key in sandbox_config.KEYS:
            field = self._field(key)
            field.label = SANDBOX_LABELS[key]
            field.help_text = SANDBOX_HELP[key]
            if key in SANDBOX_NUMBERS:
                _, low, high = SANDBOX_NUMBERS[key]
                field.help_text += f" From {low:g} to {high:g}."
            self.fields[key] = field

    def _inherit(self, key: str) -> str:
        assert self.inherited is not None
        value = getattr(self.inherited, key)
        shown = (
            ("on" if value else "off")
            if isinstance(value, bool)
            else f"{value:g}"
            if key == "cpus"
            else value
        )
        return f"inherit from tenant ({shown})"

    def _field(self, key: str) -> forms.Field:
        agent = self.inherited is not None
        if key in SANDBOX_CHOICES or key == "image":
            options = sandbox_config.allowed_images() if key == "image" else SANDBOX_CHOICES[key]
            if key == "mode":
                # The modes to choose from (host only where the operator allows it), and a setting saved
                # before the jail only while it is the current value.
                current = self.initial.get("mode")
                offered = [
                    m
                    for m in sandbox_config.MODES
                    if m != sandbox_config.HOST or sandbox_config.host_allowed()
                ]
                options = [*offered, *([current] if current in sandbox_config.LEGACY_MODES else [])]
            choices = [(v, v) for v in options]
            if agent:
                choices.insert(0, ("", self._inherit(key)))
            return forms.ChoiceField(choices=choices, required=not agent)
        if key in SANDBOX_NUMBERS:
            kind, low, high = SANDBOX_NUMBERS[key]
            attrs = {"placeholder": self._inherit(key)} if agent else {}
            if kind is int:
                return forms.IntegerField(
                    min_value=int(low),
                    max_value=int(high),
                    required=not agent,
                    widget=forms.NumberInput(attrs),
                )
            return forms.FloatField(
                min_value=low,
                max_value=high,
                required=not agent,
                widget=forms.NumberInput({"step": "0.1", **attrs}),
            )
        if agent:
            return forms.ChoiceField(
                choices=[("", self._inherit(key)), ("on", "on"), ("off", "off")], required=False
            )
        return forms.BooleanField(required=False)

    @staticmethod
    def initial_for(values: dict[str, Any], *, agent: bool = False) -> dict[str, Any]:
        """The form's initial data from a sandbox object (the tenant's in effect, or an agent's own keys)."""
        if not agent:
            return dict(values)
        return {
            key: ("on" if value else "off") if isinstance(value, bool) else value
            for key, value in values.items()
            if key in sandbox_config.KEYS
        }

    def values(self) -> dict[str, Any]:
        """The sandbox object the form sets (call after ``is_valid``): every key for the tenant, the
        overridden ones for an agent."""
        result: dict[str, Any] = {}
        for key in sandbox_config.KEYS:
            value = self.cleaned_data.get(key)
            if self.inherited is None:
                result[key] = bool(value) if key in SANDBOX_BOOLEANS else value
            elif value not in (None, ""):
                result[key] = _ON_OFF[value] if key in SANDBOX_BOOLEANS else value
        return result

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        # The rule the tenant and agent services apply, so a refusal is shown next to its field.
        for message in sandbox_config.validate(self.values()):
            field = next((key for key in sandbox_config.KEYS if f'"{key}"' in message), None)
            self.add_error(field, message)
        return cleaned
