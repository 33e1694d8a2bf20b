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
8. A worker that dies in the middle of a run (killed, out of memory, its machine gone) never reports the
   end of its job, so django-q2 delivers the job again ``Q_RETRY`` seconds after it handed it out
   (``Q_RETRY`` > ``Q_TIMEOUT``: a job still at work is never delivered twice). The worker running a run
   holds a *lease* on it (``lease_until``, with its ``lease_token``), taken when it claims the run and
   renewed at each step (each chat request, each tool call). A job that finds the run running with an
   expired lease takes it over (a new token: the old worker, were it still alive, stops at its next
   step, changing nothing) and goes on from what is saved: the run's transcript in the session and its
   counters. The input is not added again, a tool call whose result is in the session is not run again
   (a call the approvals job ran while the run waited keeps its result on the run until the run has
   used it), and an answer already saved ends the run. A live lease means a worker has the run: the job
   does nothing. After ``MAX_TAKEOVERS`` takeovers the run fails with that reason instead.

   The lease lasts :func:`lease_seconds`: the longer of the time a step may take (what
   :func:`slice_seconds` leaves of the worker's timeout for the step under way; a worker renews its
   lease at least that often) and the gap ``Q_RETRY`` - ``Q_TIMEOUT``, and always below ``Q_RETRY``. A
   worker renews its lease no later than ``Q_TIMEOUT`` after its job was handed out (it is stopped
   then), so with the defaults (300 and 360 seconds: a 60 s lease) the job delivered again ``Q_RETRY``
   after finds the lease expired (with a gap shorter than a step, it may find the lease still live and
   leave the run: the sweep below queues it again). A job lost for good (the queue gave up, or nothing
   was there to run it) is found by :func:`recover` (every minute): a run whose lease expired
   ``Q_RETRY`` ago is queued again (or failed, after ``MAX_TAKEOVERS``), so no run stays running
   forever; so is a queued run whose job
   never reached the queue, and a waiting run whose approved call's job was lost (queued again) or
   stopped in the middle of the call (the run reads :data:`CALL_LOST`: a call is never run twice).
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django_q.tasks import async_task

from apps.context_files import selectors as context_selectors
from apps.context_files.models import NAMES
from apps.context_files.routing import BOOTSTRAP, HEARTBEAT, Place, route
from apps.llm.client import ChatResult, ProviderError, ToolCall, client_for
from apps.llm.selectors import ProviderUnavailable
from apps.policy.approval_models import ApprovalStatus, PendingApproval
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
CALL_LOST = (
    "No result: the worker running this call after its approval stopped before it reported one (killed, "
    "or its machine went down); the call may have run in part. Check its effects before calling it again."
)
# A chat request that fails for a passing reason is tried again (SPEC B §1.4: MaxRetries 2).
MAX_RETRIES = 2
RETRY_DELAYS = (1.0, 2.0)
# What a run's work changes as it goes (saved at each step).
COUNTERS = ["iterations", "tool_calls", "input_tokens", "output_tokens", "model", "updated_at"]
# How many times a run may be taken over from a worker that stopped in the middle of it.
MAX_TAKEOVERS = 3
# How many runs of each kind one sweep (:func:`recover`) queues again at most.
RECOVER_BATCH = 200


class Cancelled(Exception):
    pass


class TooLong(Exception):
    pass


class LeaseLost(Exception):
    """Another job took the run over (this worker's lease had expired): this one stops, changing nothing."""


def _worker_timeout() -> float:
    return float(settings.Q_CLUSTER.get("timeout") or 300)  # type: ignore[arg-type]


def _retry() -> float:
    return float(settings.Q_CLUSTER.get("retry") or _worker_timeout() + 60)  # type: ignore[arg-type]


def step_seconds() -> float:
    """What a worker's stretch of work leaves of its timeout for the step under way: a minute, or half
    the timeout when that is shorter."""
    return min(60.0, _worker_timeout() / 2)


def slice_seconds() -> float:
    """How long one worker may work on a run before it stops it: the worker's timeout, less a margin for
    the step under way (a step's own calls are bounded by their timeouts)."""
    return _worker_timeout() - step_seconds()


