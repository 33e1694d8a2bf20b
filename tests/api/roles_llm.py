"""Role cases for the llm routes (merged into ``test_roles``): providers are administrators' only."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_llm import make_provider

PROVIDERS = "/api/v1/llm/providers/"
PROVIDER = PROVIDERS + "{llm_provider}/"


def targets(tenant: Tenant) -> dict[str, str]:
    return {"llm_provider": make_provider(tenant, "roles-provider")["pk"]}


# Base URLs under .invalid never resolve (RFC 6761): the live check answers 200 with ok false.
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", PROVIDERS, None, Role.ADMIN, 200),
    ("get", PROVIDER, None, Role.ADMIN, 200),
    ("post", PROVIDERS, {"name": "added", "base_url": "https://api.llm.invalid/v1"}, Role.ADMIN, 201),
    ("post", PROVIDERS + "{llm_provider}/test", None, Role.ADMIN, 200),
    ("patch", PROVIDER, {"timeout_seconds": 30}, Role.ADMIN, 200),
    ("delete", PROVIDER, None, Role.ADMIN, 204),
]
