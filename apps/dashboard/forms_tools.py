"""Dashboard forms of custom tools and credentialed CLIs. They check the shape of the input; the services
(``apps.custom_tools.services``, ``apps.secure_cli.services``) decide whether the change is allowed and
report each problem by field.

Environments are write-only: their widgets never render a value (not even the one just submitted when
the form comes back with errors), an empty field keeps what is stored, new entries replace the whole
environment, and a box removes it.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from django import forms
from django.utils.html import escape

from apps.custom_tools.models import DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS
from apps.custom_tools.validation import MAX_COMMAND, MAX_DESCRIPTION, MAX_SCHEMA_BYTES, MAX_WORKING_DIR
from apps.dashboard.forms import DashboardForm
from apps.dashboard.forms_mcp import MONO, WriteOnlyTextarea, parse_pairs
from apps.secure_cli import validation as cli_validation
from apps.secure_cli.presets import Preset
from apps.tenants.api.parsers import strict_loads

MAX_ENV_TEXT = 65536
MAX_PATTERN_TEXT = 30000
MAX_ARGS_JSON = 64 * 1024
MAX_CLI_ARGS_TEXT = 16384
EMPTY_SCHEMA = '{\n  "type": "object",\n  "properties": {}\n}'


def _choices(keys: list[str], label: str) -> list[tuple[str, str]]:
    return [(key, label.format(key=key)) for key in keys]


def parse_patterns(text: str) -> list[str]:
    """One regular expression a line (blank lines skipped); the services check each."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def parse_json(raw: str | None, *, limit: int, what: str, example: str) -> dict[str, Any]:
    """A JSON object typed into a form (blank is ``{}``), with the parser's line and column on error."""
    text = (raw or "").strip()
    if not text:
        return {}
    if len(text.encode()) > limit:
        raise forms.ValidationError(f"At most {limit} bytes of JSON.")
    try:
        value = strict_loads(text)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(
            f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
        ) from None
    except ValueError as exc:
        raise forms.ValidationError(f"Not valid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise forms.ValidationError(f"{what} must be a JSON object, like {example}.")
    return value


class EnvForm(DashboardForm):
    """A write-only environment: ``NAME=value`` lines. Left empty, the stored one stays; entries
    replace it as a whole; the box removes it (offered only when something is stored)."""

    env = forms.CharField(
        max_length=MAX_ENV_TEXT,
        required=False,
        label="Environment",
        strip=False,
        widget=WriteOnlyTextarea(attrs={**MONO, "rows": 3}),
        help_text="Write-only: NAME=value, one a line.",
    )
    clear_env = forms.BooleanField(required=False, label="Remove the stored environment")

    def describe_env(self, names: list[str] | None) -> None:
        """Say which variables are stored (``names``; None: a new object), never their values."""
        if not names:
            self.fields.pop("clear_env", None)
            if names is not None:
                self.fields["env"].help_text += " Nothing is stored now."
            return
        shown = escape(", ".join(sorted(names)))
        self.fields[
            "env"
        ].help_text += (
            f" Stored now: {shown} (values hidden); leave empty to keep them. New entries replace them all."
        )

    def clean_env(self) -> dict[str, str] | None:
        text = self.cleaned_data.get("env") or ""
        return parse_pairs(text, separator="=", example="API_TOKEN=…") if text.strip() else None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("clear_env") and cleaned.get("env"):
            self.add_error("env", "Enter new variables or remove the stored ones, not both.")
        return cleaned

    def env_change(self) -> dict[str, dict[str, str]]:
        """``{"env": …}`` to save (a new environment, or ``{}`` to remove it); empty to keep it."""
        if self.cleaned_data.get("env"):
            return {"env": self.cleaned_data["env"]}
        if self.cleaned_data.get("clear_env"):
            return {"env": {}}
        return {}


# --- custom tools -----------------------------------------------------------------------------------------


class CustomToolForm(EnvForm):
    """A custom tool's definition. ``scope`` is empty for a global tool, or the key of the one agent
    the tool belongs to."""

    name = forms.CharField(
        max_length=64,
        widget=forms.TextInput(attrs=MONO),
        help_text="A lower-case letter, then lower-case letters, digits or '_'. Agents call the tool by it.",
    )
    description = forms.CharField(
        max_length=MAX_DESCRIPTION,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="What the tool does: agents read it.",
    )
    scope = forms.ChoiceField(
        required=False,
        help_text="A global tool is every agent's; an agent's own tool overrides a global one of its name.",
    )
    parameters = forms.CharField(
        max_length=MAX_SCHEMA_BYTES,
        initial=EMPTY_SCHEMA,
        label="Parameters (JSON Schema)",
        strip=False,
        widget=forms.Textarea(attrs={**MONO, "rows": 8}),
        help_text='A JSON Schema of "type": "object"; each {{.key}} of the command is one of its properties.',
    )
    command = forms.CharField(
        max_length=MAX_COMMAND,
        strip=False,
        label="Command template",
        widget=forms.Textarea(attrs={**MONO, "rows": 3}),
        help_text="Run with sh -c. {{.key}} is the argument key, single-quoted for the shell.",
    )
    working_dir = forms.CharField(
        max_length=MAX_WORKING_DIR,
        required=False,
        label="Working directory",
        widget=forms.TextInput(attrs=MONO),
        help_text="Relative to the agent's workspace; empty: the workspace itself.",
    )
    timeout_seconds = forms.IntegerField(
        min_value=MIN_TIMEOUT_SECONDS,
        max_value=MAX_TIMEOUT_SECONDS,
        initial=DEFAULT_TIMEOUT_SECONDS,
        label="Timeout (seconds)",
    )
    enabled = forms.BooleanField(required=False, initial=True, help_text="Agents get the tool.")

    field_order = [
        "name",
        "description",
        "scope",
        "parameters",
        "command",
        "working_dir",
        "timeout_seconds",
        "env",
        "clear_env",
        "enabled",
    ]

    def __init__(
        self,
        *args: Any,
        agents: list[str],
        env_names: list[str] | None = None,
        shown_command: str | None = None,
        **kwargs: Any,
    ) -> None:
        """``agents``: the tenant's agent keys; ``env_names``: the edited tool's variables (None: a new
        tool); ``shown_command``: its command as the form shows it (secrets masked), kept when it comes
        back unchanged."""
        super().__init__(*args, **kwargs)
        self.shown_command = shown_command
        self.fields["scope"].choices = [  # type: ignore[attr-defined]
            ("", "Global: every agent of the tenant"),
            *_choices(agents, "Only the agent {key}"),
        ]
        self.fields[
            "env"
        ].help_text = "Write-only: NAME=value, one a line; the values are masked in outputs and never shown."
        self.describe_env(env_names)

    @staticmethod
    def initial_for(data: dict[str, Any]) -> dict[str, Any]:
        """The form's values for a tool as ``tool_data`` shows it."""
        return {
            "name": data["name"],
            "description": data["description"],
            "scope": data["agent"] or "",
            "parameters": json.dumps(data["parameters"], indent=2, sort_keys=True),
            "command": data["command"],
            "working_dir": data["working_dir"],
            "timeout_seconds": data["timeout_seconds"],
            "enabled": data["enabled"],
        }

    def clean_parameters(self) -> dict[str, Any]:
        value = parse_json(
            self.cleaned_data.get("parameters"),
            limit=MAX_SCHEMA_BYTES,
            what="The parameters",
            example='{"type": "object", "properties": {"domain": {"type": "string"}}}',
        )
        return value or {"type": "object", "properties": {}}

    def values(self) -> dict[str, Any]:
        """The fields for ``custom_tool_create`` / ``custom_tool_update`` (``agent`` as a key; "" for
        global); a command left as shown is not among them."""
        data = self.cleaned_data
        result: dict[str, Any] = {
            key: data[key]
            for key in ("name", "description", "parameters", "working_dir", "timeout_seconds", "enabled")
        }
        result["agent"] = data.get("scope") or ""
        if self.shown_command is None or data["command"] != self.shown_command:
            result["command"] = data["command"]
        result.update(self.env_change())
        return result


class CustomToolTestForm(DashboardForm):
    """A test run's sample arguments (a JSON object), the agent whose workspace and settings it uses,
    and the user it acts for."""

    agent = forms.ChoiceField(help_text="Its workspace and its exec settings (deny groups) are used.")
    args = forms.CharField(
        max_length=MAX_ARGS_JSON,
        required=False,
        initial="{}",
        label="Arguments (JSON)",
        strip=False,
        widget=forms.Textarea(attrs={**MONO, "rows": 5}),
        help_text="A JSON object, checked against the tool's parameters.",
    )
    user_id = forms.CharField(
        max_length=255, required=False, label="User id", help_text="Optional: the user the run acts for."
    )

    def __init__(self, *args: Any, agents: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = _choices(agents, "{key}")  # type: ignore[attr-defined]

    def clean_args(self) -> dict[str, Any]:
        return parse_json(
            self.cleaned_data.get("args"),
            limit=MAX_ARGS_JSON,
            what="The arguments",
            example='{"domain": "example.com"}',
        )


# --- credentialed CLIs ------------------------------------------------------------------------------------


def _patterns_field(label: str, help_text: str) -> forms.CharField:
    return forms.CharField(
        max_length=MAX_PATTERN_TEXT,
        required=False,
        label=label,
        widget=forms.Textarea(attrs={**MONO, "rows": 3}),
        help_text=help_text,
    )


class BinaryForm(EnvForm):
    """A credentialed CLI's registration (``preset``: the template a new one starts from)."""

    preset = forms.CharField(required=False, widget=forms.HiddenInput)
    binary_name = forms.CharField(
        max_length=64,
        label="Binary",
        widget=forms.TextInput(attrs=MONO),
        help_text="The program's name as agents type it: gh, aws, kubectl …",
    )
    binary_path = forms.CharField(
        max_length=cli_validation.MAX_PATH_CHARS,
        required=False,
        label="Path",
        widget=forms.TextInput(attrs=MONO),
        help_text="An absolute path to the program (checked at every run); empty: found on the safe PATH.",
    )
    description = forms.CharField(max_length=cli_validation.MAX_DESCRIPTION_CHARS, required=False)
    deny_args = _patterns_field(
        "Denied arguments", "Regular expressions, one a line, searched in the arguments joined with spaces."
    )
    deny_verbose = _patterns_field(
        "Denied verbose flags", "Regular expressions, one a line, matched at the start of each argument."
    )
    timeout_seconds = forms.IntegerField(
        min_value=cli_validation.MIN_TIMEOUT,
        max_value=cli_validation.MAX_TIMEOUT,
        initial=30,
        label="Timeout (seconds)",
    )
    tips = forms.CharField(
        max_length=cli_validation.MAX_TIPS_CHARS,
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Guidance agents get with their tools (TOOLS.md style).",
    )
    is_global = forms.BooleanField(
        required=False,
        initial=True,
        label="Global",
        help_text="Every agent reaches it; otherwise only agents with a grant.",
    )
    enabled = forms.BooleanField(required=False, initial=True)

    field_order = [
        "preset",
        "binary_name",
        "binary_path",
        "description",
        "env",
        "clear_env",
        "deny_args",
        "deny_verbose",
        "timeout_seconds",
        "tips",
        "is_global",
        "enabled",
    ]

    def __init__(
        self, *args: Any, env_names: list[str] | None = None, preset: Preset | None = None, **kwargs: Any
    ) -> None:
        """``env_names``: the edited binary's variables (None: a new one); ``preset``: the template a
        new one starts from (its credential variables are named in the environment's help)."""
        super().__init__(*args, **kwargs)
        self.fields["env"].label = "Credentials (environment)"
        self.fields["env"].help_text = "Write-only: NAME=value, one a line; injected into the program only."
        if preset is not None:
            wanted = ", ".join(
                f"{v.name}{' (optional)' if v.optional else ''}{' (a file path)' if v.file else ''}"
                for v in preset.env
            )
            self.fields["env"].help_text += f" The {preset.name} preset uses: {escape(wanted)}."
        else:
            del self.fields["preset"]
        self.describe_env(env_names)

    @staticmethod
    def initial_for(data: dict[str, Any]) -> dict[str, Any]:
        """The form's values for a binary (``binary_data``) or a preset (``Preset.as_dict``)."""
        return {
            "preset": data.get("name", ""),
            "binary_name": data["binary_name"],
            "binary_path": data.get("binary_path", ""),
            "description": data["description"],
            "deny_args": "\n".join(data["deny_args"]),
            "deny_verbose": "\n".join(data["deny_verbose"]),
            "timeout_seconds": data["timeout_seconds"],
            "tips": data["tips"],
            "is_global": data.get("is_global", True),
            "enabled": data.get("enabled", True),
        }

    def clean_deny_args(self) -> list[str]:
        return parse_patterns(self.cleaned_data.get("deny_args") or "")

    def clean_deny_verbose(self) -> list[str]:
        return parse_patterns(self.cleaned_data.get("deny_verbose") or "")

    def values(self) -> dict[str, Any]:
        """The fields for ``binary_create`` / ``binary_update``."""
        data = self.cleaned_data
        keys = ("binary_name", "binary_path", "description", "deny_args", "deny_verbose", "timeout_seconds")
        result = {key: data[key] for key in (*keys, "tips", "is_global", "enabled")}
        result.update(self.env_change())
        return result


class GrantForm(EnvForm):
    """An agent's grant of a binary. Each override left empty uses the binary's setting."""

    agent = forms.ChoiceField(label="Agent")
    enabled = forms.BooleanField(
        required=False, initial=True, help_text="A disabled grant keeps the agent out."
    )
    deny_args = _patterns_field("Denied arguments", "Regular expressions, one a line; empty: the binary's.")
    deny_verbose = _patterns_field(
        "Denied verbose flags", "Regular expressions, one a line; empty: the binary's."
    )
    timeout_seconds = forms.IntegerField(
        min_value=cli_validation.MIN_TIMEOUT,
        max_value=cli_validation.MAX_TIMEOUT,
        required=False,
        label="Timeout (seconds)",
        help_text="Empty: the binary's.",
    )
    tips = forms.CharField(
        max_length=cli_validation.MAX_TIPS_CHARS,
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Empty: the binary's.",
    )
    no_tips = forms.BooleanField(required=False, label="No tips for this agent")

    field_order = ["agent", "enabled", "deny_args", "deny_verbose", "timeout_seconds", "tips", "no_tips"]

    def __init__(
        self, *args: Any, agents: list[str] | None, env_names: list[str] | None = None, **kwargs: Any
    ) -> None:
        """``agents``: the keys a new grant may name (None: an existing grant, its agent fixed)."""
        super().__init__(*args, **kwargs)
        if agents is None:
            del self.fields["agent"]
        else:
            self.fields["agent"].choices = [("", "Choose an agent"), *_choices(agents, "{key}")]  # type: ignore[attr-defined]
        self.fields["env"].label = "Credentials (environment)"
        self.fields["env"].help_text = "Write-only: NAME=value, one a line; over the binary's variables."
        self.describe_env(env_names)

    @staticmethod
    def initial_for(data: dict[str, Any]) -> dict[str, Any]:
        return {
            "enabled": data["enabled"],
            "deny_args": "\n".join(data["deny_args"] or []),
            "deny_verbose": "\n".join(data["deny_verbose"] or []),
            "timeout_seconds": data["timeout_seconds"],
            "tips": data["tips"] or "",
            "no_tips": data["tips"] == "",
        }

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("no_tips") and (cleaned.get("tips") or "").strip():
            self.add_error("tips", "Write tips or choose no tips, not both.")
        return cleaned

    def values(self) -> dict[str, Any]:
        """The grant's fields as ``grant_set`` takes them."""
        data = self.cleaned_data
        tips: str | None = data["tips"] if data["tips"].strip() else None
        return {
            "enabled": data["enabled"],
            "deny_args": parse_patterns(data["deny_args"]) or None,
            "deny_verbose": parse_patterns(data["deny_verbose"]) or None,
            "timeout_seconds": data["timeout_seconds"],
            "tips": "" if data["no_tips"] else tips,
            **self.env_change(),
        }


class CredentialForm(DashboardForm):
    """A user's own credentials for a binary: they replace what the user has stored."""

    user_id = forms.CharField(
        max_length=cli_validation.MAX_USER_ID,
        label="User id",
        widget=forms.TextInput(attrs=MONO),
        help_text="The user_id agent loops send with their calls (for dashboard users: their email).",
    )
    env = forms.CharField(
        max_length=MAX_ENV_TEXT,
        required=False,
        label="Credentials (environment)",
        strip=False,
        widget=WriteOnlyTextarea(attrs={**MONO, "rows": 3}),
        help_text="Write-only: NAME=value, one a line; on this user's calls, over the binary's and the "
        "grant's.",
    )

    def __init__(self, *args: Any, env_names: list[str] | None = None, **kwargs: Any) -> None:
        """``env_names``: the stored variables of the user being changed (None: a new user)."""
        super().__init__(*args, **kwargs)
        if env_names is not None:
            del self.fields["user_id"]
            self.fields["env"].help_text += (
                f" Stored now: {escape(', '.join(env_names)) or 'nothing'} (values hidden); "
                "what you enter replaces them."
            )

    def clean_env(self) -> dict[str, str]:
        text = self.cleaned_data.get("env") or ""
        env = parse_pairs(text, separator="=", example="GH_TOKEN=…") if text.strip() else {}
        if not env:
            raise forms.ValidationError("Enter at least one variable, NAME=value.")
        return env


class BinaryTestForm(DashboardForm):
    """A test run of a binary: its arguments as typed after the binary's name, the agent it runs as and
    the user it acts for."""

    agent = forms.ChoiceField(help_text="The run takes this agent's access: its grant and overrides.")
    args = forms.CharField(
        max_length=MAX_CLI_ARGS_TEXT,
        required=False,
        label="Arguments",
        strip=False,
        widget=forms.TextInput(attrs=MONO),
        help_text="As after the binary's name in a shell, e.g. api user --jq .login; quote to keep spaces.",
    )
    user_id = forms.CharField(
        max_length=cli_validation.MAX_USER_ID,
        required=False,
        label="User id",
        help_text="Optional: the user whose own credentials the run uses.",
    )

    def __init__(self, *args: Any, agents: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = [("", "Choose an agent"), *_choices(agents, "{key}")]  # type: ignore[attr-defined]

    def clean_args(self) -> list[str]:
        try:
            return shlex.split(self.cleaned_data.get("args") or "")
        except ValueError as exc:
            raise forms.ValidationError(f"Cannot split the arguments: {exc} (close every quote).") from None
