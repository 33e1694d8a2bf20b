"""The rate quotas as the runtime enforces them: tool calls (an error result telling the model to wait)
and REST API requests (429 with ``Retry-After``), each a one-minute sliding window per tenant in the
store every process shares (``apps.runtime.ratelimit.take_slots``). The limits: ``apps.tenants.quotas``.

A process takes slots a second's worth at a time (``limit // 60``, at least 1, at most 50) and hands them out
itself for at most ``CREDIT_SECONDS``: a busy tenant costs the shared store one statement per batch, not
per call. Slots are recorded in the shared window when taken, so the limit is never passed whatever the
number of processes; slots a process took and did not use lapse, so a tenant near its limit on several
processes may be refused a little early (never late). Small limits (under 120 a minute) are counted
one call at a time, exactly. A refused tenant is refused in-process until the oldest call in its
window leaves it, when the next slot can free at the earliest.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from apps.runtime.ratelimit import take_slots
from apps.tenants import quotas
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode
from apps.tenants.models import Tenant

WINDOW_SECONDS = 60.0


# Slots taken ahead are used within this time or lapse: well inside the window they were recorded in.
CREDIT_SECONDS = 10.0


@dataclass
class _Closed:
    limit: int
    until: float  # monotonic: when the window's oldest call leaves it
    confirmed: float  # monotonic: when a request last found the limit unchanged


@dataclass
class _Credit:
    slots: int
    limit: int
    until: float


_credits: dict[tuple[str, str], _Credit] = {}
# A refusal is kept in-process until the window's oldest call leaves it (no slot frees before): a tenant
# far over its quota is refused without a statement per call, which is what keeps its neighbours fast.
_closed: dict[tuple[str, str], _Closed] = {}
# How long the front gate (``refused_early``) trusts a refusal without the full path confirming it
# against the tenant's current limit: a raised quota applies within this time.
GATE_TRUST_SECONDS = 1.0
_credits_lock = threading.Lock()


# At most this many slots per statement: a high limit must not let one process hold thousands it may
# not use (they would lapse, refusing others early); 50 keeps the store's work under 1 in 50 calls.
MAX_BATCH = 50


def batch_size(limit: int) -> int:
    return max(1, min(MAX_BATCH, limit // 60))


def take_rate(tenant: Tenant, name: str) -> int | None:
    """Count one against the tenant's rate quota ``name``: None when within it, else the whole seconds
    (at least 1) to wait. The limit is read from the tenant row the caller holds (loaded with its
    request), so a change applies from the next request on, in every process."""
    current = quotas.limit(tenant, name)
    if current.unlimited:
        return None
    key = (str(tenant.pk), name)
    with _credits_lock:
        closed = _closed.get(key)
        now = time.monotonic()
        if closed is not None and closed.limit == current.value and closed.until > now:
            closed.confirmed = now
            return max(1, math.ceil(closed.until - now))
        _closed.pop(key, None)
        credit = _credits.get(key)
        usable = credit is not None and credit.limit == current.value and credit.until > time.monotonic()
        if credit is not None and usable and credit.slots > 0:
            credit.slots -= 1
            return None
        _credits.pop(key, None)
    taken, wait = take_slots(
        key=f"{tenant.pk}:quota:{name}",
        limit=current.value,
        window=WINDOW_SECONDS,
        n=batch_size(current.value),
    )
    if taken == 0:
        with _credits_lock:
            now = time.monotonic()
            _closed[key] = _Closed(current.value, now + wait, now)
        return max(1, math.ceil(wait))
    if taken > 1:
        with _credits_lock:
            _credits[key] = _Credit(taken - 1, current.value, time.monotonic() + CREDIT_SECONDS)
    return None


def refused_early(tenant_id: str, name: str) -> QuotaExceeded | None:
    """The refusal, if this process refused the tenant's ``name`` quota in the last
    ``GATE_TRUST_SECONDS`` and no slot can have freed since; else None (go the full way, which reads the
    tenant's limit and confirms or lifts the refusal). No query, no lock held long: for the front gate."""
    with _credits_lock:
        closed = _closed.get((tenant_id, name))
        now = time.monotonic()
        if closed is None or closed.until <= now or closed.confirmed + GATE_TRUST_SECONDS <= now:
            return None
        return QuotaExceeded(name, closed.limit, max(1, math.ceil(closed.until - now)))


def tool_call_refusal(tenant: Tenant) -> str | None:
    """The error a tool call gets when the tenant's ``tool_calls_per_minute`` quota is reached: what to
    do, for the model (wait, then call again), not only what happened."""
    wait = take_rate(tenant, "tool_calls_per_minute")
    if wait is None:
        return None
    limit = quotas.limit(tenant, "tool_calls_per_minute").value
    return (
        f"Tool call refused: the tenant's quota tool_calls_per_minute ({limit} calls a minute for all of its "
        f"agents) is reached. Wait {wait} s before calling a tool again; do not retry sooner."
    )


QUOTA_HEADER = "X-Toolgate-Quota"


class QuotaExceeded(exceptions.APIException):
    """429 ``quota_exceeded`` naming the quota, with ``Retry-After`` (the error handler sets it from
    ``wait``)."""

    status_code = 429
    default_code = ErrorCode.QUOTA_EXCEEDED

    def __init__(self, name: str, limit: int, wait: int) -> None:
        super().__init__(
            f"The tenant's quota {name} ({limit}: {quotas.DESCRIPTIONS[name]}) is reached; retry in {wait} s."
        )
        self.wait = wait
        self.envelope_details: dict[str, Any] = {"quota": name, "limit": limit, "retry_after": wait}
        # Which quota refused: the load balancer's quota gate (deploy/images/haproxy/haproxy.cfg) answers
        # a key refused for api_requests_per_minute itself for a moment, before any web process.
        self.response_headers = {QUOTA_HEADER: name}

    @property
    def http_headers(self) -> dict[str, str]:
        """Every header of the refusal (the REST error handler adds the same from ``wait`` and
        ``response_headers``), for answers written outside DRF: the ASGI front gate, the MCP endpoint."""
        return {"Retry-After": str(self.wait), **self.response_headers}


def api_request_refusal(tenant: Tenant) -> QuotaExceeded | None:
    """Count one request against the tenant's ``api_requests_per_minute``: the refusal once it is
    reached (REST and the MCP endpoint count alike), else None."""
    wait = take_rate(tenant, "api_requests_per_minute")
    if wait is None:
        return None
    return QuotaExceeded(
        "api_requests_per_minute", quotas.limit(tenant, "api_requests_per_minute").value, wait
    )


class TenantApiQuota(BaseThrottle):
    """The ``api_requests_per_minute`` quota of the request's tenant, for every authenticated REST request
    (API keys and dashboard sessions alike)."""

    def allow_request(self, request: Request, view: Any) -> bool:
        actor = request.auth
        if not isinstance(actor, Actor):
            return True
        refusal = api_request_refusal(actor.tenant)
        if refusal is None:
            return True
        raise refusal
