"""An agent's MCP grants with the tools each gives after its policy (and a warning naming those the
policy removes), and its MCP resources and prompts: what its MCP servers offer it through its grants and
the policy, for the default call scope (no user). Viewers and up see the grants, resources, resource
templates and prompts; members and up read a resource or get a prompt, scrubbed, bounded and recorded
like the REST form (``apps.runtime.mcp_features``). A server that fails is left out of the listing.

The agent is found inside the tenant the page acts in: another tenant's is 404 whatever the method.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import mcp_types as types
from django import forms
from django.http import HttpResponse
from django.shortcuts import render

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.mcp_grants import selectors as mcp_selectors
from apps.policy.engine import CallScope
from apps.runtime import mcp_features
from apps.tenants.access import access_agent
from apps.tenants.models import Agent
from apps.tenants.roles import Role

ARGUMENT_PREFIX = "arg."
# Images shown inline (as a data URL); other binary contents are only described.
INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_INLINE_IMAGE_BYTES = 1024 * 1024
MAX_GRANTS = 200


class ReadForm(forms.Form):
    uri = forms.CharField(max_length=mcp_features.MAX_URI_CHARS, label="URI")


class PromptForm(forms.Form):
    name = forms.CharField(max_length=mcp_features.MAX_NAME_CHARS, label="Prompt")


def _who(request: DashboardRequest, agent: Agent) -> mcp_features.For:
    return mcp_features.For(actor=request.actor, agent=agent, scope=CallScope(), tool_allow=None)


def _arguments(request: DashboardRequest) -> dict[str, str]:
    """The prompt's arguments from the form (``arg.<name>`` fields); blank ones are left out, so the
    server's defaults apply. Their number and sizes are checked by ``get_prompt``."""
    found: dict[str, str] = {}
    for key in request.POST:
        if key.startswith(ARGUMENT_PREFIX) and len(found) <= mcp_features.MAX_PROMPT_ARGUMENTS:
            value = request.POST.get(key, "")
            if value != "":
                found[key[len(ARGUMENT_PREFIX) :]] = value
    return found


def _blob_size(blob: str) -> int:
    try:
        return len(base64.b64decode(blob, validate=True))
    except (binascii.Error, ValueError):
        return 0


def _content_row(item: Any) -> dict[str, Any]:
    """A resource's content as the page shows it: text, or a binary's size and type (an image inline)."""
    mime = getattr(item, "mime_type", None) or ""
    if isinstance(item, types.TextResourceContents):
        return {"uri": item.uri, "mime": mime, "text": item.text}
    blob = getattr(item, "blob", "") or ""
    size = _blob_size(blob)
    image = f"data:{mime};base64,{blob}" if mime in INLINE_IMAGES and size <= MAX_INLINE_IMAGE_BYTES else ""
    return {"uri": item.uri, "mime": mime or "unknown type", "binary": size, "image": image}


def _block_row(block: Any) -> dict[str, Any]:
    """A prompt message's content: its text, or the kind of content it is."""
    if isinstance(block, types.TextContent):
        return {"text": block.text}
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return {"text": resource.text, "kind": f"embedded resource {resource.uri}"}
        return {"kind": f"embedded resource {resource.uri} (binary)"}
    kind = str(getattr(block, "type", "") or type(block).__name__)
    mime = getattr(block, "mime_type", None)
    return {"kind": f"{kind} ({mime})" if mime else kind}


def _page(
    request: DashboardRequest,
    agent: Agent,
    *,
    read: dict[str, Any] | None = None,
    prompt: dict[str, Any] | None = None,
    status: int = 200,
) -> HttpResponse:
    who = _who(request, agent)
    listing = mcp_features.page_listing(who)
    prompts = []
    for item in listing.prompts:
        arguments = list(item.arguments or [])[: mcp_features.MAX_PROMPT_ARGUMENTS]
        prompts.append({"prompt": item, "arguments": arguments})
    tenant = request.actor.tenant
    grants = list(mcp_selectors.agent_grants_of(tenant=tenant, agent_id=agent.pk)[:MAX_GRANTS])
    effects = mcp_selectors.grant_effects(tenant=tenant, grants=grants)
    for grant in grants:
        grant.effect = effects[grant.pk]  # type: ignore[attr-defined]
    return render(
        request,
        "dashboard/agents/mcp.html",
        {
            "agent": agent,
            "grants": grants,
            "resources": listing.resources,
            "templates": [
                (template, template.uri_template.split("{", 1)[0]) for template in listing.templates
            ],
            "unreachable": listing.unreachable,
            "prompts": prompts,
            "can_use": request.actor.can(Role.MEMBER),
            "argument_prefix": ARGUMENT_PREFIX,
            "read": read,
            "prompt_result": prompt,
        },
        status=status,
    )


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def agent_mcp(request: DashboardRequest, key: str) -> HttpResponse:
    """The agent's MCP resources, resource templates and prompts."""
    agent = access_agent(actor=request.actor, key=key)
    return _page(request, agent)


@dashboard_view(Role.MEMBER, methods=("POST",))
def agent_mcp_read(request: DashboardRequest, key: str) -> HttpResponse:
    """Read one resource (recorded); its scrubbed contents, or the refusal, on the page."""
    agent = access_agent(actor=request.actor, key=key)
    form = ReadForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(str(e) for errors in form.errors.values() for e in errors)
        read = {"uri": request.POST.get("uri", "")[:200], "error": errors}
        return _page(request, agent, read=read, status=400)
    uri = form.cleaned_data["uri"]
    try:
        result = mcp_features.read_resource(_who(request, agent), uri)
    except mcp_features.FeatureRefused as exc:
        return _page(request, agent, read={"uri": uri, "error": str(exc)}, status=400)
    contents = [_content_row(item) for item in result.contents]
    return _page(request, agent, read={"uri": uri, "contents": contents})


@dashboard_view(Role.MEMBER, methods=("POST",))
def agent_mcp_prompt(request: DashboardRequest, key: str) -> HttpResponse:
    """Get one prompt with the arguments given (recorded); its scrubbed messages, or the refusal."""
    agent = access_agent(actor=request.actor, key=key)
    form = PromptForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(str(e) for errors in form.errors.values() for e in errors)
        return _page(request, agent, prompt={"name": "", "error": errors}, status=400)
    name = form.cleaned_data["name"]
    try:
        result = mcp_features.get_prompt(_who(request, agent), name, _arguments(request))
    except mcp_features.FeatureRefused as exc:
        return _page(request, agent, prompt={"name": name, "error": str(exc)}, status=400)
    messages = [{"role": message.role, **_block_row(message.content)} for message in result.messages]
    shown = {"name": name, "description": result.description or "", "messages": messages}
    return _page(request, agent, prompt=shown)
