"""Access to one custom tool inside the actor's tenant: a missing tool and another tenant's give the
same 404."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.http import Http404

from apps.custom_tools.models import CustomTool

if TYPE_CHECKING:
    from apps.tenants.actors import Actor


def access_custom_tool(*, actor: Actor, id: object) -> CustomTool:
    try:
        pk = uuid.UUID(str(id))
    except ValueError:
        raise Http404("No custom tool with this id.") from None
    tool = CustomTool.objects.for_tenant(actor.tenant).select_related("agent").filter(pk=pk).first()
    if tool is None:
        raise Http404("No custom tool with this id.")
    return tool
