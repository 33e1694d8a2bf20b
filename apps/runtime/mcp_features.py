"""MCP servers' resources for an agent, under the same governance as their tools (README "Resources
and prompts").

A server's resources are the agent's (acting for the call scope's user) when:

1. the server is reachable by the same grants as its tools, and the ``resources`` switch of the
   agent's grant, and of the user's when there is one, is on (:mod:`apps.mcp_grants.features`);
2. the policy allows them: they are decided as one more name of the server's tool namespace,
   ``<prefix>__{resources}`` (``mcp_pg__{resources}``), which belongs to ``group:mcp`` and
   ``group:mcp:<server>``. So denying the group, or a pattern such as ``mcp_*`` or ``mcp_pg__*``, hides
   them with the tools, and an allow list keeps them only if it names the group or such a pattern (a list
   of single tool names does not). The request's own ``tool_allow`` narrows them the same way.

Every ``resources/read`` is recorded like a tool call (``ToolCall`` with the tool ``resources/read``, the
URI and the server as arguments, the contents' size but never the contents) and published live.
Text contents are scrubbed like a tool's output; binary contents are passed on as they are, bounded by
:data:`MAX_CONTENT_BYTES` in all.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from apps.audit.models import ToolCall
from apps.audit.services import record_tool_call
from apps.mcp_grants import features, naming, subscriptions
from apps.mcp_grants.models import MCPServer, ResourceSubscription
from apps.policy import engine
from apps.policy.engine import CallScope
from apps.policy.universe import Universe
from apps.runtime.caller import caller_origin
from apps.runtime.ratelimit import check_rate_limit
from apps.tenants.actors import Actor
from apps.tenants.models import Agent
from apps.tenants.selectors import setting_secrets_for_call
from apps.toolkit.scrubber import Scrubber

MAX_CONTENT_BYTES = 8 * 1024 * 1024  # all contents of one read, decoded
MAX_URI_CHARS = 2048
MAX_NAME_CHARS = 200
MAX_PROMPT_ARGUMENTS = 64
MAX_ARGUMENT_CHARS = 64 * 1024
MAX_COMPLETIONS = 100  # what the protocol allows in one completion
READ_TOOL = "resources/read"
GET_TOOL = "prompts/get"


class FeatureRefused(Exception):
    """A read or get that is not this agent's, or that failed; ``code`` is Toolgate's error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class For:
    """Who asks, for which agent, in which call scope."""

    actor: Actor
    agent: Agent
    scope: CallScope
    tool_allow: tuple[str, ...] | None
    session_key: str = ""


def visible_servers(who: For, feature: features.Feature) -> list[MCPServer]:
    """The servers whose ``feature`` the grants and the policy give this agent, by name."""
    tenant = who.actor.tenant
    candidates = features.servers_offering(tenant, who.agent, who.scope.user_id, feature)
    if not candidates:
        return []
    by_name = {features.policy_name(server, feature): server for server in candidates}
    groups = {f"mcp:{server.name}": frozenset([name]) for name, server in by_name.items()}
    universe = Universe(names=tuple(sorted(by_name)), groups={"mcp": frozenset(by_name), **groups})
    documents = engine.load_documents(tenant, who.agent, who.scope.channel, who.scope.chat_id)
    allowed = engine.evaluate(universe, documents, who.scope, who.tool_allow)
    return sorted((by_name[name] for name in allowed), key=lambda server: server.name)


def list_resources(who: For) -> list[types.Resource]:
    """Every visible server's resources, in server order then the server's own. A server that fails is
    left out of the listing (its status says why)."""
    found: list[types.Resource] = []
    for server in visible_servers(who, "resources"):
        try:
            resources, _ = features.list_resources(server, who.scope.user_id)
        except features.FeatureError:
            continue
        found.extend(resources)
    return found


def list_resource_templates(who: For) -> list[types.ResourceTemplate]:
    found: list[types.ResourceTemplate] = []
    for server in visible_servers(who, "resources"):
        try:
            templates, _ = features.list_resource_templates(server, who.scope.user_id)
        except features.FeatureError:
            continue
        found.extend(templates)
    return found


PAGE_BUDGET_SECONDS = 8.0  # what a page gives each server to answer, connecting included


@dataclass
class Listing:
    """What the agent's servers offer it, for a page: each server asked once for all three lists, a
    server known to be in error not asked at all, and those left out with the reason."""

    resources: list[types.Resource] = field(default_factory=list)
    templates: list[types.ResourceTemplate] = field(default_factory=list)
    prompts: list[types.Prompt] = field(default_factory=list)
    unreachable: list[tuple[MCPServer, str]] = field(default_factory=list)


