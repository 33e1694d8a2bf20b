"""Reads of policy documents and their versions, always inside one tenant: the channel-group policies,
the versions of one scope, one version by id, and the agents a version or an explanation is about.

Writes are in ``apps.policy.services`` (which reads the current document of a scope itself, under the
tenant's policy lock)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db.models import Count, Max, Min, Q
from django.db.models.functions import Now

from apps.policy.approval_models import ApprovalStatus, PendingApproval
from apps.policy.models import PolicyDocument, PolicyVersion, Scope
from apps.tenants.models import Agent, Tenant
from apps.tenants.scoping import TenantQuerySet

if TYPE_CHECKING:
    from apps.policy.services import Target


def channel_policies(*, tenant: Tenant) -> TenantQuerySet[PolicyDocument]:
    """Every channel-group policy of ``tenant``, by channel then chat."""
    rows = PolicyDocument.objects.for_tenant(tenant).filter(scope=Scope.CHANNEL)
    return rows.order_by("channel", "chat_id")


def versions_of(*, tenant: Tenant, target: Target) -> TenantQuerySet[PolicyVersion]:
    """Every version of ``target``'s policy (deletions included), unordered. An agent scope's versions
    are found by the agent's key, so that a deleted and re-created agent keeps its history."""
    return PolicyVersion.objects.for_tenant(tenant).filter(
        scope=target.scope,
        agent_key=target.agent.key if target.agent is not None else "",
        channel=target.channel,
        chat_id=target.chat_id,
    )


def latest_number(*, tenant: Tenant, target: Target) -> int:
    """The number of the scope's last version (a deletion included), 0 when it never had one: what a
    save compares with the version its editor was opened on."""
    top = versions_of(tenant=tenant, target=target).aggregate(top=Max("number"))["top"]
    return int(top or 0)


def version_get(*, tenant: Tenant, id: Any) -> PolicyVersion | None:
    """A version of ``tenant`` (None for another tenant's or a missing one)."""
    return PolicyVersion.objects.for_tenant(tenant).filter(pk=id).first()


def version_agent(*, tenant: Tenant, version: PolicyVersion) -> Agent | None:
    """The agent whose policy an agent-scope ``version`` is, found by its key; None when it no longer
    exists."""
    return Agent.objects.for_tenant(tenant).filter(key=version.agent_key).first()


def explain_agent(*, tenant: Tenant, key: str) -> Agent | None:
    """The agent an explanation is for: the one named ``key`` when it exists, else the tenant's first
    agent by key (None: the tenant has none)."""
    agents = Agent.objects.for_tenant(tenant).order_by("key")
    return (agents.filter(key=key).first() if key else None) or agents.first()


def approvals_waiting_count() -> int:
    """For the operator's metrics, across every tenant: approvals pending and not yet expired (by the
    database's clock). A count only."""
    return int(
        PendingApproval.objects.dangerously_all_tenants()
        .filter(status=ApprovalStatus.PENDING, expires_at__gt=Now())
        .count()
    )


def approvals_waiting(
    *, tenant: Tenant, requested_by: Sequence[tuple[str, str]] | None = None
) -> tuple[int, Any]:
    """How many approvals of ``tenant`` wait for a decision (pending and not yet expired, by the
    database's clock) and when the first of them expires (None when none waits); with
    ``requested_by`` ((kind, id) pairs), only those these actors' calls asked for."""
    waiting = PendingApproval.objects.for_tenant(tenant).filter(
        status=ApprovalStatus.PENDING, expires_at__gt=Now()
    )
    if requested_by is not None:
        mine = Q(pk__in=[])
        for kind, id_ in requested_by:
            mine |= Q(requested_by_kind=kind, requested_by_id=id_)
        waiting = waiting.filter(mine)
    row = waiting.aggregate(count=Count("id"), first_expiry=Min("expires_at"))
    return int(row["count"]), row["first_expiry"]
