"""Role-matrix actions for the routes of memory documents (merged into ``test_roles.ACTIONS``). URL templates
may use the targets of ``test_roles._targets`` and of ``targets`` here."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_memory import make_memory

DOCUMENTS = "/api/v1/agents/{memory_agent}/memory/"
DOCUMENT = DOCUMENTS + "memory/notes.md"
EMBEDDING_SETTINGS = "/api/v1/memory/embedding-settings"

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", DOCUMENTS, None, Role.VIEWER, 200),
    ("get", "/api/v1/agents/{memory_agent}/memory-search?q=notes", None, Role.VIEWER, 200),
    ("get", DOCUMENTS + "?user_id=alice&path=memory/", None, Role.VIEWER, 200),
    ("get", DOCUMENT, None, Role.VIEWER, 200),
    ("get", DOCUMENT + "?user_id=alice", None, Role.VIEWER, 200),
    ("put", DOCUMENT, {"content": "# replaced"}, Role.ADMIN, 200),
    ("put", DOCUMENTS + "MEMORY.md?user_id=bob", {"content": "new"}, Role.ADMIN, 201),
    ("delete", DOCUMENT + "?user_id=alice", None, Role.ADMIN, 204),
    ("get", EMBEDDING_SETTINGS, None, Role.ADMIN, 200),
    ("put", EMBEDDING_SETTINGS, {"kind": "local"}, Role.ADMIN, 200),
]


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test)."""
    return {"memory_agent": make_memory(tenant, "roles")["key"]}
