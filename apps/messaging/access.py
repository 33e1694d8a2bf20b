"""Access to one channel inside the actor's tenant: a missing channel and another tenant's give the
same 404."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.http import Http404

from apps.messaging.models import Channel

if TYPE_CHECKING:
    from apps.tenants.actors import Actor


def access_channel(*, actor: Actor, id: object) -> Channel:
    try:
        pk = uuid.UUID(str(id))
    except ValueError:
        raise Http404("No channel with this id.") from None
    channel = Channel.objects.for_tenant(actor.tenant).filter(pk=pk).first()
    if channel is None:
        raise Http404("No channel with this id.")
    return channel
