"""A tenant's sandbox containers on a real Docker engine through its lifecycle: suspending the tenant
removes them, deleting it leaves none of them in the engine, and another tenant's container goes on
serving its calls either way."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from apps.accounts import services as accounts
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.sandbox.conftest import configure, containers_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("sandbox_settings")]


def with_container(tenant: Tenant) -> Any:
    """The tenant's agent ``bot`` with a session container made by one command; its member's client."""
    accounts.agent_create(actor=Actor.system(tenant), key="bot", name="Bot")
    configure(factories.key_client(factories.make_api_key(tenant, Role.OWNER)), mode="all")
    member = factories.key_client(factories.make_api_key(tenant, Role.MEMBER))
    assert run(member, f"echo ran for {tenant.slug}") == f"ran for {tenant.slug}"
    return member


def run(client: Any, command: str) -> str:
    response = client.post(
        "/api/v1/runtime/execute",
        {"agent": "bot", "tool": "exec", "args": {"command": command}, "context": {"session_key": "s-1"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["is_error"] is False, body
    return str(body["for_llm"]).splitlines()[0]


def tenant_containers(engine: Any, tenant: Tenant) -> list[Any]:
    return [c for c in containers_of(engine) if c.labels.get("toolgate.tenant") == str(tenant.pk)]


def test_suspension_removes_the_tenants_containers_and_no_other(tenant_a, tenant_b, engine):
    with_container(tenant_a)
    member_b = with_container(tenant_b)
    [kept] = tenant_containers(engine, tenant_b)
    assert len(tenant_containers(engine, tenant_a)) == 1

    out = StringIO()
    call_command("suspend_tenant", "tenant-a", stdout=out)

    assert "1 sandbox containers removed" in out.getvalue()
    assert tenant_containers(engine, tenant_a) == []
    assert [c.id for c in tenant_containers(engine, tenant_b)] == [kept.id]
    assert run(member_b, "echo still here") == "still here"
    assert [c.id for c in tenant_containers(engine, tenant_b)] == [kept.id]  # the same container served it


def test_deletion_leaves_nothing_of_the_tenant_in_the_engine(tenant_a, tenant_b, engine, tmp_path):
    with_container(tenant_a)
    member_b = with_container(tenant_b)
    [kept] = tenant_containers(engine, tenant_b)
    a_id = tenant_a.pk

    call_command("delete_tenant", "tenant-a", "--export", str(tmp_path / "export"), stdout=StringIO())

    assert not Tenant.objects.filter(pk=a_id).exists()
    left = engine.containers.list(all=True, filters={"label": f"toolgate.tenant={a_id}"})
    assert left == []  # of any run or installation
    assert [c.id for c in tenant_containers(engine, tenant_b)] == [kept.id]
    assert run(member_b, "echo after the deletion") == "after the deletion"
