"""Access to one sandbox container row inside the actor's tenant: a missing one and another tenant's
give the same 404."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.http import Http404

from apps.sandbox.models import SandboxContainer
from apps.sandbox.selectors import container_list

if TYPE_CHECKING:
    from apps.tenants.actors import Actor


def access_container(*, actor: Actor, id: object) -> SandboxContainer:
    try:
        pk = uuid.UUID(str(id))
    except ValueError:
        raise Http404("No sandbox container with this id.") from None
    row = container_list(tenant=actor.tenant).filter(pk=pk).first()
    if row is None:
        raise Http404("No sandbox container with this id.")
    return row
