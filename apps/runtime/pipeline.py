"""The one execution pipeline, with one entry point: :func:`call`.

The REST execute view, the MCP endpoint, the built-in runner (runs, subagents, cron, team dispatch) and
the re-run of a call whose approval was decided later all send their calls to :func:`call` (the apps
below the gateway through ``apps.toolkit.gateway``). Transports only parse and render: the origin and
scope of a call are derived from its caller here, the channel topic's and the request's tool allow lists
applied here, and the policy resolved here, once per call.

:func:`call` runs these steps, in order, and never raises for anything a tool did; a caller that names
an origin or an internal channel it may not use is refused with ``Forbidden`` before the first step:

1. resolve the agent's runtime settings and its effective tool set; translate a domain (STRAP) call;
2. unknown name -> error with a correction hint and the available names; a name outside the effective
   set -> ``tool not allowed by policy: <name>`` (listing and calling never disagree);
3. origin restrictions (the origin is the caller's, never the request's: :mod:`apps.runtime.caller`), then
   exec approvals (``apps.policy.approvals``): allow, deny, or ask a human.
   Asking stores a pending approval and hands the call back unfinished (a :class:`PendingCall`); once
   it is decided, :func:`resume` refuses it (denied, or ``approval timed out after 2m0s``) or goes on, with
   an approved package install passed to the exec tool in the context;
4. the safeguard: unconditional hard limits, even after an approval;
5. the per-session rate limit (refusals are not counted);
6. empty arguments for a tool with required parameters -> a message saying so; schema validation;
7. the tool runs with an explicit :class:`CallContext`; an exception becomes an error result;
8. both outputs are scrubbed; a :class:`ToolCall` row is written and a ``tool_call`` event published.
"""

from __future__ import annotations

import json
import logging
import shlex
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import DatabaseError

from apps.audit.models import OUTPUT_STORE_CHARS, ToolCall
from apps.audit.services import record_tool_call
from apps.mcp_grants import naming as mcp_naming
from apps.messaging.selectors import narrowed_by_topic, topic_tool_allow
from apps.policy import approval_services, approvals, engine
from apps.policy.approval_models import ApprovalStatus, PendingApproval
from apps.policy.approvals import Verdict
from apps.policy.engine import CallScope, Resolved
from apps.runtime import caller, quota_limits, quota_usage
from apps.runtime.ratelimit import check_rate_limit
from apps.secure_cli.execution import routes_credentialed
from apps.tenants import metrics, tracing
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.selectors import setting_secrets_for_call, tenant_status
from apps.toolkit import context as call_context
from apps.toolkit import providers, runtime_settings, safeguard, strap, workspace
from apps.toolkit.context import CallContext
from apps.toolkit.gateway import CallOutcome, CallRequest, Decided
from apps.toolkit.processes import SAFE_PATH, stopped_when
from apps.toolkit.registry import implementation
from apps.toolkit.results import ToolResult
from apps.toolkit.scrubber import Scrubber
from apps.toolkit.workspace import PathError, resolve_cwd, resolve_path
from apps.tools.catalog import CATALOG, canonical
from apps.tools.correction import correction

logger = logging.getLogger(__name__)
Decision = ToolCall.Decision
MAX_ERROR_CHARS = 2000


def _as_caller(actor: Actor, request: CallRequest) -> CallRequest:
    """``request`` with its effective origin, once the caller may make it (``caller.Forbidden`` else:
    a foreign origin, or an internal channel named by a key or a dashboard user)."""
    caller.check_channel(actor=actor, channel=request.channel)
    return replace(request, origin=caller.effective_origin(actor=actor, requested=request.origin))


def _tool_label(resolved: str) -> str:
    """The metrics' bounded ``tool`` label: a catalog tool's name; an MCP tool's server prefix
    (``mcp_pg`` for ``mcp_pg__query``); another external tool's name (up to a cap, then ``other``)."""
    if resolved in CATALOG:
        return resolved
    if resolved.startswith(mcp_naming.PREFIX) and mcp_naming.SEPARATOR in resolved:
        resolved = resolved.split(mcp_naming.SEPARATOR, 1)[0]
    return metrics.tool_label(resolved, builtin=False)


