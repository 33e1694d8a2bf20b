"""django-q2 jobs of memory. Jobs take ids, re-read through the tenant, and are idempotent."""

from __future__ import annotations

from django.db import transaction

from apps.memory.models import MemoryDocument
from apps.tenants.models import Tenant


def index_document(tenant_id: str, document_id: str) -> str:
    """Chunk and embed one document (:func:`apps.memory.indexing.index_document`); the outcome
    ("indexed", "failed", "unchanged", "gone")."""
    from apps.memory import indexing

    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return "gone"
    return indexing.index_document(tenant=tenant, document_id=document_id)


def schedule_index(document: MemoryDocument) -> None:
    """Index ``document`` in the background once the current transaction commits."""
    from django_q.tasks import async_task

    tenant_id, document_id = str(document.tenant_id), str(document.pk)
    transaction.on_commit(
        lambda: async_task("apps.memory.tasks.index_document", tenant_id, document_id, group="memory")
    )