def page_listing(who: For, within: float = PAGE_BUDGET_SECONDS) -> Listing:
    """The resources, resource templates and prompts the agent's visible servers offer, for a page that
    must not wait long: a server whose status is ``error`` (its connection failed and is being retried)
    is left out at once, and a server that fails one list is not asked the others; each request has at
    most ``within`` seconds."""
    listing = Listing()
    offering_resources = visible_servers(who, "resources")
    offering_prompts = visible_servers(who, "prompts")
    with_resources = {server.pk for server in offering_resources}
    with_prompts = {server.pk for server in offering_prompts}
    servers = {server.pk: server for server in [*offering_resources, *offering_prompts]}
    user_id = who.scope.user_id
    for server in sorted(servers.values(), key=lambda one: one.name):
        if server.status == MCPServer.Status.ERROR:
            reason = str((server.last_health or {}).get("error") or "its connection failed")
            listing.unreachable.append((server, f"not connected: {reason}"))
            continue
        try:
            if server.pk in with_resources:
                listing.resources.extend(features.list_resources(server, user_id, within)[0])
                listing.templates.extend(features.list_resource_templates(server, user_id, within)[0])
            if server.pk in with_prompts:
                prompts, _ = features.list_prompts(server, user_id, within)
                listing.prompts.extend(_registered_prompts(server, prompts))
        except features.FeatureError as exc:
            listing.unreachable.append((server, str(exc)))
    return listing


def _template_pattern(template: str) -> re.Pattern[str]:
    """An RFC 6570 template as a pattern: ``{var}`` matches one path segment, ``{+var}`` and ``{#var}``
    anything, other operators one segment."""
    parts = re.split(r"(\{[^}]*\})", template)
    regex = ""
    for part in parts:
        if part.startswith("{") and part.endswith("}"):
            regex += ".+" if part[1:2] in ("+", "#") else "[^/?#]+"
        else:
            regex += re.escape(part)
    return re.compile(regex + r"\Z")


def _scrubbing(who: For) -> tuple[Scrubber, Callable[[str], str]]:
    """A scrubber seeded with the tenant's and agent's secrets, and what scrubs text (nothing when the
    policy turns scrubbing off)."""
    tenant = who.actor.tenant
    secrets = setting_secrets_for_call(tenant=tenant, agent=who.agent)
    scrubber = Scrubber([*secrets[0].values(), *secrets[1].values()])
    resolved = engine.resolve(tenant, who.agent, who.scope)
    return scrubber, (scrubber.scrub if resolved.scrub_credentials else _unchanged)


def _unchanged(text: str) -> str:
    return text


def _route(who: For, uri: str, *, listed_only: bool = False) -> MCPServer:
    """The one visible server that offers ``uri``: the only one there is (which then answers for the
    URI itself), or the one that lists it or a template it matches. ``listed_only``: the only one too
    must list it (a subscription to a URI no server offers would watch nothing)."""
    servers = visible_servers(who, "resources")
    if not servers:
        raise FeatureRefused("not_found", f"Resource {uri!r} not found: this agent has no MCP resources.")
    if len(servers) == 1 and not listed_only:
        return servers[0]
    owners: list[MCPServer] = []
    for server in servers:
        try:
            listed, _ = features.list_resources(server, who.scope.user_id)
        except features.FeatureError:
            continue
        if any(str(resource.uri) == uri for resource in listed):
            owners.append(server)
            continue
        try:  # a server may have resources and no templates (the method is then unknown to it)
            templates, _ = features.list_resource_templates(server, who.scope.user_id)
        except features.FeatureError:
            continue
        if any(_template_pattern(template.uri_template).match(uri) for template in templates):
            owners.append(server)
    if not owners:
        raise FeatureRefused("not_found", f"Resource {uri!r} not found on this agent's MCP servers.")
    if len(owners) > 1:
        names = ", ".join(repr(server.name) for server in owners)
        raise FeatureRefused("conflict", f"Resource {uri!r} is offered by several MCP servers: {names}.")
    return owners[0]


def _size(contents: list[Any]) -> int:
    total = 0
    for item in contents:
        text = getattr(item, "text", None)
        if text is not None:
            total += len(text.encode())
        else:  # base64: 3 bytes per 4 characters, less the padding
            blob = getattr(item, "blob", "") or ""
            total += len(blob) * 3 // 4 - (len(blob) - len(blob.rstrip("=")))
    return total


