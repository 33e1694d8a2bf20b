"""Dashboard forms of MCP servers, grants and access requests. They check the shape of the input; the
MCP services decide whether the change is allowed.

Headers, env and the API key are write-only: their widgets never render a value (not even the one just
submitted when the form comes back with errors), an empty field keeps what is stored, and a "clear" box
removes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django import forms
from django.utils.html import escape

from apps.dashboard.forms import DashboardForm, parse_json_object
from apps.mcp_grants.models import MCPServer, server_name_validator
from apps.mcp_grants.services import MAX_REASON, MAX_USER_ID
from apps.mcp_grants.validation import MAX_TIMEOUT, MAX_TOOL_NAME

MAX_SECRET_TEXT = 65536
MAX_ARGS_TEXT = 65536
MAX_EXTRA_TOOLS_TEXT = 20000
MONO = {"class": "mono", "spellcheck": "false", "autocomplete": "off"}


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never shows a value: what it holds is a secret."""

    def format_value(self, value: Any) -> str | None:
        return None


def _lines(text: str) -> list[tuple[int, str]]:
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def parse_pairs(text: str, *, separator: str, example: str) -> dict[str, str]:
    """``Name<separator>value`` lines as a mapping. Messages name the line, never its value."""
    result: dict[str, str] = {}
    for number, line in _lines(text):
        name, sep, value = line.partition(separator)
        name = name.strip()
        if not sep or not name:
            raise forms.ValidationError(f"Line {number}: write one entry a line, like {example}.")
        if name in result:
            raise forms.ValidationError(f"Line {number}: {name[:64]} is given twice.")
        result[name] = value.strip()
    return result


def parse_tool_names(text: str) -> list[str]:
    """Tool names separated by commas, spaces or line breaks."""
    names = [n for n in text.replace(",", " ").split() if n]
    for name in names:
        if len(name) > MAX_TOOL_NAME:
            raise forms.ValidationError(f"A tool name has at most {MAX_TOOL_NAME} characters.")
    return list(dict.fromkeys(names))


def _tool_choices(names: Iterable[str]) -> list[tuple[str, str]]:
    return [(n, n) for n in sorted(set(names))]


# --- servers ------------------------------------------------------------------------------------------


