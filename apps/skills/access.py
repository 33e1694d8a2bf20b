"""Access to one skill inside the tenant: a missing skill and another tenant's give the same 404."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.http import Http404

from apps.skills.models import Skill

if TYPE_CHECKING:
    from apps.tenants.models import Tenant


def access_skill(*, tenant: Tenant, id: object) -> Skill:
    """The skill, or 404 (missing and another tenant's look the same)."""
    try:
        pk = uuid.UUID(str(id))
    except ValueError:
        raise Http404("No skill with this id.") from None
    skill = Skill.objects.for_tenant(tenant).select_related("agent").filter(pk=pk).first()
    if skill is None:
        raise Http404("No skill with this id.")
    return skill