def read_resource(who: For, uri: str) -> types.ReadResourceResult:
    """``resources/read`` of ``uri`` on the one visible server that offers it, scrubbed, bounded and
    recorded; :class:`FeatureRefused` otherwise (recorded too)."""
    uri = _check_uri(uri)
    started = time.perf_counter()
    scrubber, scrub = _scrubbing(who)
    server: MCPServer | None = None

    def record(*, error: str, decision: str, size: int) -> None:
        args = {"uri": scrub(uri)[:MAX_URI_CHARS]}
        _record(who, READ_TOOL, args, server, "resources", started, error=error, decision=decision, size=size)

    with _recorded(record, scrub):
        _rate_limit(who)
        server = _route(who, uri)
        for secret in features.secrets(server, who.scope.user_id):
            scrubber.register(secret)
        result = features.read_resource(server, who.scope.user_id, uri)
        size = _bounded(f"Resource {uri!r}", server, _size(list(result.contents)))
        contents: list[types.TextResourceContents | types.BlobResourceContents] = []
        for item in result.contents:
            if isinstance(item, types.TextResourceContents):
                contents.append(item.model_copy(update={"text": scrub(item.text)}))
            else:
                contents.append(item)
    record(error="", decision=ToolCall.Decision.ALLOWED, size=size)
    return types.ReadResourceResult(contents=contents)


def _bounded(what: str, server: MCPServer, size: int) -> int:
    """``size``, or :class:`FeatureRefused` when it is over :data:`MAX_CONTENT_BYTES`."""
    if size > MAX_CONTENT_BYTES:
        raise FeatureRefused(
            "too_large",
            f"{what} of MCP server {server.name!r} is {size} bytes: more than "
            f"{MAX_CONTENT_BYTES} bytes are not passed on.",
        )
    return size


@contextmanager
def _recorded(record: Callable[..., None], scrub: Callable[[str], str]) -> Iterator[None]:
    """Record a read or get that was refused or failed (its message scrubbed) and raise it as
    :class:`FeatureRefused`; one that succeeds is recorded by its caller, with its size."""
    try:
        yield
    except FeatureRefused as exc:
        message = scrub(str(exc))
        record(error=message, decision=_decision(exc.code), size=0)
        raise FeatureRefused(exc.code, message) from None
    except features.FeatureError as exc:
        message = scrub(str(exc))
        record(error=message, decision=ToolCall.Decision.ALLOWED, size=0)
        raise FeatureRefused("unavailable", message) from None


def _decision(code: str) -> str:
    if code == "not_found":
        return ToolCall.Decision.UNKNOWN
    if code == "invalid":
        return ToolCall.Decision.INVALID
    if code == "rate_limited":
        return ToolCall.Decision.RATE_LIMITED
    return ToolCall.Decision.ALLOWED


def _rate_limit(who: For) -> None:
    """A read or get counts against the session's calls per hour, with its tool calls (the tenant
    policy's ``rate_limit_per_hour`` per ``session_key``); over it: ``rate_limited``."""
    limited = check_rate_limit(tenant=who.actor.tenant, session_key=who.session_key)
    if limited is not None:
        raise FeatureRefused("rate_limited", limited)


def _record(
    who: For,
    tool: str,
    args: dict[str, Any],
    server: MCPServer | None,
    feature: features.Feature,
    started: float,
    *,
    error: str,
    decision: str,
    size: int,
) -> None:
    if server is not None:
        args = {**args, "server": server.name}
    record_tool_call(
        actor=who.actor,
        id=uuid.uuid4(),
        agent=who.agent,
        agent_key=who.agent.key,
        tool=tool,
        resolved_tool=features.policy_name(server, feature) if server is not None else "",
        args=args,
        decision=decision,
        status=ToolCall.Status.ERROR if error else ToolCall.Status.OK,
        error=error[:2000],
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        for_llm_bytes=size,
        for_user_bytes=0,
        session_key=who.session_key[:200],
        user_id=who.scope.user_id[:200],
        channel=who.scope.channel[:100],
        chat_id=who.scope.chat_id[:200],
        origin=caller_origin(who.actor)[:20],
        provider=who.scope.provider[:100],
        subagent_depth=who.scope.subagent_depth,
    )


# --- subscriptions ---------------------------------------------------------------------------------------


def _check_uri(uri: Any) -> str:
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS or "\x00" in uri:
        raise FeatureRefused("invalid", f"uri: 1 to {MAX_URI_CHARS} characters, without NUL.")
    return uri