def _origin(request: CallRequest) -> str:
    """The effective origin of a request that went through :func:`_as_caller` (``user`` otherwise,
    which approves nothing by itself)."""
    return request.origin or "user"


def _arguments(
    name: str, schema: dict[str, Any], args: dict[str, Any], *, strip: bool
) -> tuple[str | None, dict[str, Any]]:
    """Step 6, for every tool (built-in or external): empty arguments for a tool with required
    parameters, then (an external tool's empty optional arguments dropped when ``strip``) the tool's JSON
    schema (``apps.toolkit.providers``). The error, if any, and the arguments the tool gets."""
    required = providers.required_parameters(schema)
    if not args and required:
        return providers.empty_args_message(required), args
    if strip:
        args = providers.strip_empty_optional(schema, args)
    return providers.schema_error(name, schema, args), args


def _tenant_stop(tenant_id: Any) -> Callable[[], str]:
    """The stop check of a call's programs: a reason once its tenant is suspended or deleted (a
    suspension made by any process, on any host, reaches the processes this one runs)."""

    def check() -> str:
        try:
            status = tenant_status(tenant_id)
        except DatabaseError:  # the database away for a moment: the command goes on (its timeout holds)
            return ""
        if status is None:
            return "the tenant was deleted"
        return "the tenant was suspended" if status == Tenant.Status.SUSPENDED else ""

    return check


