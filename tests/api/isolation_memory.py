"""Tenant-isolation cases for the routes of memory documents (merged into ``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from apps.accounts import services as tenant_services
from apps.memory import services
from apps.memory.models import EmbeddingSettings
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case


def make_memory(tenant: Tenant, prefix: str = "secret") -> dict[str, str]:
    """An agent of ``tenant`` with a global memory document and one of user alice; returns the agent's
    key and the documents' path."""
    system = Actor.system(tenant)
    agent = tenant_services.agent_create(actor=system, key=f"{prefix}-memory-agent", name="Agent")
    for user_id in ("", "alice"):
        services.document_write(
            actor=system, agent=agent, user_id=user_id, path="memory/notes.md", content=f"# {prefix} notes"
        )
    return {"key": agent.key, "path": "memory/notes.md"}


def _list(tenant: Tenant) -> dict[str, str]:
    return {"key": make_memory(tenant)["key"]}


def _embedding_settings(tenant: Tenant) -> dict[str, str]:
    """Tenant A's endpoint settings: B's answer (its own settings) must carry none of them."""
    EmbeddingSettings.objects.create(
        tenant=tenant,
        kind=EmbeddingSettings.Kind.OPENAI,
        base_url="https://a-secret-embeddings.example.com/v1",
        model="a-secret-model",
        api_key="sk-a-secret-key",
    )
    return {"host": "a-secret-embeddings.example.com", "model": "a-secret-model", "key": "sk-a-secret-key"}


CASES: dict[str, Case] = {
    "agent-memory-list": Case(make=_list),
    "agent-memory-search": Case(make=_list),
    "agent-memory-detail": Case(
        make=make_memory, writes=[("put", {"content": "hijacked"}), ("delete", None)]
    ),
    "memory-embedding-settings": Case(make=_embedding_settings, collection=True),
}
