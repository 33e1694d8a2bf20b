"""Access to one provider inside the actor's tenant: a missing provider and another tenant's give the
same 404."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.http import Http404

from apps.llm.models import Provider

if TYPE_CHECKING:
    from apps.tenants.actors import Actor


def access_provider(*, actor: Actor, id: object) -> Provider:
    try:
        pk = uuid.UUID(str(id))
    except ValueError:
        raise Http404("No provider with this id.") from None
    provider = Provider.objects.for_tenant(actor.tenant).filter(pk=pk).first()
    if provider is None:
        raise Http404("No provider with this id.")
    return provider
