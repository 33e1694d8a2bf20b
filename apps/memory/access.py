"""Access to one memory document inside the tenant: a missing document and another tenant's give the
same 404."""

from __future__ import annotations

from django.http import Http404

from apps.memory.models import MemoryDocument
from apps.memory.selectors import document_get
from apps.tenants.models import Agent, Tenant


def access_document(*, tenant: Tenant, agent: Agent, user_id: str, path: str) -> MemoryDocument:
    """The document, or 404 (missing and another tenant's look the same)."""
    document = document_get(tenant=tenant, agent=agent, user_id=user_id, path=path)
    if document is None:
        raise Http404("No memory document at this path for this user.")
    return document
