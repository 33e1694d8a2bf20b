"""Deleting a tenant where the cache and the rate-limit windows live in Redis (``REDIS_URL``, as in the
multi-node topology): every key of the tenant goes, every key of another tenant stays. Keys are made as
Toolgate makes them: a session's rate-limit window by a tool call through the API, a cache entry by the
cache."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import call_command

from apps.accounts import services as accounts
from apps.policy import services as policy
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.redis_server import RedisServer, redis_server_fixture  # noqa: F401 (the session fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def keys_of(server: RedisServer, tenant_id: object) -> list[str]:
    with server.client() as client:
        return sorted(k.decode() for k in client.keys("*") if str(tenant_id) in k.decode())


def make_keys(tenant: Tenant) -> None:
    system = Actor.system(tenant)
    accounts.agent_create(actor=system, key="bot", name="Bot")
    policy.policy_save(system, policy.target("tenant"), {"rate_limit_per_hour": 50})
    client = factories.key_client(factories.make_api_key(tenant, Role.MEMBER))
    response = client.post(
        "/api/v1/runtime/execute",
        {"agent": "bot", "tool": "datetime", "args": {}, "context": {"session_key": "chat-1"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["is_error"] is False
    cache.set(f"mcp-search:{tenant.pk}:bot:x", "kept", 600)


def test_deletion_sweeps_the_tenants_redis_keys_and_no_other(settings, redis_server, tenant_a, tenant_b):
    settings.REDIS_URL = redis_server.url
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_server.url}
    }
    make_keys(tenant_a)
    make_keys(tenant_b)
    a_id = tenant_a.pk
    before_b = keys_of(redis_server, tenant_b.pk)
    assert any(k.startswith("toolgate:ratelimit:") for k in keys_of(redis_server, a_id))
    assert any("mcp-search" in k for k in keys_of(redis_server, a_id))
    assert any(k.startswith("toolgate:ratelimit:") for k in before_b)

    call_command("delete_tenant", "tenant-a", "--no-export", "--yes", stdout=StringIO())

    assert keys_of(redis_server, a_id) == []
    assert keys_of(redis_server, tenant_b.pk) == before_b
    assert cache.get(f"mcp-search:{tenant_b.pk}:bot:x") == "kept"
