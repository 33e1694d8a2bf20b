"""The tenant-scoped manager refuses queries that are not narrowed to one tenant."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.tenants.api.base import TenantScopedViewSet
from apps.tenants.models import Agent, ApiKey, Membership
from apps.tenants.scoping import MissingTenantScope
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "query",
    [
        lambda: list(Agent.objects.all()),
        lambda: Agent.objects.filter(key="x").first(),
        lambda: Agent.objects.get(key="x"),
        lambda: Agent.objects.count(),
        lambda: Agent.objects.filter(key="x").exists(),
        lambda: Agent.objects.filter(key="x").update(name="y"),
        lambda: Agent.objects.filter(key="x").delete(),
        lambda: list(ApiKey.objects.filter(prefix="abc").iterator()),
        lambda: list(AuditEvent.objects.values_list("verb")),
    ],
)
def test_unscoped_queries_raise(query, tenant_a):
    with pytest.raises(MissingTenantScope):
        query()


def test_or_with_a_tenant_on_one_side_only_is_not_scoped(tenant_a):
    from django.db.models import Q

    with pytest.raises(MissingTenantScope):
        list(Agent.objects.filter(Q(tenant=tenant_a) | Q(key="x")))


def test_for_tenant_requires_a_tenant():
    with pytest.raises(MissingTenantScope):
        Agent.objects.for_tenant(None)


def test_scoped_queries_and_reverse_relations_work(tenant_a, tenant_b):
    user = factories.make_user(tenant_a, "member")
    assert Agent.objects.for_tenant(tenant_a).count() == 0
    assert Membership.objects.for_tenant(tenant_a).filter(user=user).exists()
    # a reverse relation from a scoped row is scoped by that row
    assert [m.tenant_id for m in user.memberships.all()] == [tenant_a.pk]
    assert Membership.objects.dangerously_all_tenants().filter(user=user).count() == 1


def test_viewsets_may_not_override_get_queryset():
    with pytest.raises(TypeError, match="must not override get_queryset"):

        class Widened(TenantScopedViewSet):
            model = Agent

            def get_queryset(self):  # type: ignore[override]
                return Agent.objects.dangerously_all_tenants()