def lease_seconds() -> float:
    """How long a worker's lease on a run lasts without being renewed (see the module's docstring)."""
    return min(max(step_seconds(), _retry() - _worker_timeout()), _retry() - 1)


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


def _renew(run: Run) -> None:
    """Renew this worker's lease on the run, or stop if another job took it over."""
    renewed = (
        Run.objects.for_tenant(run.tenant)
        .filter(pk=run.pk, status=Run.Status.RUNNING, lease_token=run.lease_token)
        .update(lease_until=timezone.now() + timedelta(seconds=lease_seconds()))
    )
    if not renewed:
        raise LeaseLost


def _check(run: Run, deadline: float) -> None:
    _renew(run)
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


def _finish(run: Run, status: str, *, output: str = "", error: str = "") -> bool:
    """End the run (False: another job took it over meanwhile, and this worker changes nothing)."""
    with transaction.atomic():
        held = (
            Run.objects.for_tenant(run.tenant)
            .select_for_update()
            .filter(pk=run.pk, status=Run.Status.RUNNING, lease_token=run.lease_token)
            .exists()
        )
        if not held:
            logger.warning("run taken over by another job", extra={"run": str(run.pk)})
            return False
        run.status = status
        run.output = output
        run.error = error[:4000]
        run.finished_at = timezone.now()
        run.awaiting_approval, run.pending_calls = None, []
        run.lease_until, run.lease_token = None, None
        run.save(
            update_fields=[
                "status",
                "output",
                "error",
                "finished_at",
                "awaiting_approval",
                "pending_calls",
                "lease_until",
                "lease_token",
                *COUNTERS,
            ]
        )
        services.publish(run, "run.finished")
        from apps.runs import subagents

        subagents.finished(run)
    return True


def _locked(run_id: uuid.UUID | str, tenant_id: uuid.UUID | str) -> Run | None:
    """The run, locked for this transaction (the job names its tenant)."""
    return (
        Run.objects.dangerously_all_tenants()
        .select_for_update()
        .select_related("tenant", "agent", "session")
        .filter(pk=run_id, tenant_id=tenant_id)
        .first()
    )


def _lease(run: Run) -> list[str]:
    """A new lease on ``run`` for this worker (the fields to save)."""
    run.lease_token = uuid.uuid4()
    run.lease_until = timezone.now() + timedelta(seconds=lease_seconds())
    return ["lease_token", "lease_until"]


def _abandoned(run: Run) -> bool:
    """A running run of the built-in runner whose worker's lease expired (a run from before leases:
    unchanged for longer than a job may take and be delivered again)."""
    if run.status != Run.Status.RUNNING or run.runner != Run.Runner.BUILTIN:
        return False
    now = timezone.now()
    if run.lease_until is None:
        return run.updated_at < now - timedelta(seconds=_worker_timeout() + _retry())
    return run.lease_until < now


def _take_over(run: Run) -> Run | None:
    """Take over a run whose worker's lease expired (in the claim's transaction), or fail it after
    ``MAX_TAKEOVERS``."""
    run.takeovers += 1
    fields = ["takeovers", *_lease(run), "updated_at"]
    run.save(update_fields=fields)
    if run.takeovers > MAX_TAKEOVERS:
        _finish(
            run,
            Run.Status.FAILED,
            error=f"the run's worker stopped in the middle of it {MAX_TAKEOVERS + 1} times (killed, or its "
            "machine went down); start a new run to go on",
        )
        return None
    logger.warning("run taken over", extra={"run": str(run.pk), "takeovers": run.takeovers})
    services.publish(run, "run.started")
    return run


