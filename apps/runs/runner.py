"""The built-in runner: one run of an agent against its provider's chat model (OpenAI-compatible).

1. The system prompt is the agent's context files as the run's user reads them (SOUL, IDENTITY, AGENTS,
   TOOLS, USER and, while the user's first run is pending, BOOTSTRAP).
2. The messages are the session's last ``HISTORY_MESSAGES`` and the run's input (added to the session).
3. Each iteration asks the model with the tools the agent may use now (the listing of
   ``GET /api/v1/agents/<key>/tools``, narrowed to ``write_file`` in bootstrap mode: an open agent whose
   user has a pending BOOTSTRAP.md). Every tool call goes through the pipeline (policy, approvals,
   safeguards, sandbox, scrubbing, rate limit, audit) as the actor who started the run, and its result
   is added as a tool message.
4. On the last iteration (``max_iterations``, 20 for subagents) the tools are withdrawn and the model is
   told: "[System] Final iteration reached. Summarize all findings and respond to the user now. No more
   tool calls allowed." (SPEC B §1.5).
5. The run ends when the model answers without a tool call (completed), when cancelled (checked between
   steps), or on a provider error or anything unexpected (failed, with the reason). A chat request that
   fails for a passing reason (no answer in time, no connection, HTTP 408, 429 or 5xx) is tried again
   twice first (SPEC B §1.4: MaxRetries 2).
6. A tool call that needs a human's approval parks the run (``waiting``): the call and the ones after it
   are kept on the run and the worker is free. When the approval is decided (or times out), the call is
   run or refused by the approvals job (``apps.policy.tasks``), and :func:`resume` goes on from there in
   a new job, with the transcript read back from the session.
7. A stretch of work on one worker is bounded by :func:`slice_seconds` (below the worker's timeout): a
   run that reaches it fails with that reason instead of being killed in the middle of a step.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.context_files import selectors as context_selectors
from apps.context_files.models import NAMES
from apps.context_files.routing import BOOTSTRAP, HEARTBEAT, Place, route
from apps.llm.client import ChatResult, ProviderError, ToolCall, client_for
from apps.llm.selectors import ProviderUnavailable
from apps.policy.approval_models import PendingApproval
from apps.policy.engine import CallScope
from apps.runs import services
from apps.runs.models import Run
from apps.sessions import selectors as session_selectors
from apps.sessions import services as session_services
from apps.sessions.models import SessionMessage
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent
from apps.toolkit import gateway, presentation

logger = logging.getLogger(__name__)

HISTORY_MESSAGES = 50
FINAL_ITERATION = (
    "[System] Final iteration reached. Summarize all findings and respond to the user now. "
    "No more tool calls allowed."
)
BOOTSTRAP_TOOLS = ("write_file",)
NOT_RUN = "No result: this call was not run (its run ended or was cancelled first)."
# A chat request that fails for a passing reason is tried again (SPEC B §1.4: MaxRetries 2).
MAX_RETRIES = 2
RETRY_DELAYS = (1.0, 2.0)
# What a run's work changes as it goes (saved at each step).
COUNTERS = ["iterations", "tool_calls", "input_tokens", "output_tokens", "model", "updated_at"]


class Cancelled(Exception):
    pass


class TooLong(Exception):
    pass


def slice_seconds() -> float:
    """How long one worker may work on a run before it stops it: the worker's timeout, less a margin for
    the step under way (a step's own calls are bounded by their timeouts)."""
    from django.conf import settings

    timeout = float(settings.Q_CLUSTER.get("timeout") or 300)  # type: ignore[arg-type]
    return max(30.0, timeout - 60.0)


def system_prompt(run: Run) -> str:
    """The agent's identity and its context files as the run's user reads them."""
    agent, tenant, user_id = run.agent, run.tenant, run.user_id
    shared = context_selectors.agent_files(tenant=tenant, agent=agent)
    own = context_selectors.user_files(tenant=tenant, agent=agent, user_id=user_id) if user_id else {}
    parts = [f"You are {agent.name} (agent {agent.key})."]
    for name in NAMES:
        if name == HEARTBEAT:
            continue
        if name == BOOTSTRAP and not context_selectors.bootstrap_pending(
            tenant=tenant, agent=agent, user_id=user_id
        ):
            continue
        where = route(agent.type, name).read
        row = own.get(name) if where == Place.USER and name in own else shared.get(name)
        if row is not None and row.content.strip():
            parts.append(f"## {name}\n\n{row.content.strip()}")
    return "\n\n".join(parts)


def _history(run: Run) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for message in session_selectors.last_messages(session=run.session, limit=HISTORY_MESSAGES):
        entry: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.role == SessionMessage.Role.ASSISTANT and message.tool_calls:
            entry["tool_calls"] = message.tool_calls
        if message.role == SessionMessage.Role.TOOL:
            entry["tool_call_id"] = message.tool_call_id
        elif message.name and message.role == SessionMessage.Role.USER:
            entry["name"] = message.name
        messages.append(entry)
    return _paired(messages)


def _paired(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Make the tool exchanges of ``messages`` whole, as chat models require: a tool message answers a
    call of the assistant message before it (others are left out, such as those of a history cut in
    the middle of an exchange), and a call without an answer (its run was cancelled, or it still waits
    for an approval) gets one saying it was not run."""
    paired: list[dict[str, Any]] = []
    open_calls: list[str] = []

    def close() -> None:
        paired.extend({"role": "tool", "tool_call_id": call_id, "content": NOT_RUN} for call_id in open_calls)
        open_calls.clear()

    for message in messages:
        if message["role"] == SessionMessage.Role.TOOL:
            if message.get("tool_call_id") in open_calls:
                open_calls.remove(message["tool_call_id"])
                paired.append(message)
            continue
        close()
        paired.append(message)
        if message["role"] == SessionMessage.Role.ASSISTANT:
            open_calls.extend(str(call.get("id", "")) for call in message.get("tool_calls") or [])
    close()
    return paired


def _tools(run: Run, actor: Actor) -> list[dict[str, Any]]:
    """What the model is offered: the gateway's listing for the scope the run's calls have (its user,
    provider and depth; the caller's origin)."""
    definitions = gateway.tools(
        actor=actor,
        agent=run.agent,
        scope=CallScope(provider=run.provider, user_id=run.user_id, subagent_depth=run.depth),
        session_key=run.session.key,
    )
    if context_selectors.bootstrap_pending(tenant=run.tenant, agent=run.agent, user_id=run.user_id) and (
        run.agent.type == Agent.Type.OPEN
    ):
        definitions = [d for d in definitions if d["name"] in BOOTSTRAP_TOOLS]
    return presentation.render(definitions, "openai")


def _check(run: Run, deadline: float) -> None:
    run.refresh_from_db(fields=["cancel_requested"])
    if run.cancel_requested:
        raise Cancelled
    if time.monotonic() > deadline:
        raise TooLong


def _append(actor: Actor, run: Run, role: str, content: str, **extra: Any) -> None:
    session_services.message_append(
        actor=actor,
        session=run.session,
        role=role,
        content=content,
        source=f"run:{run.pk}",
        audit=False,
        **extra,
    )


def _finish(run: Run, status: str, *, output: str = "", error: str = "") -> None:
    with transaction.atomic():
        run.status = status
        run.output = output
        run.error = error[:4000]
        run.finished_at = timezone.now()
        run.awaiting_approval, run.pending_calls = None, []
        run.save(
            update_fields=[
                "status",
                "output",
                "error",
                "finished_at",
                "awaiting_approval",
                "pending_calls",
                *COUNTERS,
            ]
        )
        services.publish(run, "run.finished")
        from apps.runs import subagents

        subagents.finished(run)


def _locked(run_id: uuid.UUID | str, tenant_id: uuid.UUID | str) -> Run | None:
    """The run, locked for this transaction (the job names its tenant)."""
    return (
        Run.objects.dangerously_all_tenants()
        .select_for_update()
        .select_related("tenant", "agent", "session")
        .filter(pk=run_id, tenant_id=tenant_id)
        .first()
    )


def _claim(run_id: uuid.UUID | str, tenant_id: uuid.UUID | str) -> Run | None:
    """Move a queued run to running (once: a second worker finds it taken)."""
    with transaction.atomic():
        run = _locked(run_id, tenant_id)
        if run is None or run.status != Run.Status.QUEUED or run.runner != Run.Runner.BUILTIN:
            return None
        run.status = Run.Status.RUNNING
        run.started_at = timezone.now()
        run.save(update_fields=["status", "started_at", "updated_at"])
        services.publish(run, "run.started")
    return run


def _claim_waiting(run_id: uuid.UUID | str, tenant_id: uuid.UUID | str) -> Run | None:
    """Move a run that waited to running once its approval's call has a result (once)."""
    with transaction.atomic():
        run = _locked(run_id, tenant_id)
        if run is None or run.status != Run.Status.WAITING or run.awaiting_approval is None:
            return None
        result = _approval_result(run.tenant_id, run.awaiting_approval)
        if result is None:
            return None
        calls = list(run.pending_calls)
        if calls:  # the call that waited gets its result; the calls after it run next
            calls[0] = {**calls[0], "result": str(result.get("for_llm", ""))}
        run.pending_calls = calls
        run.status = Run.Status.RUNNING
        run.save(update_fields=["status", "pending_calls", "updated_at"])
        services.publish(run, "run.started")
    return run


def execute(run_id: uuid.UUID | str, tenant_id: uuid.UUID | str) -> None:
    """Run a queued run to its end, or until it waits for an approval (the django-q2 task and the
    synchronous path both land here)."""
    run = _claim(run_id, tenant_id)
    if run is None:
        return
    _work(run, first=True)


def resume(run_id: uuid.UUID | str, tenant_id: uuid.UUID | str) -> None:
    """Go on with a run that waited for an approval, once the approval's call has its result (a second
    job, or a run still waiting, finds nothing to do)."""
    run = _claim_waiting(run_id, tenant_id)
    if run is None:
        return
    _work(run, first=False)
    if run.kind == Run.Kind.TEAM_TASK and run.finished:
        from apps.runs import teamwork

        teamwork.after_turn(run)


def _work(run: Run, *, first: bool) -> None:
    deadline = time.monotonic() + slice_seconds()
    try:
        actor = services.run_actor(run)
        if first:
            _append(actor, run, SessionMessage.Role.USER, run.input)
        else:
            calls, run.pending_calls, run.awaiting_approval = list(run.pending_calls), [], None
            run.save(update_fields=["pending_calls", "awaiting_approval", "updated_at"])
            if not _run_calls(run, actor, calls, [], deadline=deadline):
                return
        _turn(run, actor, deadline=deadline)
    except Cancelled:
        _finish(run, Run.Status.CANCELLED, error="cancelled")
    except TooLong:
        _finish(
            run,
            Run.Status.FAILED,
            error=f"the run worked for {slice_seconds():.0f}s without pause, the longest a worker may work "
            "on one run; start a new run to go on",
        )
    except (ProviderError, ProviderUnavailable, ServiceError) as exc:
        _finish(run, Run.Status.FAILED, error=str(exc))
    except Exception as exc:  # a run records why it failed instead of vanishing
        logger.exception("run failed", extra={"run": str(run.pk), "tenant": str(run.tenant_id)})
        _finish(run, Run.Status.FAILED, error=f"internal error: {type(exc).__name__}")


def _ask(
    run: Run, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, deadline: float
) -> ChatResult:
    """One chat request; a transient failure (no answer in time, no connection, HTTP 408, 429 or 5xx) is
    tried again up to ``MAX_RETRIES`` times, after ``RETRY_DELAYS`` (cancellation is checked between)."""
    client, model = client_for(run.tenant, "chat", run.provider or None)
    for attempt in range(MAX_RETRIES + 1):
        try:
            result = client.chat(messages, tools=tools or None, model=model)
            break
        except ProviderError as exc:
            if not exc.transient or attempt == MAX_RETRIES:
                raise
            logger.warning(
                "run provider retry", extra={"run": str(run.pk), "attempt": attempt + 1, "error": exc.message}
            )
            time.sleep(RETRY_DELAYS[attempt])
            _check(run, deadline)
    run.model = result.model[:200]
    run.input_tokens += result.usage.prompt_tokens
    run.output_tokens += result.usage.completion_tokens
    return result


def _turn(run: Run, actor: Actor, *, deadline: float) -> None:
    messages = [{"role": "system", "content": system_prompt(run)}, *_history(run)]
    while True:
        _check(run, deadline)
        run.iterations += 1
        final = run.iterations >= run.max_iterations
        tools: list[dict[str, Any]] = []
        if final:
            messages.append({"role": "user", "content": FINAL_ITERATION})
            _append(actor, run, SessionMessage.Role.USER, FINAL_ITERATION, name="system")
        else:
            tools = _tools(run, actor)
        result = _ask(run, messages, tools, deadline=deadline)
        calls = [] if final else list(result.tool_calls)
        wire_calls = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in calls
        ]
        _append(
            actor,
            run,
            SessionMessage.Role.ASSISTANT,
            result.content,
            tool_calls=wire_calls,
            input_tokens=result.usage.prompt_tokens,
            output_tokens=result.usage.completion_tokens,
        )
        assistant: dict[str, Any] = {"role": "assistant", "content": result.content}
        if wire_calls:
            assistant["tool_calls"] = wire_calls
        messages.append(assistant)
        run.save(update_fields=COUNTERS)
        services.publish(run, "run.progress")
        if not calls:
            run.refresh_from_db(fields=["cancel_requested"])
            if run.cancel_requested:  # asked for while the model answered: the run is cancelled
                raise Cancelled
            _finish(run, Run.Status.COMPLETED, output=result.content)
            return
        pending = [{"id": call.id, "name": call.name, "arguments": call.arguments} for call in calls]
        if not _run_calls(run, actor, pending, messages, deadline=deadline):
            return


def _run_calls(
    run: Run, actor: Actor, calls: list[dict[str, Any]], messages: list[dict[str, Any]], *, deadline: float
) -> bool:
    """Run ``calls`` in order, adding each result to the session and to ``messages``. False when one of
    them waits for an approval: the run is parked with it and the rest, or finished by its result."""
    for index, call in enumerate(calls):
        _check(run, deadline)
        if "result" in call:  # decided while the run waited: the approvals job ran or refused it
            _tool_result(actor, run, call, str(call["result"]), messages)
            continue
        outcome = _call_tool(run, actor, call["name"], call["arguments"])
        if not isinstance(outcome, str):
            return _park(run, outcome.approval_id, calls[index:])
        _tool_result(actor, run, call, outcome, messages)
    return True


def _tool_result(
    actor: Actor, run: Run, call: dict[str, Any], text: str, messages: list[dict[str, Any]]
) -> None:
    run.tool_calls += 1
    _append(
        actor,
        run,
        SessionMessage.Role.TOOL,
        text,
        name=str(call["name"])[:200],
        tool_call_id=str(call["id"])[:200] or "call",
    )
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    run.save(update_fields=["tool_calls", "updated_at"])
    services.publish(run, "run.progress")


def _park(run: Run, approval_id: uuid.UUID, calls: list[dict[str, Any]]) -> bool:
    """Leave the run waiting for ``approval_id`` with ``calls`` still to run; the approvals job's result
    wakes it (:func:`approval_result`). A result already there is taken at once."""
    with transaction.atomic():
        # A cancellation asked for since the last check wins: the approval is withdrawn, nothing waits.
        if (
            Run.objects.for_tenant(run.tenant)
            .select_for_update()
            .filter(pk=run.pk, cancel_requested=True)
            .exists()
        ):
            services.withdraw_approval(Actor.system(run.tenant), approval_id)
            cancelled = True
        else:
            cancelled = False
            _wait(run, approval_id, calls)
    if cancelled:
        raise Cancelled
    if _approval_result(run.tenant_id, approval_id) is not None:
        tenant_id, run_id = str(run.tenant_id), str(run.pk)
        transaction.on_commit(lambda: _queue_resume(tenant_id, run_id))
    return False


def _wait(run: Run, approval_id: uuid.UUID, calls: list[dict[str, Any]]) -> None:
    run.status = Run.Status.WAITING
    run.awaiting_approval = approval_id
    run.pending_calls = calls
    run.save(
        update_fields=[
            "status",
            "awaiting_approval",
            "pending_calls",
            *COUNTERS,
        ]
    )
    services.publish(run, "run.waiting", approval=str(approval_id), tool=str(calls[0]["name"])[:200])


def _approval_result(tenant_id: uuid.UUID | str, approval_id: uuid.UUID | str) -> dict[str, Any] | None:
    result = (
        PendingApproval.objects.dangerously_all_tenants()
        .filter(pk=approval_id, tenant_id=tenant_id)
        .values_list("result", flat=True)
        .first()
    )
    return result if isinstance(result, dict) else None


def _queue_resume(tenant_id: str, run_id: str) -> None:
    from django_q.tasks import async_task

    async_task("apps.runs.tasks.resume_run", tenant_id, run_id, group="runs")


def approval_result(*, tenant_id: uuid.UUID | str, approval_id: uuid.UUID | str) -> None:
    """The call an approval held has its result: wake the run that waits for it, if any."""
    run_id = (
        Run.objects.dangerously_all_tenants()
        .filter(tenant_id=tenant_id, awaiting_approval=approval_id, status=Run.Status.WAITING)
        .values_list("pk", flat=True)
        .first()
    )
    if run_id is not None:
        tenant, key = str(tenant_id), str(run_id)
        transaction.on_commit(lambda: _queue_resume(tenant, key))


def _call_tool(run: Run, actor: Actor, name: str, arguments: str) -> str | gateway.Pending:
    """One tool call through the pipeline; the model reads the result (or why it was refused). A call
    that needs an approval is handed back unfinished (the approvals job runs it once decided)."""
    try:
        args = ToolCall(id="", name=name, arguments=arguments).parsed_arguments()
    except ProviderError as exc:
        return f"Error: {exc}. Call the tool again with a JSON object of arguments."
    started = time.monotonic()
    outcome = gateway.call(
        actor=actor,
        request=gateway.CallRequest(
            agent=run.agent,
            tool=name,
            args=args,
            session_key=run.session.key,
            user_id=run.user_id,
            provider=run.provider,
            subagent_depth=run.depth,
        ),
        wait=False,
    )
    if not isinstance(outcome, gateway.CallOutcome):
        return outcome
    logger.debug("run tool call", extra={"run": str(run.pk), "tool": name, "ms": time.monotonic() - started})
    return outcome.result.for_llm