def _run(name: str, call_id: str, function: Any, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Step 7: the tool runs; a tool's exception, or an answer that is not a result, becomes an error
    result (a tool bug must not break the agent loop). Any program it starts is stopped should the
    tenant be suspended meanwhile."""
    try:
        with stopped_when(_tenant_stop(ctx.tenant.pk)):
            result = function(ctx, args)
    except OSError as exc:
        if workspace.disk_full(exc):
            logger.error("tool %s: the workspace's disk is full", name, extra={"call_id": call_id})
            return ToolResult.error(f'tool "{name}" could not write: {workspace.DISK_FULL}')
        logger.exception("tool %s failed", name, extra={"call_id": call_id})
        return ToolResult.error(f'tool "{name}" panicked: {type(exc).__name__}: {exc}')
    except Exception as exc:
        logger.exception("tool %s failed", name, extra={"call_id": call_id})
        return ToolResult.error(f'tool "{name}" panicked: {type(exc).__name__}: {exc}')
    if not isinstance(result, ToolResult):
        return ToolResult.error(f'tool "{name}" returned no result')
    return result


def _traced_run(name: str, call_id: str, function: Any, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    with tracing.span("toolgate.tool", **{"toolgate.tool": name}) as span:
        result = _run(name, call_id, function, ctx, args)
        if result.is_error and span is not None:
            span.set_attribute("toolgate.tool_error", True)
        return result


def _safeguard(name: str, args: dict[str, Any], ctx: CallContext) -> str | None:
    """Unconditional hard limits (they hold after any approval and cannot be configured away)."""
    if name == "exec" and isinstance(args.get("command"), str):
        return safeguard.check_shell(args["command"])
    if name in {"write_file", "edit"} and isinstance(args.get("path"), str):
        try:
            target = resolve_path(args["path"], workspace=ctx.workspace)
        except PathError:
            return None  # the tool refuses the path itself, with its own message
        return safeguard.check_write(target)
    return None


NUL_MESSAGE = "arguments contain a NUL character (\\u0000), which no tool accepts; send the text without it."


def _has_nul(value: Any) -> bool:
    """Whether a NUL character is in any string (key or value) of ``value`` (iterative)."""
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            if "\x00" in current:
                return True
        elif isinstance(current, dict):
            stack.extend(current.keys())
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return False


def _run_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value) if value else None
    except ValueError:
        return None


def _storable(text: str) -> str:
    """``text`` as PostgreSQL can store it: NUL characters become U+FFFD."""
    return text.replace("\x00", "\ufffd")


def _scrub_args(value: Any, scrub: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {str(k): _scrub_args(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_args(v, scrub) for v in value]
    return value


def _scrub_block(block: Any, scrub: Any) -> Any:
    """A content block of a result (``apps.mcp_grants.bridge.to_result``'s form) with its text scrubbed:
    a text block's, an embedded resource's, a resource link's name and description."""
    if not isinstance(block, dict):
        return block
    fields = {"text": ("text",), "resource": ("text", "uri"), "resource_link": ("name", "description", "uri")}
    changed = dict(block)
    for key in fields.get(str(block.get("type")), ()):
        if isinstance(changed.get(key), str):
            changed[key] = scrub(changed[key])
    return changed


class _Call:
    """One call on its way through the pipeline: what every step after the first needs."""

    def __init__(self, *, actor: Actor, request: CallRequest, call_id: str | None = None) -> None:
        self.started = time.perf_counter()
        self.call_id = call_id or uuid.uuid4().hex
        self.actor = actor
        self.request = request
        tenant = actor.tenant
        # The tenant's and agent's setting secrets (web search key): given to the tools that read them,
        # and registered below so that no tool's output shows them.
        secrets = setting_secrets_for_call(tenant=tenant, agent=request.agent)
        self.settings = runtime_settings.effective(tenant.settings, request.agent.settings, secrets=secrets)
        self.policy = engine.resolve(
            tenant,
            request.agent,
            CallScope(
                provider=request.provider,
                user_id=request.user_id,
                channel=request.channel,
                chat_id=request.chat_id,
                subagent_depth=request.subagent_depth,
            ),
        )
        # The final list: the policy's, ∩ the channel topic's allow list (``groupToolAllow``) when the
        # call's channel and chat have one, ∩ the request's own. Every transport gets it from here.
        topic = topic_tool_allow(tenant, request.channel, request.chat_id)
        self.allowed = (
            self.policy.allowed(request.tool_allow)
            if topic is None
            else narrowed_by_topic(self.policy, topic, request.tool_allow)
        )
        self.scrubber = Scrubber([*secrets[0].values(), *secrets[1].values()])
        self.name, self.args = request.tool, request.args
        self.resolved = ""
        self.ctx: CallContext | None = None

    def finish(self, decision: str, result: ToolResult) -> CallOutcome:
        with tracing.span("toolgate.scrub"):
            self._scrub_result(result)
        duration_ms = round((time.perf_counter() - self.started) * 1000, 3)
        metrics.tool_call(
            tool=_tool_label(self.resolved),
            decision=decision,
            error=result.is_error,
            seconds=duration_ms / 1000,
            tenant=self.actor.tenant.slug,
        )
        with tracing.span("toolgate.record"):
            _record(
                actor=self.actor,
                request=self.request,
                call_id=self.call_id,
                name=self.name,
                resolved=self.resolved,
                args=self.args,
                decision=decision,
                result=result,
                duration_ms=duration_ms,
                scrub=self.scrub,
            )
        return CallOutcome(
            call_id=self.call_id,
            result=result,
            decision=decision,
            resolved_tool=self.resolved,
            duration_ms=duration_ms,
        )

    def _scrub_result(self, result: ToolResult) -> None:
        """Step 8: both outputs scrubbed of the call's secrets (when the policy says so)."""
        if self.policy.scrub_credentials:
            result.for_llm = self.scrubber.scrub(result.for_llm)
            result.for_user = self.scrubber.scrub(result.for_user or "")
            if "structured_content" in result.data:
                result.data["structured_content"] = _scrub_args(
                    result.data["structured_content"], self.scrubber.scrub
                )
            if "content" in result.data:  # images', audio's and blobs' base64 is not text
                result.data["content"] = [
                    _scrub_block(c, self.scrubber.scrub) for c in result.data["content"]
                ]

    def scrub(self, text: str) -> str:
        return self.scrubber.scrub(text) if self.policy.scrub_credentials else text

    def front(self) -> CallOutcome | Verdict | None:
        """Steps 1-3: an outcome when the call ends here, a verdict that asks a human, or None to go on."""
        with tracing.span("toolgate.policy"):
            ended = self._policy()
        if ended is not None:
            return ended
        with tracing.span("toolgate.approval"):
            verdict = _approval(self)
        if verdict is None or verdict.decision == approvals.ALLOW:
            if verdict is not None and verdict.approved_groups:
                assert self.ctx is not None
                self.ctx = replace(self.ctx, approved_deny_groups=verdict.approved_groups)
            return None
        if verdict.decision == approvals.DENY:
            return self.finish(Decision.APPROVAL_DENIED, ToolResult.error(verdict.reason))
        return verdict

    def _policy(self) -> CallOutcome | None:
        """Steps 1-3 but the approval: names, the effective tool set and the origin restrictions; an
        outcome when the call ends here, else None (the call's context is built)."""
        request = self.request
        # 0. No tool takes a NUL character (C strings end there; PostgreSQL text cannot hold one).
        if "\x00" in self.name or _has_nul(self.args):
            return self.finish(Decision.INVALID, ToolResult.error(NUL_MESSAGE))
        # 1-2. names: domain form, aliases, unknown and denied names
        translated = strap.to_flat(self.name, self.args, allowed=self.allowed)
        if translated is not None:
            if isinstance(translated, ToolResult):
                return self.finish(Decision.INVALID, translated)
            self.name, self.args = translated
        tool_name = canonical(self.name)
        if tool_name is None and self.name in self.policy.universe.names:
            tool_name = self.name  # a tool of a provider (MCP, custom tools) this agent reaches
        if tool_name is None:
            why = providers.not_granted(self.actor.tenant, request.agent, request.user_id, self.name)
            if why is not None:  # the tenant has it, this agent was not granted it: say how to ask
                return self.finish(
                    Decision.DENIED, ToolResult.error(f"tool not allowed by policy: {self.name}: {why}.")
                )
            allowed = self.allowed
            hint = correction(self.name, allowed, strap=request.style == "strap")
            available = (
                ", ".join(strap.domain_names(allowed) if request.style == "strap" else allowed) or "none"
            )
            message = (
                f"unknown tool: {self.name}."
                + (f" {hint}" if hint else "")
                + f" Available tools: {available}."
            )
            return self.finish(Decision.UNKNOWN, ToolResult.error(message))
        self.resolved = tool_name
        if tool_name not in self.allowed:
            return self.finish(Decision.DENIED, ToolResult.error(f"tool not allowed by policy: {self.name}"))

        # 3. origin restrictions, then approvals
        origin_denied = self.policy.origin_deny.get(_origin(request), frozenset())
        if tool_name in origin_denied:
            return self.finish(
                Decision.ORIGIN_DENIED,
                ToolResult.error(f"tool {tool_name} is not allowed for calls of origin {_origin(request)!r}"),
            )
        self.ctx = _context(
            actor=self.actor,
            request=request,
            call_id=self.call_id,
            scrubber=self.scrubber,
            settings=self.settings,
            policy=self.policy,
            # What the tool itself may offer (``mcp_tool_search``): the listing's tools, so without
            # those this call's origin may not use.
            allowed=[n for n in self.allowed if n not in origin_denied] if origin_denied else self.allowed,
        )
        return None

    def back(self, approved_groups: frozenset[str] = frozenset()) -> CallOutcome:
        """Steps 4-8, for a call that passed the approval step."""
        assert self.ctx is not None
        ctx = self.ctx
        if approved_groups:
            ctx = replace(ctx, approved_deny_groups=ctx.approved_deny_groups | approved_groups)
        tool_name, args = self.resolved, self.args

        # 4. safeguard
        with tracing.span("toolgate.safeguard"):
            blocked = _safeguard(tool_name, args, ctx)
        if blocked is not None:
            return self.finish(Decision.SAFEGUARD, ToolResult.error(blocked))

        # 5. rate limits: the tenant's quota, then the session's
        with tracing.span("toolgate.rate_limit"):
            # The workspace check first: it costs nothing most of the time and takes no slot.
            over_quota = quota_usage.workspace_refusal(
                self.actor.tenant, tool_name
            ) or quota_limits.tool_call_refusal(self.actor.tenant)
            if over_quota is not None:
                return self.finish(Decision.RATE_LIMITED, ToolResult.error(over_quota))
            limited = check_rate_limit(
                tenant=self.actor.tenant,
                session_key=self.request.session_key,
                per_hour=self.policy.rate_limit_per_hour,
            )
        if limited is not None:
            return self.finish(Decision.RATE_LIMITED, ToolResult.error(limited))

        if tool_name not in CATALOG:
            return self._back_external(ctx, tool_name, args)

        # 6. arguments
        with tracing.span("toolgate.arguments"):
            invalid, args = _arguments(tool_name, CATALOG[tool_name].parameters, args, strip=False)
        if invalid is not None:
            return self.finish(Decision.INVALID, ToolResult.error(invalid))

        # 7. run
        function = implementation(tool_name)
        if function is None:
            reason = CATALOG[tool_name].unavailable_reason or "not available in this deployment"
            return self.finish(
                Decision.UNAVAILABLE, ToolResult.error(f"unavailable: {tool_name} is {reason}.")
            )
        return self.finish(Decision.ALLOWED, _traced_run(tool_name, self.call_id, function, ctx, args))

    def _back_external(self, ctx: CallContext, name: str, args: dict[str, Any]) -> CallOutcome:
        """Steps 6-7 for a tool outside the catalog (MCP, custom, …): its provider checks access again
        at call time and gives the schema the arguments are validated against, then the tool runs."""
        provider = providers.provider_for(name, self.actor.tenant)
        try:
            if provider is None:
                raise providers.ToolRefused("unknown_tool", f"{name}: no provider serves this tool.")
            tool = provider.resolve(self.actor.tenant, self.request.agent, self.request.user_id, name)
        except providers.ToolRefused as exc:
            return self.finish(Decision.DENIED, ToolResult.error(str(exc), reason=exc.reason))
        with tracing.span("toolgate.arguments"):
            invalid, args = _arguments(name, tool.schema, args, strip=True)
        if invalid is not None:
            return self.finish(Decision.INVALID, ToolResult.error(invalid))
        return self.finish(Decision.ALLOWED, _traced_run(name, self.call_id, tool.run, ctx, args))


@dataclass
class PendingCall:
    """A call that waits for a human's decision on ``approval_id``; :func:`resume` finishes it."""

    approval_id: uuid.UUID
    call_id: str
    wait: bool
    verdict: Verdict
    call: _Call = field(repr=False)


def call(
    *, actor: Actor, request: CallRequest, wait: bool = True, decided: Decided | None = None
) -> CallOutcome | PendingCall:
    """The one entry point: run ``request`` for ``actor`` through every step (module docstring).

    Steps 1-3 run first, and the rest when no human has to decide. Otherwise a pending approval is
    stored (and pushed live) and the call is handed back unfinished: :func:`resume` it once decided; a
    call that does not ``wait`` is finished later by a background job (``apps.policy.tasks``), which
    calls again with the decision (``decided``): the policy is read again then, so a tool the agent lost
    meanwhile is refused and security ``deny`` still denies.

    Raises ``Forbidden`` (nothing run, nothing recorded) when the request names an origin or a channel
    its caller may not use (:mod:`apps.runtime.caller`); a decided call is checked again against the
    actor that asked (its key's origin cannot change)."""
    with tracing.span("toolgate.call", **{"toolgate.tool_requested": request.tool[:200]}) as span:
        step = _call(actor=actor, request=request, wait=wait, decided=decided)
        if span is not None:
            _describe(span, step)
        return step


def _describe(span: Any, step: CallOutcome | PendingCall) -> None:
    """What a call's span says of its end: the decision and tool, or the approval it waits for."""
    if isinstance(step, CallOutcome):
        span.set_attributes({"toolgate.decision": step.decision, "toolgate.tool": step.resolved_tool})
    else:
        span.set_attributes(
            {"toolgate.approval_id": str(step.approval_id), "toolgate.tool": step.call.resolved}
        )


def _call(
    *, actor: Actor, request: CallRequest, wait: bool, decided: Decided | None
) -> CallOutcome | PendingCall:
    request = _as_caller(actor, request)
    if decided is not None:
        return _finish_decided(actor, request, decided)
    with tracing.span("toolgate.resolve"):
        call = _Call(actor=actor, request=request)
    step = call.front()
    if isinstance(step, CallOutcome):
        return step
    if step is None:
        return call.back()
    command = str(call.args.get("command", ""))
    approval = approval_services.approval_request(
        actor=actor,
        agent=request.agent,
        call_id=call.call_id,
        tool=call.resolved,
        command=call.scrub(command),
        cwd=str(call.args.get("cwd") or ""),
        shapes=[{**item, "command": call.scrub(item["command"])} for item in step.shapes],
        reason=step.reason,
        package_install=step.package_install,
        origin=_origin(request),
        session_key=request.session_key,
        user_id=request.user_id,
        wait=wait,
        call_payload="" if wait else json.dumps(_payload(actor, request, call)),
    )
    return PendingCall(approval_id=approval.pk, call_id=call.call_id, wait=wait, verdict=step, call=call)


def execute(*, actor: Actor, request: CallRequest) -> CallOutcome:
    """:func:`call` for synchronous callers (scripts, benchmarks): a call that needs an approval blocks
    this thread until a decision or the timeout. Never raises for a tool error."""
    step = call(actor=actor, request=request)
    if isinstance(step, CallOutcome):
        return step
    with tracing.span("toolgate.approval_wait", **{"toolgate.approval_id": str(step.approval_id)}):
        status = approval_services.wait_for_decision_sync(
            tenant=actor.tenant, approval_id=step.approval_id, timeout=approval_services.timeout_seconds()
        )
    return resume(step, status)


def resume(pending: PendingCall, status: str) -> CallOutcome:
    """Finish a call after its approval was resolved (``status``): run it when allowed, else refuse it
    (a still-pending approval is timed out first)."""
    with tracing.span("toolgate.resume", **{"toolgate.approval_status": status}) as span:
        outcome = _resume(pending, status)
        if span is not None:
            _describe(span, outcome)
        return outcome


def _resume(pending: PendingCall, status: str) -> CallOutcome:
    call = pending.call
    tenant = call.actor.tenant
    if status == ApprovalStatus.PENDING:
        if approval_services.approval_time_out(tenant=tenant, approval_id=pending.approval_id):
            status = ApprovalStatus.TIMED_OUT
        else:  # decided just now
            status = approval_services.wait_for_decision_sync(
                tenant=tenant, approval_id=pending.approval_id, timeout=0
            )
    if status == ApprovalStatus.ALLOWED:
        return call.back(pending.verdict.approved_groups)
    if status == ApprovalStatus.TIMED_OUT:
        message = approval_services.timed_out_message(approval_services.timeout_seconds())
    else:
        approval = PendingApproval.objects.for_tenant(tenant).filter(pk=pending.approval_id).first()
        message = _denied_message(approval.decision_reason if approval is not None else "")
    return call.finish(Decision.APPROVAL_DENIED, ToolResult.error(message))


def _denied_message(reason: str) -> str:
    text = "exec approval denied by an administrator"
    if reason:
        text += f": {reason}"
    return text + ". Do not retry the same command in another form; ask the user how to proceed."


def _payload(actor: Actor, request: CallRequest, call: _Call) -> dict[str, Any]:
    """What a background job needs to run the call later (stored encrypted, never returned)."""
    return {
        "call_id": call.call_id,
        "actor": {"kind": actor.kind, "id": actor.id, "role": actor.role},
        "agent": request.agent.key,
        "tool": request.tool,
        "args": request.args,
        "session_key": request.session_key,
        "user_id": request.user_id,
        "channel": request.channel,
        "chat_id": request.chat_id,
        "peer_kind": request.peer_kind,
        "provider": request.provider,
        "origin": _origin(request),
        "subagent_depth": request.subagent_depth,
        "tool_allow": list(request.tool_allow) if request.tool_allow is not None else None,
        "style": request.style,
        "run_id": request.run_id,
    }


def _finish_decided(actor: Actor, request: CallRequest, decided: Decided) -> CallOutcome:
    """A call that did not wait, once its approval was resolved: run when allowed, else refused."""
    call = _Call(actor=actor, request=request, call_id=decided.call_id)
    if decided.status != "allowed":
        call.resolved = canonical(request.tool) or ""
        if decided.status == "timed_out":
            message = approval_services.timed_out_message(approval_services.timeout_seconds())
        else:
            message = _denied_message(decided.reason)
        return call.finish(Decision.APPROVAL_DENIED, ToolResult.error(message))
    step = call.front()
    if isinstance(step, CallOutcome):
        return step
    return call.back(step.approved_groups if step is not None else frozenset())


def _approval(call: _Call) -> Verdict | None:
    """The approval step (``apps.policy.approvals``): None for tools that need none, else the verdict.

    Only ``exec`` asks. A command that is not a string is left to argument validation."""
    command = call.args.get("command")
    if call.resolved != "exec" or not isinstance(command, str) or not command.strip():
        if call.resolved == "exec" and call.policy.exec_security == "deny":
            return Verdict(
                approvals.DENY, "exec is denied by this tenant's approval settings (security: deny)"
            )
        return None
    assert call.ctx is not None
    # A credentialed CLI runs without a shell under its own checks (SPEC B §5.3), so its arguments run
    # nothing ("pip install …" quoted in a body is text): the approval looks at the program alone.
    # Allowlists and ask=always still apply to it.
    if call.policy.exec_security != "deny" and routes_credentialed(call.ctx, command):
        command = shlex.split(command)[0]
    cwd = resolve_cwd(call.ctx, call.args.get("cwd"))
    return approvals.check(
        call.policy,
        call.actor.tenant,
        call.request.agent,
        command,
        str(cwd if not isinstance(cwd, str) else call.ctx.workspace),
        _origin(call.request),
        path_env=SAFE_PATH,
    )


def _context(
    *,
    actor: Actor,
    request: CallRequest,
    call_id: str,
    scrubber: Any,
    settings: Mapping[str, Any],
    policy: Resolved,
    allowed: Sequence[str],
) -> CallContext:
    return call_context.build(
        actor=actor,
        agent=request.agent,
        call_id=call_id,
        scrubber=scrubber,
        settings=settings,
        deny_groups=policy.shell_deny_groups,
        user_id=request.user_id,
        session_key=request.session_key,
        channel=request.channel,
        chat_id=request.chat_id,
        peer_kind=request.peer_kind,
        origin=_origin(request),
        provider=request.provider,
        subagent_depth=request.subagent_depth,
        tool_allow=request.tool_allow,
        allowed=tuple(allowed),
    )


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
    scrubbed_args = _scrub_args(args, lambda text: _storable(scrub(text)))
    if _has_nul(scrubbed_args):  # a key: keys are not scrubbed
        scrubbed_args = {"_truncated": True, "keys": sorted(_storable(str(k)) for k in args)[:50]}
    if len(json.dumps(scrubbed_args, default=str)) > 64 * 1024:
        scrubbed_args = {"_truncated": True, "keys": sorted(_storable(str(k)) for k in args)[:50]}
    error = _storable(result.for_llm[:MAX_ERROR_CHARS]) if result.is_error else ""
    for_user = result.for_user or ""
    output = _storable(result.for_llm[:OUTPUT_STORE_CHARS])
    output_for_user = _storable(for_user[:OUTPUT_STORE_CHARS]) if for_user != result.for_llm else ""
    record_tool_call(
        actor=actor,
        id=uuid.UUID(call_id),
        agent=request.agent,
        agent_key=request.agent.key,
        tool=_storable(name[:200]),
        resolved_tool=_storable(resolved),
        args=scrubbed_args,
        decision=decision,
        status=ToolCall.Status.ERROR if result.is_error else ToolCall.Status.OK,
        error=error,
        duration_ms=duration_ms,
        for_llm_bytes=len(result.for_llm.encode()),
        for_user_bytes=len(for_user.encode()),
        output=output,
        output_for_user=output_for_user,
        output_truncated=len(result.for_llm) > OUTPUT_STORE_CHARS or len(for_user) > OUTPUT_STORE_CHARS,
        run_id=_run_uuid(request.run_id),
        session_key=request.session_key[:200],
        user_id=request.user_id[:200],
        channel=request.channel[:100],
        chat_id=request.chat_id[:200],
        origin=_origin(request)[:20],
        provider=request.provider[:100],
        subagent_depth=request.subagent_depth,
    )
