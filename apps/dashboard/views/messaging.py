"""Channels: where the message and create_forum_topic tools send (an outbound webhook or a Telegram
bot). Administrators only (a channel's configuration holds its bot token or signing secret): the list,
adding and editing one (the secret and the extra headers are write-only: left blank, the stored ones are
kept), the topics editor (a JSON object of chat or topic ids to tool allow lists), a test send with its
result, the outbound log, and deleting one after a confirmation.

Every channel is found inside the tenant the page acts in: another tenant's is 404 whatever the method.
Changes go through ``apps.messaging.services`` (audited without secrets, published on the ``messaging``
topic); a refusal is shown on the form with nothing saved.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django import forms
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import (
    DashboardForm,
    add_service_error,
    parse_json_object,
    stored_headers_help,
    stored_secret_help,
)
from apps.dashboard.forms_mcp import MONO, WriteOnlyTextarea
from apps.dashboard.views.confirm import confirm_action
from apps.dashboard.views.submit import submit_form
from apps.messaging import selectors, services
from apps.messaging.access import access_channel
from apps.messaging.models import MAX_CHAT_ID_CHARS, MAX_URL_CHARS, Channel
from apps.tenants.errors import ServiceError
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list

MAX_CHANNELS = 200
MAX_AGENT_CHOICES = 200
MAX_JSON_CHARS = 64 * 1024
PAGE_SIZE = 50
PLACEHOLDER = uuid.UUID(int=0)  # a channel's id in URL templates the page's script fills in
HEADERS_EXAMPLE = '{"Authorization": "Bearer …"}'
TOPICS_EXAMPLE = '{"-100123:topic:45": ["web_search", "group:memory"]}'


class ChannelForm(DashboardForm):
    """A channel's fields. The secret and the headers are write-only: blank keeps what is stored."""

    name = forms.CharField(
        max_length=64, help_text="Lower-case letters, digits, '-' and '_'. Agents name it."
    )
    kind = forms.ChoiceField(choices=Channel.Kind.choices, help_text="Cannot be changed later.")
    url = forms.CharField(
        required=False,
        max_length=MAX_URL_CHARS,
        label="URL",
        help_text="Webhook: where messages are POSTed (https). Telegram: the Bot API server "
        "(blank for https://api.telegram.org).",
    )
    secret = forms.CharField(
        required=False,
        strip=False,
        max_length=500,
        label="Secret",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_secret = forms.BooleanField(required=False, label="Remove the stored signing secret")
    extra_headers = forms.CharField(
        required=False,
        max_length=MAX_JSON_CHARS,
        widget=WriteOnlyTextarea(attrs={**MONO, "rows": 3}),
        help_text=f"Write-only. A JSON object of header names to values, e.g. {HEADERS_EXAMPLE}.",
    )
    default_chat_id = forms.CharField(
        required=False,
        max_length=MAX_CHAT_ID_CHARS,
        label="Default chat",
        help_text="Where a message goes when the call names no chat (Telegram: -100123, @channel, "
        "or -100123:topic:45).",
    )
    topics = forms.CharField(
        required=False,
        max_length=MAX_JSON_CHARS,
        widget=forms.Textarea(attrs={**MONO, "rows": 6}),
        help_text="Tool allow lists per chat or forum topic: calls from there may use only these tools, "
        f"e.g. {TOPICS_EXAMPLE}. A topic without an entry uses its chat's.",
    )
    agent_keys = forms.MultipleChoiceField(
        required=False,
        label="Agents",
        widget=forms.CheckboxSelectMultiple,
        help_text="The agents that may send through it; none ticked: every agent.",
    )
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args: Any, channel: Channel | None = None, agents: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.channel = channel
        self.fields["agent_keys"].choices = [(key, key) for key in agents]  # type: ignore[attr-defined]
        if channel is None:
            del self.fields["clear_secret"]
            self.fields["secret"].help_text = (
                "Webhook: the HMAC-SHA256 signing secret (optional; sent as X-Toolgate-Signature). "
                "Telegram: the bot token from BotFather. Write-only: it is never shown again."
            )
            return
        self.fields["kind"].disabled = True
        self.fields["secret"].help_text = stored_secret_help(
            "secret", stored=bool(channel.secret), hint=services.secret_hint(channel.secret)
        )
        if channel.kind == Channel.Kind.TELEGRAM:
            del self.fields["clear_secret"]
        if headers_help := stored_headers_help(channel.extra_headers):
            self.fields["extra_headers"].help_text = headers_help

    def clean_extra_headers(self) -> dict[str, Any] | None:
        text = (self.cleaned_data.get("extra_headers") or "").strip()
        return (
            parse_json_object(text, example='{"Authorization": "Bearer …"}', max_bytes=None) if text else None
        )

    def clean_topics(self) -> dict[str, Any]:
        text = (self.cleaned_data.get("topics") or "").strip()
        return parse_json_object(text, example=TOPICS_EXAMPLE, max_bytes=None)

    def values(self) -> dict[str, Any]:
        """The fields as the services take them (the secret and headers left out when blank)."""
        data = self.cleaned_data
        values: dict[str, Any] = {
            "name": data["name"],
            "url": data["url"].strip(),
            "default_chat_id": data["default_chat_id"].strip(),
            "topics": data["topics"],
            "agent_keys": list(data["agent_keys"]),
            "enabled": bool(data["enabled"]),
        }
        if self.channel is None:
            values["kind"] = data["kind"]
        if data.get("clear_secret"):
            values["secret"] = ""
        elif data.get("secret"):
            values["secret"] = data["secret"]
        if data.get("extra_headers") is not None:
            values["extra_headers"] = data["extra_headers"]
        if self.channel is not None and not values["url"]:
            del values["url"]
        return values

    @staticmethod
    def initial_for(channel: Channel) -> dict[str, Any]:
        return {
            "name": channel.name,
            "kind": channel.kind,
            "url": channel.url,
            "default_chat_id": channel.default_chat_id,
            "topics": json.dumps(channel.topics, indent=2) if channel.topics else "",
            "agent_keys": list(channel.agent_keys),
            "enabled": channel.enabled,
        }


class TestSendForm(DashboardForm):
    chat_id = forms.CharField(
        required=False, max_length=MAX_CHAT_ID_CHARS, label="Chat", help_text="Blank: the default chat."
    )


def _channel(request: DashboardRequest, id: uuid.UUID) -> Channel:
    return access_channel(actor=request.actor, id=id)


def _agents(request: DashboardRequest, channel: Channel | None) -> list[str]:
    keys = list(agent_list(tenant=request.actor.tenant).values_list("key", flat=True)[:MAX_AGENT_CHOICES])
    if channel is not None:
        keys += [k for k in channel.agent_keys if k not in keys]
    return keys


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def channel_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's channels with their kind, state, default chat and topics; changes made elsewhere
    show live."""
    channels = [
        {"channel": c, "secret_hint": services.secret_hint(c.secret), "topics": len(c.topics)}
        for c in selectors.channel_list(tenant=request.actor.tenant)[:MAX_CHANNELS]
    ]
    return render(
        request,
        "dashboard/messaging/list.html",
        {
            "channels": channels,
            "live": True,
            "live_config": {
                "topic": services.TOPIC,
                "prefix": "messaging.channel.",
                "url": reverse("dashboard:channel_edit", args=[PLACEHOLDER]),
            },
        },
    )


@dashboard_view(Role.ADMIN)
def channel_create(request: DashboardRequest) -> HttpResponse:
    """Add a channel."""
    form = ChannelForm(request.POST if request.method == "POST" else None, agents=_agents(request, None))

    def save() -> str:
        channel = services.channel_create(actor=request.actor, **form.values())
        return f"Channel {channel.name} added."

    return submit_form(request, form, save=save, back="dashboard:channels") or render(
        request, "dashboard/messaging/form.html", {"form": form, "channel": None}
    )


@dashboard_view(Role.ADMIN)
def channel_edit(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Change a channel; a blank secret or header field keeps what is stored."""
    channel = _channel(request, id)
    form = ChannelForm(
        request.POST if request.method == "POST" else None,
        channel=channel,
        agents=_agents(request, channel),
        initial=ChannelForm.initial_for(channel),
    )

    def save() -> str:
        services.channel_update(actor=request.actor, channel=channel, **form.values())
        return f"Channel {form.cleaned_data['name']} saved."

    return submit_form(request, form, save=save, back="dashboard:channels") or render(
        request, "dashboard/messaging/form.html", {"form": form, "channel": channel}
    )


@dashboard_view(Role.ADMIN)
def channel_test(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """GET: the channel and a chat to send to; POST: a test message and its result."""
    channel = _channel(request, id)
    form = TestSendForm(request.POST if request.method == "POST" else None)
    result = None
    if request.method == "POST" and form.is_valid():
        try:
            result = services.channel_test(
                actor=request.actor, channel=channel, chat_id=form.cleaned_data["chat_id"].strip()
            )
        except ServiceError as exc:
            add_service_error(form, exc)
    return render(
        request,
        "dashboard/messaging/test.html",
        {"channel": channel, "form": form, "result": result},
    )


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def channel_messages(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """What was sent through the channel, newest first, with the status, the error and the latency."""
    channel = _channel(request, id)
    rows = selectors.message_list(tenant=request.actor.tenant, channel=channel)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "dashboard/messaging/messages.html", {"channel": channel, "page": page})


@dashboard_view(Role.ADMIN)
def channel_delete(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then delete the channel (POST)."""
    channel = _channel(request, id)

    def perform() -> str:
        services.channel_delete(actor=request.actor, channel=channel)
        return f"Channel {channel.name} deleted."

    return confirm_action(
        request,
        title=f"Delete the channel {channel.name}?",
        body="Its secret and topics are deleted with it; the log of what was sent stays. Agents sending "
        "to it are told it is unknown, and its topics no longer narrow any call's tools. This cannot be "
        "undone.",
        action="Delete channel",
        back="dashboard:channels",
        perform=perform,
    )
