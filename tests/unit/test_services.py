"""Domain rules hold in the services themselves, whichever interface calls them."""

from __future__ import annotations

import pytest

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["not", "an", "object"], "Must be a JSON object."),
        ({"blob": "x" * 70000}, "Must be at most 65536 bytes of JSON."),
    ],
)
def test_agent_settings_rule(tenant_a, settings, message):
    with pytest.raises(ServiceError) as refused:
        services.agent_create(actor=Actor.system(tenant_a), key="s", name="S", settings=settings)
    assert refused.value.details == {"settings": [message]}
    assert not Agent.objects.for_tenant(tenant_a).exists()


def test_an_actor_cannot_mint_a_key_above_its_own_role(tenant_a):
    admin = Actor(tenant=tenant_a, role="admin", kind="system")
    with pytest.raises(ServiceError) as refused:
        services.api_key_create(actor=admin, name="escalate", role="owner")
    assert refused.value.code == "role_too_high"
    assert refused.value.status == 403


def test_agent_tool_settings_merge_into_the_tenants_key_by_key():
    from apps.toolkit.runtime_settings import effective

    tenant: dict = {
        "tools": {"exec": {"env": {"LANG": "C", "TZ": "UTC"}, "timeout_seconds": 30}},
        "sandbox": {"mode": "all"},
    }
    agent = {"tools": {"exec": {"env": {"TZ": "Europe/Paris"}}}, "sandbox": {"mode": "non-main"}}
    merged = effective(tenant, agent)
    assert merged["tools"]["exec"] == {"env": {"LANG": "C", "TZ": "Europe/Paris"}, "timeout_seconds": 30}
    assert merged["sandbox"] == {"mode": "non-main"}
    assert tenant["tools"]["exec"]["env"] == {"LANG": "C", "TZ": "UTC"}  # inputs untouched
