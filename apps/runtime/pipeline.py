"""The one execution pipeline every entry point uses (REST now; MCP and team tools later).

``execute()`` runs these steps, in order, and never raises for anything a caller or a tool did:

1. resolve the agent's runtime settings and its effective tool set; translate a domain (STRAP) call;
2. unknown name -> error with a correction hint and the available names; a name outside the effective
   set -> ``tool not allowed by policy: <name>`` (listing and calling never disagree);
3. origin restrictions, then the approval hook (the policy engine plugs in here);
4. the safeguard: unconditional hard limits, even after an approval;
5. the per-session rate limit (refusals are not counted);
6. empty arguments for a tool with required parameters -> a message saying so; schema validation;
7. the tool runs with an explicit :class:`CallContext`; an exception becomes an error result;
8. both outputs are scrubbed; a :class:`ToolCall` row is written and a ``tool_call`` event published.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jsonschema

from apps.audit import context as request_context
from apps.audit.models import ToolCall
from apps.policy import engine
from apps.policy.engine import CallScope, Resolved
from apps.realtime import events
from apps.runtime import config, strap
from apps.runtime.context import CallContext
from apps.runtime.registry import implementation
from apps.runtime.results import ToolResult
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tools.catalog import CATALOG, canonical
from apps.tools.correction import correction

logger = logging.getLogger(__name__)
Decision = ToolCall.Decision
MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class CallRequest:
    """A tool call as an agent loop sends it."""

    agent: Agent
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    session_key: str = ""
    user_id: str = ""
    channel: str = ""
    chat_id: str = ""
    peer_kind: str = ""
    provider: str = ""
    origin: str = "user"
    subagent_depth: int = 0
    tool_allow: tuple[str, ...] | None = None
    style: str = "flat"  # "strap": hints are given in domain-tool form


@dataclass(frozen=True)
class CallOutcome:
    call_id: str
    result: ToolResult
    decision: str
    resolved_tool: str
    duration_ms: float


def allowed_tools(
    agent: Agent,
    *,
    tenant: Tenant,
    provider: str = "",
    user_id: str = "",
    channel: str = "",
    chat_id: str = "",
    subagent_depth: int = 0,
    tool_allow: tuple[str, ...] | None = None,
) -> list[str]:
    """The tool names this agent of ``tenant`` may use now (sorted): what listing shows and execution
    enforces (both go through ``policy.engine.resolve``)."""
    scope = CallScope(
        provider=provider, user_id=user_id, channel=channel, chat_id=chat_id, subagent_depth=subagent_depth
    )
    return engine.resolve(tenant, agent, scope).allowed(tool_allow)


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    schema = CATALOG[name].parameters
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)  # type: ignore[no-any-return]


def _schema_error(name: str, args: dict[str, Any]) -> str | None:
    errors = sorted(_validator(name).iter_errors(args), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    messages = []
    for error in errors[:5]:
        where = ".".join(str(p) for p in error.absolute_path)
        messages.append(f"{where}: {error.message}" if where else error.message)
    properties = ", ".join(CATALOG[name].parameters.get("properties", {})) or "none"
    return f"Invalid arguments for {name}: {'; '.join(messages)}. Parameters: {properties}."


def _empty_args_message(name: str) -> str | None:
    required = CATALOG[name].required_parameters
    if not required:
        return None
    return (
        f"Tool call had empty arguments (required: {', '.join(required)}). This usually means your previous "
        "response was too long and the tool call was cut off; call the tool again with its arguments."
    )


def _safeguard(name: str, args: dict[str, Any], ctx: CallContext) -> str | None:
    """Unconditional hard limits (they hold after any approval and cannot be configured away)."""
    from apps.runtime import safeguard
    from apps.runtime.workspace import PathError, resolve_path

    if name == "exec" and isinstance(args.get("command"), str):
        return safeguard.check_shell(args["command"])
    if name in {"write_file", "edit"} and isinstance(args.get("path"), str):
        try:
            target = resolve_path(args["path"], workspace=ctx.workspace)
        except PathError:
            return None  # the tool refuses the path itself, with its own message
        return safeguard.check_write(target)
    return None


def _scrub_args(value: Any, scrub: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {str(k): _scrub_args(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_args(v, scrub) for v in value]
    return value


def execute(*, actor: Actor, request: CallRequest) -> CallOutcome:
    """Run one tool call through every step (see the module docstring). Never raises for a tool error."""
    from apps.runtime.scrubber import Scrubber

    started = time.perf_counter()
    call_id = uuid.uuid4().hex
    agent = request.agent
    tenant = actor.tenant
    settings = config.effective(tenant.settings, agent.settings)
    policy = engine.resolve(
        tenant,
        agent,
        CallScope(
            provider=request.provider,
            user_id=request.user_id,
            channel=request.channel,
            chat_id=request.chat_id,
            subagent_depth=request.subagent_depth,
        ),
    )
    allowed = policy.allowed(request.tool_allow)
    scrubber = Scrubber()
    name, args = request.tool, request.args
    resolved = ""

    def finish(decision: str, result: ToolResult) -> CallOutcome:
        if policy.scrub_credentials:
            result.for_llm = scrubber.scrub(result.for_llm)
            result.for_user = scrubber.scrub(result.for_user or "")
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        _record(
            actor=actor,
            request=request,
            call_id=call_id,
            name=name,
            resolved=resolved,
            args=args,
            decision=decision,
            result=result,
            duration_ms=duration_ms,
            scrub=scrubber.scrub if policy.scrub_credentials else (lambda s: s),
        )
        return CallOutcome(
            call_id=call_id, result=result, decision=decision, resolved_tool=resolved, duration_ms=duration_ms
        )

    # 1-2. names: domain form, aliases, unknown and denied names
    translated = strap.to_flat(name, args, allowed=allowed)
    if translated is not None:
        if isinstance(translated, ToolResult):
            return finish(Decision.INVALID, translated)
        name, args = translated
    tool_name = canonical(name)
    if tool_name is None:
        hint = correction(name, allowed, strap=request.style == "strap")
        available = ", ".join(strap.domain_names(allowed) if request.style == "strap" else allowed) or "none"
        message = f"unknown tool: {name}." + (f" {hint}" if hint else "") + f" Available tools: {available}."
        return finish(Decision.UNKNOWN, ToolResult.error(message))
    resolved = tool_name
    if tool_name not in allowed:
        return finish(Decision.DENIED, ToolResult.error(f"tool not allowed by policy: {name}"))

    # 3. origin restrictions, then approvals
    if tool_name in policy.origin_deny.get(request.origin, ()):
        return finish(
            Decision.ORIGIN_DENIED,
            ToolResult.error(f"tool {tool_name} is not allowed for calls of origin {request.origin!r}"),
        )
    refusal = _approval(actor=actor, request=request, tool=tool_name, args=args, policy=policy)
    if refusal is not None:
        return finish(Decision.APPROVAL_DENIED, ToolResult.error(refusal))

    ctx = _context(
        actor=actor, request=request, call_id=call_id, scrubber=scrubber, settings=settings, policy=policy
    )

    # 4. safeguard
    blocked = _safeguard(tool_name, args, ctx)
    if blocked is not None:
        return finish(Decision.SAFEGUARD, ToolResult.error(blocked))

    # 5. rate limit
    from apps.runtime.ratelimit import check_rate_limit

    limited = check_rate_limit(
        tenant=tenant, session_key=request.session_key, per_hour=policy.rate_limit_per_hour
    )
    if limited is not None:
        return finish(Decision.RATE_LIMITED, ToolResult.error(limited))

    # 6. arguments
    if not args:
        empty = _empty_args_message(tool_name)
        if empty is not None:
            return finish(Decision.INVALID, ToolResult.error(empty))
    invalid = _schema_error(tool_name, args)
    if invalid is not None:
        return finish(Decision.INVALID, ToolResult.error(invalid))

    # 7. run
    function = implementation(tool_name)
    if function is None:
        reason = CATALOG[tool_name].unavailable_reason or "not available in this deployment"
        return finish(Decision.UNAVAILABLE, ToolResult.error(f"unavailable: {tool_name} is {reason}."))
    try:
        result = function(ctx, args)
    except Exception as exc:  # a tool bug must come back as a result, not break the agent loop
        logger.exception("tool %s failed", tool_name, extra={"call_id": call_id})
        result = ToolResult.error(f'tool "{tool_name}" panicked: {type(exc).__name__}: {exc}')
    if not isinstance(result, ToolResult):
        result = ToolResult.error(f'tool "{tool_name}" returned no result')
    return finish(Decision.ALLOWED, result)


def _approval(
    *, actor: Actor, request: CallRequest, tool: str, args: dict[str, Any], policy: Resolved
) -> str | None:
    """The approval hook: None to go on, or why the call was refused.

    With the default settings (security ``full``, ask ``off``) everything that passed the policy runs;
    the exec-approval workflow (levels, ask modes, a human's decision) replaces this function."""
    if tool == "exec" and policy.exec_security == "deny" and request.origin != "system":
        return "exec is denied by this tenant's approval settings (security: deny)"
    return None


def _context(
    *,
    actor: Actor,
    request: CallRequest,
    call_id: str,
    scrubber: Any,
    settings: Mapping[str, Any],
    policy: Resolved,
) -> CallContext:
    from apps.runtime.workspace import workspace_for

    agent = request.agent
    return CallContext(
        tenant=actor.tenant,
        agent=agent,
        actor=actor,
        call_id=call_id,
        workspace=workspace_for(tenant=actor.tenant, agent=agent, user_id=request.user_id),
        scrubber=scrubber,
        user_id=request.user_id,
        session_key=request.session_key,
        channel=request.channel,
        chat_id=request.chat_id,
        peer_kind=request.peer_kind,
        origin=request.origin,
        provider=request.provider,
        subagent_depth=request.subagent_depth,
        tool_allow=request.tool_allow,
        tool_settings=_tool_settings(settings["tools"], policy),
    )


def _tool_settings(tools: Mapping[str, Any], policy: Resolved) -> dict[str, Any]:
    """Per-tool settings as the tools read them, with the exec deny-group overrides the policy
    resolved (tenant, then agent)."""
    result = dict(tools)
    result["exec"] = {**dict(tools.get("exec") or {}), "deny_groups": dict(policy.shell_deny_groups)}
    return result


def _record(
    *,
    actor: Actor,
    request: CallRequest,
    call_id: str,
    name: str,
    resolved: str,
    args: dict[str, Any],
    decision: str,
    result: ToolResult,
    duration_ms: float,
    scrub: Any,
) -> None:
    scrubbed_args = _scrub_args(args, scrub)
    if len(json.dumps(scrubbed_args, default=str)) > 64 * 1024:
        scrubbed_args = {"_truncated": True, "keys": sorted(str(k) for k in args)[:50]}
    error = result.for_llm[:MAX_ERROR_CHARS] if result.is_error else ""
    call = ToolCall(
        id=uuid.UUID(call_id),
        tenant=actor.tenant,
        agent=request.agent,
        agent_key=request.agent.key,
        tool=name[:200],
        resolved_tool=resolved,
        args=scrubbed_args,
        decision=decision,
        status=ToolCall.Status.ERROR if result.is_error else ToolCall.Status.OK,
        error=error,
        duration_ms=duration_ms,
        for_llm_bytes=len(result.for_llm.encode()),
        for_user_bytes=len((result.for_user or "").encode()),
        session_key=request.session_key[:200],
        user_id=request.user_id[:200],
        channel=request.channel[:100],
        chat_id=request.chat_id[:200],
        origin=request.origin[:20],
        provider=request.provider[:100],
        subagent_depth=request.subagent_depth,
        actor_kind=actor.kind,
        actor_id=actor.id,
        request_id=request_context.current().request_id,
    )
    # Two autocommit statements rather than one transaction: the record must land whatever happens to
    # its live event, and a call's latency is mostly round trips to the database.
    call.save(force_insert=True)
    events.publish(tenant=actor.tenant, topic="tool_calls", type="tool_call", data=serialize(call))


def serialize(call: ToolCall) -> dict[str, Any]:
    return {
        "id": str(call.id),
        "created_at": call.created_at.isoformat() if call.created_at else None,
        "agent": call.agent_key,
        "tool": call.tool,
        "resolved_tool": call.resolved_tool,
        "args": call.args,
        "decision": call.decision,
        "status": call.status,
        "error": call.error,
        "duration_ms": call.duration_ms,
        "for_llm_bytes": call.for_llm_bytes,
        "for_user_bytes": call.for_user_bytes,
        "session_key": call.session_key,
        "user_id": call.user_id,
        "channel": call.channel,
        "origin": call.origin,
        "actor": {"kind": call.actor_kind, "id": call.actor_id},
    }
