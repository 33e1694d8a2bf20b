"""Tenant-isolation cases for the llm routes (merged into ``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from apps.llm.models import Provider
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case

SECRET_KEY = "sk-a-secret-provider-key-5e7d"


def make_provider(tenant: Tenant, name: str = "a-secret-provider") -> dict[str, str]:
    """A provider of ``tenant`` (saved directly: its base URL is never contacted by these tests)."""
    provider = Provider.objects.create(
        tenant=tenant,
        name=name,
        base_url="https://a-secret-llm.invalid/v1",
        api_key=SECRET_KEY,
        chat_model="a-secret-model",
        is_default=True,
    )
    return {"pk": str(provider.pk)}


def _list(tenant: Tenant) -> dict[str, str]:
    make_provider(tenant)
    return {"name": "a-secret-provider", "host": "a-secret-llm.invalid", "key": SECRET_KEY}


CASES: dict[str, Case] = {
    "llm-provider-list": Case(make=_list, collection=True),
    "llm-provider-detail": Case(
        make=make_provider,
        writes=[("patch", {"name": "hijacked", "api_key": "sk-b"}), ("delete", None), ("post", {})],
    ),
    "llm-provider-test": Case(make=make_provider, writes=[("post", None)]),
}