def _claim(run_id: uuid.UUID | str, tenant_id: uuid.UUID | str) -> tuple[Run, bool] | None:
    """Move a queued run to running (once: a second worker finds it taken), or take over a running run
    whose worker's lease expired (True)."""
    with transaction.atomic():
        run = _locked(run_id, tenant_id)
        if run is None or run.runner != Run.Runner.BUILTIN:
            return None
        if _abandoned(run):
            taken = _take_over(run)
            return None if taken is None else (taken, True)
        if run.status != Run.Status.QUEUED:
            return None
        run.status = Run.Status.RUNNING
        run.started_at = timezone.now()
        run.save(update_fields=["status", "started_at", *_lease(run), "updated_at"])
        services.publish(run, "run.started")
    return run, False


def _claim_waiting(run_id: uuid.UUID | str, tenant_id: uuid.UUID | str) -> tuple[Run, bool] | None:
    """Move a run that waited to running once its approval's call has a result (once), or take over a
    running run whose worker's lease expired (True)."""
    with transaction.atomic():
        run = _locked(run_id, tenant_id)
        if run is not None and _abandoned(run):
            taken = _take_over(run)
            return None if taken is None else (taken, True)
        if run is None or run.status != Run.Status.WAITING or run.awaiting_approval is None:
            return None
        result = _approval_result(run.tenant_id, run.awaiting_approval)
        calls = list(run.pending_calls)
        if result is None:
            if not (calls and "result" in calls[0]):  # no result yet (nor one the sweep gave: CALL_LOST)
                return None
        elif calls:  # the call that waited gets its result; the calls after it run next
            calls[0] = {**calls[0], "result": str(result.get("for_llm", ""))}
        run.pending_calls = calls
        run.status = Run.Status.RUNNING
        run.save(update_fields=["status", "pending_calls", *_lease(run), "updated_at"])
        services.publish(run, "run.started")
    return run, False


def execute(run_id: uuid.UUID | str, tenant_id: uuid.UUID | str) -> None:
    """Run a queued run to its end, or until it waits for an approval (the django-q2 task and the
    synchronous path both land here); a run whose worker stopped in the middle of it is taken over."""
    claimed = _claim(run_id, tenant_id)
    if claimed is None:
        return
    run, taken_over = claimed
    _work(run, mode=TAKEN_OVER if taken_over else FIRST)
    _after(run)


def resume(run_id: uuid.UUID | str, tenant_id: uuid.UUID | str) -> None:
    """Go on with a run that waited for an approval, once the approval's call has its result (a second
    job, or a run still waiting, finds nothing to do); a run whose worker stopped in the middle of it
    is taken over."""
    claimed = _claim_waiting(run_id, tenant_id)
    if claimed is None:
        return
    run, taken_over = claimed
    _work(run, mode=TAKEN_OVER if taken_over else RESUMED)
    _after(run)


def _after(run: Run) -> None:
    """A team task's run that ended gets the board's post-turn rules (one that waits gets them when it
    ends)."""
    if run.kind == Run.Kind.TEAM_TASK and run.finished:
        from apps.runs import teamwork

        teamwork.after_turn(run)


FIRST, RESUMED, TAKEN_OVER = "first", "resumed", "taken_over"


def _work(run: Run, *, mode: str) -> None:
    deadline = time.monotonic() + slice_seconds()
    try:
        actor = services.run_actor(run)
        if mode == FIRST:
            _append(actor, run, SessionMessage.Role.USER, run.input)
        elif mode == RESUMED:
            # The calls stay on the run until they have their results: a job that takes the run over
            # finds there the result of the call the approvals job ran.
            calls, run.awaiting_approval = list(run.pending_calls), None
            run.save(update_fields=["awaiting_approval", "updated_at"])
            if not _run_calls(run, actor, calls, [], deadline=deadline):
                return
            run.pending_calls = []
            run.save(update_fields=["pending_calls", "updated_at"])
        elif not _go_on(run, actor, deadline=deadline):
            return
        _turn(run, actor, deadline=deadline)
    except LeaseLost:
        logger.warning("run taken over by another job", extra={"run": str(run.pk)})
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