def subscribe(who: For, uri: Any) -> bool:
    """``resources/subscribe``: the one visible server that offers ``uri`` (as for a read) is asked to
    watch it, and this key (or user) hears its updates for this agent on ``GET /mcp/<agent>/``
    (``apps.mcp_grants.subscriptions``). Subscribing again changes nothing; True when this call made
    the subscription."""
    uri = _check_uri(uri)
    server = _route(who, uri, listed_only=True)
    user = features.credential_user(server, who.scope.user_id)
    try:
        made, _ = subscriptions.add(server, who.agent, who.actor.id, user, uri)
    except subscriptions.TooMany as exc:
        raise FeatureRefused("too_many", str(exc)) from None
    try:
        features.subscribe(server, who.scope.user_id, uri)  # the server's own, idempotent
    except features.FeatureError as exc:
        if made:
            subscriptions.remove(server, who.agent, who.actor.id, user, uri)
        raise FeatureRefused("unavailable", str(exc)) from None
    return made


def unsubscribe(who: For, uri: Any) -> None:
    """``resources/unsubscribe``: this key's (or user's) subscription of ``uri`` for this agent ends; the
    server stops watching when no one else here still subscribes. Unknown: ``not_found``."""
    uri = _check_uri(uri)
    rows = ResourceSubscription.objects.for_tenant(who.actor.tenant).filter(
        agent=who.agent, actor_id=who.actor.id, uri=uri
    )
    found = list(rows.select_related("server"))
    if not found:
        raise FeatureRefused("not_found", f"No subscription of {uri!r} for this key and agent.")
    for row in found:
        _, last = subscriptions.remove(row.server, who.agent, who.actor.id, row.credential_user, uri)
        if last:
            with suppress(features.FeatureError):  # the row is gone: updates stop anyway
                features.unsubscribe(row.server, who.scope.user_id, uri)


# --- prompts and completion ----------------------------------------------------------------------------


def list_prompts(who: For) -> list[types.Prompt]:
    """Every visible server's prompts, under their registered names (``mcp_<prefix>__<prompt>``, like the
    server's tools), in server order then the server's own. A server that fails is left out."""
    found: list[types.Prompt] = []
    for server in visible_servers(who, "prompts"):
        try:
            prompts, _ = features.list_prompts(server, who.scope.user_id)
        except features.FeatureError:
            continue
        found.extend(_registered_prompts(server, prompts))
    return found


def _registered_prompts(server: MCPServer, prompts: list[types.Prompt]) -> list[types.Prompt]:
    """``server``'s prompts under their registered names (``mcp_<prefix>__<prompt>``, like its tools)."""
    return [
        prompt.model_copy(update={"name": naming.registered_name(server, prompt.name)}) for prompt in prompts
    ]


def _prompt_target(who: For, name: str) -> tuple[MCPServer, str]:
    """The server and original name of the registered prompt ``name``: by its prefix (``mcp_<prefix>__``),
    or, for a server registered without one, by asking the visible unprefixed servers which of them
    lists a prompt of that very name (two: refused, naming both)."""
    servers = visible_servers(who, "prompts")
    found = naming.parse(name, servers)
    if found is not None:
        return found
    owners: list[MCPServer] = []
    for server in servers:
        if naming.is_prefixed(server):
            continue
        try:
            prompts, _ = features.list_prompts(server, who.scope.user_id)
        except features.FeatureError:
            continue
        if any(prompt.name == name for prompt in prompts):
            owners.append(server)
    if len(owners) > 1:
        listed = ", ".join(repr(server.name) for server in owners)
        raise FeatureRefused(
            "conflict", f"Prompt {name!r} is offered by several MCP servers without a prefix ({listed})."
        )
    if not owners:
        raise FeatureRefused("not_found", f"Prompt {name!r} not found among this agent's MCP prompts.")
    return owners[0], name


def _check_arguments(arguments: Any) -> dict[str, str]:
    if arguments is None:
        return {}
    if not isinstance(arguments, dict) or len(arguments) > MAX_PROMPT_ARGUMENTS:
        raise FeatureRefused("invalid", f"arguments: an object of at most {MAX_PROMPT_ARGUMENTS} strings.")
    for key, value in arguments.items():
        if not isinstance(key, str) or not isinstance(value, str) or len(key) > MAX_NAME_CHARS:
            raise FeatureRefused(
                "invalid", f"arguments: string values under names of at most {MAX_NAME_CHARS}."
            )
        if len(value) > MAX_ARGUMENT_CHARS or "\x00" in key + value:
            raise FeatureRefused(
                "invalid", f"arguments.{key[:50]}: at most {MAX_ARGUMENT_CHARS} characters, without NUL."
            )
    return dict(arguments)


