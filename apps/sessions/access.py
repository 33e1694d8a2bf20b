"""Access to one session inside the actor's tenant: a missing session and another tenant's give the
same 404."""

from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError

from apps.sessions.models import Session
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode, ServiceError


def access_session(*, actor: Actor, id: str | uuid.UUID) -> Session:
    """The tenant's session with this id; 404 otherwise (another tenant's included)."""
    try:
        return Session.objects.for_tenant(actor.tenant).select_related("agent", "parent").get(pk=id)
    except (Session.DoesNotExist, ValidationError, ValueError, TypeError):
        raise ServiceError(ErrorCode.NOT_FOUND, "No session with this id.", status=404) from None