def _go_on(run: Run, actor: Actor, *, deadline: float) -> bool:
    """Pick up a run taken over from a worker that stopped, from what is saved: add the input if it
    never was, run the calls of the model's last answer that have no result in the session, or end the
    run with an answer already saved. True: ask the model next."""
    messages = list(
        session_selectors.source_messages(
            tenant=run.tenant, session_id=run.session_id, source=f"run:{run.pk}"
        )
    )
    if not messages:
        _append(actor, run, SessionMessage.Role.USER, run.input)
        return True
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].role == SessionMessage.Role.ASSISTANT),
        None,
    )
    if last is None:
        return True
    answer = messages[last]
    if not answer.tool_calls:
        if last == len(messages) - 1:  # the model's final answer was saved: the run ends with it
            _check(run, deadline)
            _finish(run, Run.Status.COMPLETED, output=answer.content)
            return False
        return True
    answered = {m.tool_call_id for m in messages[last + 1 :] if m.role == SessionMessage.Role.TOOL}
    decided = {str(c.get("id")): c for c in run.pending_calls or [] if isinstance(c, dict) and "result" in c}
    calls: list[dict[str, Any]] = []
    for wire in answer.tool_calls:
        call_id = str(wire.get("id", ""))
        if (call_id[:200] or "call") in answered:
            continue
        function = wire.get("function") or {}
        call: dict[str, Any] = {
            "id": call_id,
            "name": function.get("name", ""),
            "arguments": function.get("arguments", ""),
        }
        if call_id in decided:
            call["result"] = decided[call_id]["result"]
        calls.append(call)
    if calls and not _run_calls(run, actor, calls, [], deadline=deadline):
        return False
    if run.pending_calls:
        run.pending_calls = []
        run.save(update_fields=["pending_calls", "updated_at"])
    return True


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
            if messages[-1] != {"role": "user", "content": FINAL_ITERATION, "name": "system"}:
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
        with transaction.atomic():  # the answer and the counters are saved together
            _renew(run)
            _append(
                actor,
                run,
                SessionMessage.Role.ASSISTANT,
                result.content,
                tool_calls=wire_calls,
                input_tokens=result.usage.prompt_tokens,
                output_tokens=result.usage.completion_tokens,
            )
            run.save(update_fields=COUNTERS)
        assistant: dict[str, Any] = {"role": "assistant", "content": result.content}
        if wire_calls:
            assistant["tool_calls"] = wire_calls
        messages.append(assistant)
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
    with transaction.atomic():  # the result and the count are saved together
        _renew(run)
        run.tool_calls += 1
        _append(
            actor,
            run,
            SessionMessage.Role.TOOL,
            text,
            name=str(call["name"])[:200],
            tool_call_id=str(call["id"])[:200] or "call",
        )
        run.save(update_fields=["tool_calls", "updated_at"])
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    services.publish(run, "run.progress")


def _park(run: Run, approval_id: uuid.UUID, calls: list[dict[str, Any]]) -> bool:
    """Leave the run waiting for ``approval_id`` with ``calls`` still to run; the approvals job's result
    wakes it (:func:`approval_result`). A result already there is taken at once."""
    with transaction.atomic():
        if (
            not Run.objects.for_tenant(run.tenant)
            .select_for_update()
            .filter(pk=run.pk, status=Run.Status.RUNNING, lease_token=run.lease_token)
            .exists()
        ):
            raise LeaseLost
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
    run.lease_until, run.lease_token = None, None  # no worker holds a waiting run
    run.save(
        update_fields=[
            "status",
            "awaiting_approval",
            "pending_calls",
            "lease_until",
            "lease_token",
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
            run_id=str(run.pk),
        ),
        wait=False,
    )
    if not isinstance(outcome, gateway.CallOutcome):
        return outcome
    logger.debug("run tool call", extra={"run": str(run.pk), "tool": name, "ms": time.monotonic() - started})
    return outcome.result.for_llm


