"""Finishing a call that waits for a human's approval, from async code (the REST execute view and the
MCP endpoint), without holding a database connection while it waits, nor a thread on the MCP endpoint
(the REST view's request keeps its own idle thread: see ``ExecuteView``)."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from apps.policy import approval_services
from apps.runtime import pipeline
from apps.tenants import tracing
from apps.toolkit import gateway


async def finish_after_decision(pending: pipeline.PendingCall) -> gateway.CallOutcome:
    """Wait until ``pending``'s approval is decided or times out, then finish the call (run or refuse).

    The caller's pooled database connections go back before the wait and are taken again to finish;
    the decision is heard through the channel layer from any process (``wait_for_decision``)."""
    await sync_to_async(approval_services.release_connections)()
    with tracing.span("toolgate.approval_wait", **{"toolgate.approval_id": str(pending.approval_id)}):
        status = await approval_services.wait_for_decision(
            tenant=pending.call.actor.tenant,
            approval_id=pending.approval_id,
            timeout=approval_services.timeout_seconds(),
        )
    return await sync_to_async(pipeline.resume)(pending, status)