def _scrub_block(block: Any, scrub: Callable[[str], str]) -> Any:
    """A content block with its text scrubbed (an embedded resource's too); binary data as it is."""
    if isinstance(block, types.TextContent):
        return block.model_copy(update={"text": scrub(block.text)})
    if isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.TextResourceContents):
        return block.model_copy(
            update={"resource": block.resource.model_copy(update={"text": scrub(block.resource.text)})}
        )
    return block


def _block_size(block: Any) -> int:
    if isinstance(block, types.TextContent):
        return len(block.text.encode())
    if isinstance(block, types.EmbeddedResource):
        return _size([block.resource])
    data = getattr(block, "data", None)
    return _size([types.BlobResourceContents(uri="x:", blob=data)]) if isinstance(data, str) else 0


def get_prompt(who: For, name: Any, arguments: Any) -> types.GetPromptResult:
    """``prompts/get`` of the registered prompt ``name`` on its server, scrubbed, bounded and recorded
    (``ToolCall`` with the tool ``prompts/get``); :class:`FeatureRefused` otherwise (recorded too)."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS or "\x00" in name:
        raise FeatureRefused("invalid", f"name: 1 to {MAX_NAME_CHARS} characters, without NUL.")
    started = time.perf_counter()
    scrubber, scrub = _scrubbing(who)
    server: MCPServer | None = None
    sent: dict[str, str] = {}

    def record(*, error: str, decision: str, size: int) -> None:
        args: dict[str, Any] = {"name": scrub(name), "arguments": {k: scrub(v) for k, v in sent.items()}}
        _record(who, GET_TOOL, args, server, "prompts", started, error=error, decision=decision, size=size)

    with _recorded(record, scrub):
        sent = _check_arguments(arguments)
        _rate_limit(who)
        server, original = _prompt_target(who, name)
        for secret in features.secrets(server, who.scope.user_id):
            scrubber.register(secret)
        result = features.get_prompt(server, who.scope.user_id, original, sent)
        size = _bounded(
            f"Prompt {name!r}", server, sum(_block_size(message.content) for message in result.messages)
        )
        messages = [
            message.model_copy(update={"content": _scrub_block(message.content, scrub)})
            for message in result.messages
        ]
    record(error="", decision=ToolCall.Decision.ALLOWED, size=size)
    description = scrub(result.description) if result.description else result.description
    return types.GetPromptResult(description=description, messages=messages)


def complete(
    who: For,
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: dict[str, str] | None,
) -> types.CompleteResult:
    """Completion of a prompt's or a resource template's argument, asked of the server that offers the
    prompt or the template; the values are scrubbed. Not recorded: it reads nothing but suggestions."""
    context = _check_arguments(context) if context is not None else None
    _check_arguments({argument.name: argument.value})
    _, scrub = _scrubbing(who)
    if isinstance(ref, types.PromptReference):
        server, original = _prompt_target(who, ref.name)
        sent: types.PromptReference | types.ResourceTemplateReference = ref.model_copy(
            update={"name": original}
        )
    else:
        server = _template_owner(who, ref.uri)
        sent = ref
    try:
        result = features.complete(server, who.scope.user_id, sent, argument, context)
    except features.FeatureError as exc:
        raise FeatureRefused("unavailable", scrub(str(exc))) from None
    values = [scrub(value) for value in result.completion.values[:MAX_COMPLETIONS]]
    return types.CompleteResult(
        completion=types.Completion(
            values=values, total=result.completion.total, has_more=result.completion.has_more
        )
    )


def _template_owner(who: For, template: str) -> MCPServer:
    servers = visible_servers(who, "resources")
    owners = []
    for server in servers:
        try:
            templates, _ = features.list_resource_templates(server, who.scope.user_id)
        except features.FeatureError:
            continue
        if any(t.uri_template == template for t in templates):
            owners.append(server)
    if len(owners) == 1:
        return owners[0]
    if len(owners) > 1:
        names = ", ".join(repr(server.name) for server in owners)
        raise FeatureRefused(
            "conflict", f"Resource template {template!r} is offered by several MCP servers: {names}."
        )
    raise FeatureRefused(
        "not_found", f"Resource template {template!r} not found on this agent's MCP servers."
    )