def recover() -> int:
    """Queue again the work of runs whose job was lost for good (every minute, all tenants): a running
    run of the built-in runner whose worker's lease expired ``Q_RETRY`` ago (the job delivered again
    would have taken it over by then) is queued again, to be taken over (or failed after
    ``MAX_TAKEOVERS``); a run waiting for an approval whose call has had its result for as long is
    resumed; a queued run left so long is queued again (a second job for it finds it taken). Each is
    queued at most once per ``Q_RETRY``. The call a run waits for gets its job again when its approval was
    decided that long ago and its job never took it; when its job took it and no result came within a
    job's time, that job's worker stopped: the run reads :data:`CALL_LOST` as the call's result and goes
    on. Returns how many were queued."""
    now = timezone.now()
    long_ago = now - timedelta(seconds=_retry())
    builtin = Run.objects.dangerously_all_tenants().filter(runner=Run.Runner.BUILTIN)
    running = builtin.filter(status=Run.Status.RUNNING).filter(
        Q(lease_until__lt=long_ago)
        | Q(lease_until=None, updated_at__lt=now - timedelta(seconds=_worker_timeout() + 2 * _retry()))
    )
    queued = builtin.filter(status=Run.Status.QUEUED, updated_at__lt=long_ago)
    waiting = builtin.filter(status=Run.Status.WAITING, updated_at__lt=long_ago).exclude(
        awaiting_approval=None
    )
    jobs: list[tuple[str, str, str]] = []
    for run_id, tenant_id in running.values_list("pk", "tenant_id")[:RECOVER_BATCH]:
        # Expired now, not long ago: the job queued here may take it over, and the next sweep leaves it
        # alone for another Q_RETRY.
        if builtin.filter(pk=run_id, status=Run.Status.RUNNING).update(lease_until=now):
            jobs.append(("apps.runs.tasks.execute_run", str(tenant_id), str(run_id)))
    for run_id, tenant_id in queued.values_list("pk", "tenant_id")[:RECOVER_BATCH]:
        if builtin.filter(pk=run_id, status=Run.Status.QUEUED).update(updated_at=now):
            jobs.append(("apps.runs.tasks.execute_run", str(tenant_id), str(run_id)))
    for run_id, tenant_id, approval_id in waiting.values_list("pk", "tenant_id", "awaiting_approval")[
        :RECOVER_BATCH
    ]:
        if approval_id is None:
            continue
        if _approval_result(tenant_id, approval_id) is None:
            approval = (
                PendingApproval.objects.dangerously_all_tenants()
                .filter(pk=approval_id, tenant_id=tenant_id)
                .first()
            )
            if approval is None or approval.status == ApprovalStatus.PENDING or approval.decided_at is None:
                continue  # still waiting for a person
            if approval.decided_at > long_ago:
                continue  # the approvals job may still be at work
            if approval.call_payload:  # its job never took the call: queued again (it runs it once)
                if builtin.filter(pk=run_id, status=Run.Status.WAITING).update(updated_at=now):
                    jobs.append(("apps.policy.tasks.run_approved_call", str(approval_id), str(tenant_id)))
                continue
            if approval.decided_at > now - timedelta(seconds=_worker_timeout() + _retry()):
                continue
            if not _call_lost(run_id, approval_id):
                continue
        if builtin.filter(pk=run_id, status=Run.Status.WAITING).update(updated_at=now):
            jobs.append(("apps.runs.tasks.resume_run", str(tenant_id), str(run_id)))
    for func, *args in jobs:
        logger.warning("run recovered", extra={"job": func, "job_args": args})
        async_task(func, *args, group="approvals" if func.startswith("apps.policy.") else "runs")
    return len(jobs)


def _call_lost(run_id: uuid.UUID, approval_id: uuid.UUID) -> bool:
    """The call ``run_id`` waits for was taken by a job that never reported its result: it gets
    :data:`CALL_LOST` as its result (False: the run no longer waits for it)."""
    with transaction.atomic():
        run = (
            Run.objects.dangerously_all_tenants()
            .select_for_update()
            .filter(pk=run_id, status=Run.Status.WAITING, awaiting_approval=approval_id)
            .first()
        )
        if run is None or not run.pending_calls:
            return False
        calls = list(run.pending_calls)
        calls[0] = {**calls[0], "result": CALL_LOST}
        run.pending_calls = calls
        run.save(update_fields=["pending_calls", "updated_at"])
    return True
