"""Access to one pending exec approval or allow-always rule inside the actor's tenant: a missing one and
another tenant's give the same 404."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.http import Http404

from apps.policy.approval_models import ApprovalRule, PendingApproval
from apps.policy.approval_services import with_current_status

if TYPE_CHECKING:
    from apps.tenants.actors import Actor


def _uuid_or_404(value: object) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise Http404 from None


def access_approval(*, actor: Actor, id: object) -> PendingApproval:
    """The approval ``id`` of the actor's tenant (with ``current_status``: an expired one reads
    ``timed_out``); 404 for a missing one and for another tenant's."""
    approval = (
        with_current_status(PendingApproval.objects.for_tenant(actor.tenant))
        .filter(pk=_uuid_or_404(id))
        .first()
    )
    if approval is None:
        raise Http404("No approval with this id.")
    return approval


def access_rule(*, actor: Actor, id: object) -> ApprovalRule:
    """The rule ``id`` of the actor's tenant; 404 for a missing one and for another tenant's."""
    rule = (
        ApprovalRule.objects.for_tenant(actor.tenant)
        .select_related("agent")
        .filter(pk=_uuid_or_404(id))
        .first()
    )
    if rule is None:
        raise Http404("No approval rule with this id.")
    return rule