class SecretFieldsForm(DashboardForm):
    """The write-only secrets of a server or of a user's own credentials: an environment (stdio only),
    headers and an API key. None is ever shown; left empty, a stored value is kept, and a box removes
    it (offered only when something is stored)."""

    env = forms.CharField(
        max_length=MAX_SECRET_TEXT,
        required=False,
        label="Environment",
        strip=False,
        widget=WriteOnlyTextarea(attrs={**MONO, "rows": 3}),
        help_text="stdio, write-only: NAME=value, one a line.",
    )
    clear_env = forms.BooleanField(required=False, label="Remove the stored environment")
    headers = forms.CharField(
        max_length=MAX_SECRET_TEXT,
        required=False,
        strip=False,
        widget=WriteOnlyTextarea(attrs={**MONO, "rows": 3}),
        help_text="Write-only: Name: value, one a line.",
    )
    clear_headers = forms.BooleanField(required=False, label="Remove the stored headers")
    api_key = forms.CharField(
        max_length=8192,
        required=False,
        label="API key",
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored API key")

    SECRETS = (("env", "clear_env"), ("headers", "clear_headers"), ("api_key", "clear_api_key"))

    def describe_stored(self, stored: Any) -> None:
        """Say in each field which secrets ``stored`` (a server or credentials; None: new) holds, by
        name only, and offer to remove only what is there."""
        if stored is None:
            for _, clear in self.SECRETS:
                self.fields.pop(clear, None)
            return
        names = {
            "env": ", ".join(sorted(stored.env)),
            "headers": ", ".join(sorted(stored.headers)),
            "api_key": "an API key" if stored.api_key else "",
        }
        for field, clear in self.SECRETS:
            if field not in self.fields:
                continue
            if names[field]:
                self.fields[
                    field
                ].help_text += f" Stored now: {escape(names[field])} (values hidden); leave empty to keep it."
            else:
                del self.fields[clear]
                self.fields[field].help_text += " Nothing is stored now."

    def clean_env(self) -> dict[str, str] | None:
        text = self.cleaned_data.get("env") or ""
        return parse_pairs(text, separator="=", example="NODE_ENV=production") if text.strip() else None

    def clean_headers(self) -> dict[str, str] | None:
        text = self.cleaned_data.get("headers") or ""
        return parse_pairs(text, separator=":", example="Authorization: Bearer …") if text.strip() else None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for field, clear in self.SECRETS:
            if cleaned.get(clear) and cleaned.get(field):
                self.add_error(field, "Enter a new value or remove the stored one, not both.")
        return cleaned

    def secret_changes(self) -> dict[str, Any]:
        """The secrets to save: a new value, or an empty one to remove what is stored (a field left
        empty is not in the result: what is stored stays)."""
        data = self.cleaned_data
        result: dict[str, Any] = {}
        for field, clear in self.SECRETS:
            if field not in self.fields:
                continue
            if data.get(field):
                result[field] = data[field]
            elif data.get(clear):
                result[field] = "" if field == "api_key" else {}
        return result


class ServerForm(SecretFieldsForm):
    """A server's registration. The fields of the transport not chosen are cleared on save: a stdio
    server has no URL, an HTTP one no command, arguments or env."""

    display_name = forms.CharField(max_length=255, required=False, label="Display name")
    transport = forms.ChoiceField(
        choices=MCPServer.Transport.choices,
        initial=MCPServer.Transport.STDIO,
        widget=forms.Select(attrs={"data-mcp-transport": ""}),
        help_text="stdio starts a local program; SSE and Streamable HTTP connect to a URL.",
    )
    command = forms.CharField(
        max_length=1024,
        required=False,
        widget=forms.TextInput(attrs={**MONO, "data-transport": "stdio"}),
        help_text="stdio: the program, e.g. npx, uvx, python3 (a short list of interpreters and runners).",
    )
    args = forms.CharField(
        max_length=MAX_ARGS_TEXT,
        required=False,
        label="Arguments",
        strip=False,
        widget=forms.Textarea(attrs={**MONO, "rows": 4, "data-transport": "stdio"}),
        help_text="stdio: one argument a line.",
    )
    url = forms.CharField(
        max_length=2048,
        required=False,
        label="URL",
        widget=forms.TextInput(attrs={**MONO, "data-transport": "sse streamable-http"}),
        help_text="SSE / Streamable HTTP: a public http(s) address.",
    )
    tool_prefix = forms.CharField(
        max_length=50,
        required=False,
        label="Tool prefix",
        widget=forms.TextInput(attrs=MONO),
        # Help texts are rendered as HTML.
        help_text="Tools are registered as mcp_&lt;prefix&gt;__&lt;tool&gt;; empty: the server's name.",
    )
    unprefixed = forms.BooleanField(
        required=False,
        label="Tools under their own names",
        help_text="Register the server's tools without a prefix (the prefix is then unused). A name a "
        "built-in tool, a custom tool or another server's tool has already is refused.",
    )
    timeout_sec = forms.IntegerField(
        min_value=1, max_value=MAX_TIMEOUT, initial=60, label="Timeout (seconds)", help_text="Per tool call."
    )
    settings = forms.CharField(
        required=False,
        initial="{}",
        widget=forms.Textarea(attrs={**MONO, "rows": 3}),
        help_text="A JSON object of server settings.",
    )

    field_order = [
        "display_name",
        "transport",
        "command",
        "args",
        "url",
        "env",
        "clear_env",
        "headers",
        "clear_headers",
        "api_key",
        "clear_api_key",
    ]

    def __init__(
        self,
        *args: Any,
        server: MCPServer | None = None,
        shown: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """``server``: the one being edited (None: a new one); ``shown``: its command, args and URL as
        the form shows them (through the credential scrubber), so that an untouched field keeps the
        stored value."""
        super().__init__(*args, **kwargs)
        self.server = server
        self.shown = shown or {}
        self.fields[
            "env"
        ].help_text = (
            "stdio, write-only: NAME=value, one a line; env:HOME and a few others reference Toolgate's own."
        )
        self.fields["env"].widget.attrs["data-transport"] = "stdio"
        self.describe_stored(server)
        if "clear_env" in self.fields:
            self.fields["clear_env"].widget.attrs["data-transport"] = "stdio"

    @classmethod
    def initial_for(cls, server: MCPServer, shown: dict[str, Any]) -> dict[str, Any]:
        return {
            "display_name": server.display_name,
            "transport": server.transport,
            "command": shown["command"],
            "args": "\n".join(shown["args"]),
            "url": shown["url"],
            "tool_prefix": server.tool_prefix,
            "unprefixed": not server.prefix_tools,
            "timeout_sec": server.timeout_sec,
            "settings": json.dumps(server.settings, indent=2, sort_keys=True),
        }

    def clean_args(self) -> list[str]:
        return [line for _, line in _lines(self.cleaned_data.get("args") or "")]

    def clean_settings(self) -> dict[str, Any]:
        return parse_json_object(self.cleaned_data.get("settings"), example='{"retries": 2}')

    def _kept(self, field: str, value: Any) -> bool:
        """An edited server's command, args or URL left as the form showed it (scrubbed): keep it."""
        return self.server is not None and field in self.shown and value == self.shown[field]

    def changes(self) -> dict[str, Any]:
        """The registration fields to save, as ``server_create`` / ``server_update`` take them."""
        data = self.cleaned_data
        stdio = data["transport"] == MCPServer.Transport.STDIO
        result: dict[str, Any] = {
            "display_name": data["display_name"],
            "transport": data["transport"],
            "tool_prefix": data["tool_prefix"],
            "prefix_tools": not data.get("unprefixed", False),
            "timeout_sec": data["timeout_sec"],
            "settings": data["settings"],
        }
        for field, value in (
            ("command", data["command"] if stdio else ""),
            ("args", data["args"] if stdio else []),
            ("url", "" if stdio else data["url"]),
        ):
            if not self._kept(field, value):
                result[field] = value
        result.update(self.secret_changes())
        if not stdio:
            result["env"] = {}
        return result


class ServerCreateForm(ServerForm):
    name = forms.CharField(
        max_length=64,
        validators=[server_name_validator],
        widget=forms.TextInput(attrs=MONO),
        help_text="Lower-case letters and digits joined by '_' or '-'. Grants and policies refer to it; "
        "it cannot be changed later.",
    )
    enabled = forms.BooleanField(required=False, initial=True, help_text="Agents with a grant get its tools.")

    field_order = ["name", "display_name", "transport", "command", "args", "url", "env", "headers", "api_key"]

    def changes(self) -> dict[str, Any]:
        return {**super().changes(), "enabled": self.cleaned_data["enabled"]}


class CredentialForm(SecretFieldsForm):
    """A user's own credentials for a server (write-only): their calls then use a connection of their
    own, opened with these over the server's."""

    user_id = forms.CharField(max_length=255, label="User id", widget=forms.TextInput(attrs=MONO))

    field_order = ["user_id", "api_key", "clear_api_key", "headers", "clear_headers", "env", "clear_env"]

    def __init__(self, *args: Any, server: MCPServer, stored: Any = None, **kwargs: Any) -> None:
        """``stored``: the credentials being changed (None: new ones, for a user id to enter)."""
        super().__init__(*args, **kwargs)
        if server.transport != MCPServer.Transport.STDIO:
            del self.fields["env"], self.fields["clear_env"]
        if stored is not None:
            del self.fields["user_id"]
        self.describe_stored(stored)


# --- grants and requests ------------------------------------------------------------------------------


class ToolPickerForm(DashboardForm):
    """A tool picker: every tool of the server (or "all tools") to allow, some to deny."""

    all_tools = forms.BooleanField(required=False, label="All tools of the server")
    tool_allow = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Allow these tools"
    )
    extra_allow = forms.CharField(
        max_length=MAX_EXTRA_TOOLS_TEXT,
        required=False,
        label="More tools to allow",
        widget=forms.TextInput(attrs=MONO),
        help_text="Names not discovered yet, separated by commas.",
    )

    def __init__(self, *args: Any, tools: Iterable[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tool_allow"].choices = _tool_choices(tools)  # type: ignore[attr-defined]

    def clean_extra_allow(self) -> list[str]:
        return parse_tool_names(self.cleaned_data.get("extra_allow") or "")

    def allow(self) -> list[str] | None:
        """The tools to allow; None for every tool."""
        data = self.cleaned_data
        if data.get("all_tools"):
            return None
        return sorted({*data.get("tool_allow", []), *data.get("extra_allow", [])})

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        chosen = [*cleaned.get("tool_allow", []), *cleaned.get("extra_allow", [])]
        if cleaned.get("all_tools") and chosen:
            self.add_error("tool_allow", "Choose all tools or some tools, not both.")
        elif not cleaned.get("all_tools") and not chosen:
            # An empty allow list would allow every tool: say so explicitly instead.
            self.add_error("tool_allow", "Choose at least one tool, or all tools.")
        return cleaned


class GrantForm(ToolPickerForm):
    """An agent's or a user's grant of one server."""

    tool_deny = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Deny these tools",
        help_text="Denied tools stay out even when allowed.",
    )
    extra_deny = forms.CharField(
        max_length=MAX_EXTRA_TOOLS_TEXT,
        required=False,
        label="More tools to deny",
        widget=forms.TextInput(attrs=MONO),
        help_text="Names not discovered yet, separated by commas.",
    )
    resources = forms.BooleanField(
        required=False,
        initial=True,
        label="Resources",
        help_text="The server's resources (resources/list and resources/read), under this grant.",
    )
    prompts = forms.BooleanField(
        required=False,
        initial=True,
        label="Prompts",
        help_text="The server's prompts (prompts/list and prompts/get), under this grant.",
    )
    enabled = forms.BooleanField(required=False, initial=True)
    config_overrides = forms.CharField(
        required=False,
        initial="{}",
        label="Configuration overrides",
        widget=forms.Textarea(attrs={**MONO, "rows": 3}),
        help_text="A JSON object.",
    )

    def __init__(self, *args: Any, tools: Iterable[str], **kwargs: Any) -> None:
        tools = list(tools)
        super().__init__(*args, tools=tools, **kwargs)
        self.fields["tool_deny"].choices = _tool_choices(tools)  # type: ignore[attr-defined]

    def clean_extra_deny(self) -> list[str]:
        return parse_tool_names(self.cleaned_data.get("extra_deny") or "")

    def clean_config_overrides(self) -> dict[str, Any]:
        return parse_json_object(self.cleaned_data.get("config_overrides"), example='{"timeout_sec": 30}')

    def deny(self) -> list[str]:
        data = self.cleaned_data
        return sorted({*data.get("tool_deny", []), *data.get("extra_deny", [])})

    def values(self) -> dict[str, Any]:
        """The grant's fields as ``agent_grant_set`` / ``user_grant_set`` take them."""
        return {
            "enabled": self.cleaned_data["enabled"],
            "tool_allow": self.allow(),
            "tool_deny": self.deny(),
            "resources": self.cleaned_data["resources"],
            "prompts": self.cleaned_data["prompts"],
            "config_overrides": self.cleaned_data["config_overrides"],
        }

    @staticmethod
    def initial_for(grant: Any) -> dict[str, Any]:
        return {
            "all_tools": grant.tool_allow is None,
            "tool_allow": list(grant.tool_allow or []),
            "tool_deny": list(grant.tool_deny or []),
            "resources": grant.resources,
            "prompts": grant.prompts,
            "enabled": grant.enabled,
            "config_overrides": json.dumps(grant.config_overrides, indent=2, sort_keys=True),
        }


class AgentGrantCreateForm(GrantForm):
    agent = forms.ChoiceField(label="Agent")

    field_order = ["agent"]

    def __init__(self, *args: Any, agents: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = [("", "Choose an agent"), *((k, k) for k in agents)]  # type: ignore[attr-defined]


class UserGrantCreateForm(GrantForm):
    user_id = forms.CharField(
        max_length=MAX_USER_ID,
        label="User id",
        help_text="The user_id agent loops send with their calls (for dashboard users: their email).",
    )

    field_order = ["user_id"]


class AccessRequestForm(ToolPickerForm):
    """A request for a grant of one server, to an agent or to a user."""

    scope = forms.ChoiceField(
        choices=[("agent", "An agent"), ("user", "A user")],
        initial="user",
        widget=forms.RadioSelect,
        label="Access for",
    )
    agent = forms.ChoiceField(required=False, label="Agent", help_text="For access of an agent.")
    user_id = forms.CharField(
        max_length=MAX_USER_ID,
        required=False,
        label="User id",
        help_text="For access of a user: the user_id agent loops send with their calls.",
    )
    reason = forms.CharField(
        max_length=MAX_REASON, required=False, widget=forms.Textarea(attrs={"rows": 3}), label="Why"
    )

    field_order = ["scope", "agent", "user_id", "all_tools", "tool_allow", "extra_allow", "reason"]

    def __init__(self, *args: Any, agents: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = [("", "Choose an agent"), *((k, k) for k in agents)]  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("scope") == "agent" and not cleaned.get("agent"):
            self.add_error("agent", "Choose the agent that needs access.")
        if cleaned.get("scope") == "user" and not (cleaned.get("user_id") or "").strip():
            self.add_error("user_id", "Enter the user id that needs access.")
        return cleaned


class ReviewForm(DashboardForm):
    """An administrator's decision on a request: approve (with the tools it asked for, or fewer) or
    reject, with a note for the requester (required to reject, and a rejection is confirmed first)."""

    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    note = forms.CharField(
        max_length=MAX_REASON,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Note for the requester",
        help_text="Shown to the requester with the decision; required to reject (say why).",
    )
    narrow = forms.BooleanField(required=False, widget=forms.HiddenInput)
    # A rejection is confirmed on a page of its own that shows the note first.
    confirmed = forms.BooleanField(required=False, widget=forms.HiddenInput)
    all_tools = forms.BooleanField(required=False, label="All tools of the server")
    tool_allow = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Grant these tools"
    )

    def __init__(self, *args: Any, requested: list[str] | None, tools: Iterable[str], **kwargs: Any) -> None:
        """``requested``: the tools the request asked for (None: all); ``tools``: the server's."""
        super().__init__(*args, **kwargs)
        self.requested = requested
        offered = requested if requested is not None else list(tools)
        self.fields["tool_allow"].choices = _tool_choices(offered)  # type: ignore[attr-defined]
        if requested is not None:
            del self.fields["all_tools"]

    @staticmethod
    def initial_for(requested: list[str] | None) -> dict[str, Any]:
        return {"narrow": True, "all_tools": requested is None, "tool_allow": list(requested or [])}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("decision") == "reject" and not self.errors and not cleaned.get("note", "").strip():
            self.add_error("note", "Write a note saying why the request is rejected: the requester reads it.")
        if self.errors or cleaned.get("decision") != "approve" or not cleaned.get("narrow"):
            return cleaned
        chosen = cleaned.get("tool_allow", [])
        if cleaned.get("all_tools") and chosen:
            self.add_error("tool_allow", "Grant all tools or some tools, not both.")
        elif not cleaned.get("all_tools") and not chosen:
            self.add_error("tool_allow", "Choose at least one tool, or reject the request.")
        return cleaned

    def granted(self) -> list[str] | None:
        """``tool_allow`` for ``request_review``: None keeps what the request asked for."""
        data = self.cleaned_data
        if not data.get("narrow") or data.get("all_tools"):
            return None
        chosen = sorted(data.get("tool_allow", []))
        return None if self.requested is not None and chosen == sorted(self.requested) else chosen
