"""Quotas per tenant: what one tenant may take of the installation as a whole, so that a noisy neighbour
cannot starve the others.

Each quota has an installation default (``settings.TOOLGATE_QUOTA_DEFAULTS``, from
``TOOLGATE_QUOTA_<NAME>``) and may be overridden per tenant by platform staff (``set_quota``, or
``PATCH /api/v1/tenant/quota``); 0 means no limit. Limits are read from the tenant's row each time, so a
change takes effect at once in every process, without a restart.

Two kinds:

- **Rates** (``tool_calls_per_minute``, ``api_requests_per_minute``): a sliding one-minute window per tenant
  in the shared store (PostgreSQL or Redis, like the session rate limit), checked atomically, so the limit
  holds across processes and hosts. Over it: API requests answer 429 with ``Retry-After`` and the
  envelope naming the quota; a tool call gets an error result that tells the model to wait.
- **Counts** (``concurrent_runs``, ``agents``, ``mcp_servers``, ``memory_chunks``, ``workspace_bytes``):
  checked by the service that would create one more, with the tenant's row locked so that two processes
  cannot both take the last one. Over it: 409 ``quota_exceeded`` naming the quota.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from apps.tenants.errors import Conflict, ErrorCode
from apps.tenants.models import Tenant

RATES = ("tool_calls_per_minute", "api_requests_per_minute")
COUNTS = ("concurrent_runs", "agents", "mcp_servers", "workspace_bytes", "memory_chunks")
NAMES = RATES + COUNTS
MAX_VALUE = 10**15

DESCRIPTIONS = {
    "tool_calls_per_minute": "tool calls in any minute, all agents and keys together",
    "api_requests_per_minute": "REST API requests in any minute, all keys and members together",
    "concurrent_runs": "runs queued, running or waiting at once",
    "agents": "agents",
    "mcp_servers": "registered MCP servers",
    "workspace_bytes": "bytes in all of the tenant's workspaces",
    "memory_chunks": "indexed memory chunks",
}


@dataclass(frozen=True)
class Limit:
    name: str
    value: int  # 0: no limit
    default: int
    overridden: bool

    @property
    def unlimited(self) -> bool:
        return self.value == 0


def default(name: str) -> int:
    return int(settings.TOOLGATE_QUOTA_DEFAULTS[name])


def limit(tenant: Tenant, name: str) -> Limit:
    """The tenant's limit for ``name`` as its row holds it now."""
    if name not in NAMES:
        raise KeyError(name)
    overrides = tenant.quotas if isinstance(tenant.quotas, dict) else {}
    value = overrides.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return Limit(name, default(name), default(name), False)
    return Limit(name, value, default(name), True)


def fresh_limit(tenant: Tenant, name: str) -> Limit:
    """``limit`` read from the database now (a long-lived object may hold an older row)."""
    quotas = Tenant.objects.filter(pk=tenant.pk).values_list("quotas", flat=True).first()
    return limit(Tenant(pk=tenant.pk, quotas=quotas or {}), name)


def validate(name: str, value: Any) -> int | None:
    """The value to store for ``name`` (None: back to the default); raises ``ValueError`` with why."""
    if name not in NAMES:
        raise ValueError(f"unknown quota {name!r}; quotas are {', '.join(NAMES)}.")
    if value is None or value == "default":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{name}: a whole number of 0 or more (0: no limit), or 'default'.")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: a whole number of 0 or more (0: no limit), or 'default'.") from None
    if isinstance(value, float) and value != number:
        raise ValueError(f"{name}: a whole number of 0 or more (0: no limit), or 'default'.")
    if not 0 <= number <= MAX_VALUE:
        raise ValueError(f"{name}: between 0 (no limit) and {MAX_VALUE}.")
    return number


def exceeded_message(name: str, value: int, used: int | None = None) -> str:
    usage = f" ({used} in use)" if used is not None else ""
    return f"The tenant's quota {name} ({value}: {DESCRIPTIONS[name]}) is reached{usage}."


def enforce_count(*, tenant: Tenant, name: str, used: int, adding: int = 1) -> None:
    """Refuse (409 ``quota_exceeded``) when ``used + adding`` would pass the limit. Call it with the
    tenant's row locked (``lock_tenant``) and ``used`` counted after the lock, in the transaction that
    then creates: two processes cannot both take the last one."""
    current = fresh_limit(tenant, name)
    if current.unlimited or used + adding <= current.value:
        return
    raise Conflict(
        ErrorCode.QUOTA_EXCEEDED,
        exceeded_message(name, current.value, used),
        details={"quota": name, "limit": current.value, "used": used},
    )


def lock_tenant(tenant: Tenant) -> None:
    """Serialize this transaction's quota check and creation with every other of the tenant's, in any
    process (a row lock on the tenant, held to the end of the transaction)."""
    Tenant.objects.select_for_update().filter(pk=tenant.pk).values_list("pk", flat=True).first()
