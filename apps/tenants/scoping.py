"""Tenant scoping for every tenant-owned model.

Tenant-owned models inherit :class:`TenantScoped`. Their default manager refuses to *evaluate* a
queryset that is not narrowed to one tenant: ``Agent.objects.filter(key="x")`` raises
:class:`MissingTenantScope` the moment it touches the database, while
``Agent.objects.for_tenant(tenant).filter(key="x")`` works. Reverse relations from an object that is
itself scoped (``tenant.agents.all()``, ``agent.api_keys.all()``) count as scoped. Code that really must
cross tenants (platform admin, retention sweeps that then act per tenant) says so with
``dangerously_all_tenants()``.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Self, TypeVar

from django.db import models
from django.db.models.lookups import Exact, In
from django.db.models.sql.where import AND, WhereNode

if TYPE_CHECKING:
    from apps.tenants.models import Tenant


class MissingTenantScope(RuntimeError):
    """A tenant-owned table was queried without a tenant."""


def _where_has_tenant(where: WhereNode, alias: str | None) -> bool:
    if where.connector != AND or where.negated:
        return False
    for child in where.children:
        if isinstance(child, WhereNode):
            if _where_has_tenant(child, alias):
                return True
            continue
        if isinstance(child, Exact | In):
            target = getattr(child.lhs, "target", None)
            if (
                target is not None
                and target.column == "tenant_id"
                and getattr(child.lhs, "alias", None) == alias
            ):
                if isinstance(child, In) and not child.rhs:
                    continue
                return True
    return False


_M = TypeVar("_M", bound=models.Model)


class TenantQuerySet(models.QuerySet[_M, _M]):
    _tenant_unscoped_ok: bool = False

    def for_tenant(self, tenant: Tenant | None) -> Self:
        """Narrow to one tenant; a missing tenant is a programming error, never "all tenants"."""
        if tenant is None or getattr(tenant, "pk", None) is None:
            raise MissingTenantScope(f"{self.model.__name__}: a tenant is required")
        return self.filter(tenant_id=tenant.pk)

    def dangerously_all_tenants(self) -> Self:
        """Deliberately cross tenants (platform administration, per-tenant sweeps)."""
        clone = self._chain()  # type: ignore[attr-defined]
        clone._tenant_unscoped_ok = True
        return clone  # type: ignore[no-any-return]

    def _clone(self) -> Self:
        clone = super()._clone()  # type: ignore[misc]
        clone._tenant_unscoped_ok = self._tenant_unscoped_ok
        return clone  # type: ignore[no-any-return]

    def _check_tenant_scope(self) -> None:
        if self._tenant_unscoped_ok or self._known_related_objects:  # type: ignore[attr-defined]
            return
        alias = self.query.get_initial_alias() if self.query.alias_map else self.model._meta.db_table
        if _where_has_tenant(self.query.where, alias):
            return
        raise MissingTenantScope(
            f"{self.model.__name__} queried without a tenant: use .for_tenant(tenant) "
            "(or dangerously_all_tenants() where crossing tenants is intended)"
        )

    def _fetch_all(self) -> None:
        if self._result_cache is None:
            self._check_tenant_scope()
        super()._fetch_all()  # type: ignore[misc]

    def iterator(self, chunk_size: int | None = None) -> Any:
        self._check_tenant_scope()
        return super().iterator(chunk_size=chunk_size)

    def count(self) -> int:
        if self._result_cache is None:
            self._check_tenant_scope()
        return super().count()

    def exists(self) -> bool:
        if self._result_cache is None:
            self._check_tenant_scope()
        return super().exists()

    def update(self, **kwargs: Any) -> int:
        self._check_tenant_scope()
        return super().update(**kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        self._check_tenant_scope()
        return super().delete()

    def aggregate(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self._check_tenant_scope()
        return super().aggregate(*args, **kwargs)


class TenantManager(models.Manager[_M]):
    """The default manager of tenant-owned models."""

    def get_queryset(self) -> TenantQuerySet[_M]:
        return TenantQuerySet(self.model, using=self._db)

    def for_tenant(self, tenant: Tenant | None) -> TenantQuerySet[_M]:
        return self.get_queryset().for_tenant(tenant)

    def dangerously_all_tenants(self) -> TenantQuerySet[_M]:
        return self.get_queryset().dangerously_all_tenants()


class DangerouslyUnscopedManager(TenantManager[_M]):
    """Every tenant's rows, for the platform staff's admin screens alone (``apps.<app>.admin``, through
    ``apps.tenants.platform_admin``). A test fails if anything else names it; code that must cross tenants
    for its own work says so with ``dangerously_all_tenants()`` on the query instead."""

    def get_queryset(self) -> TenantQuerySet[_M]:
        return super().get_queryset().dangerously_all_tenants()


class TenantScoped(models.Model):
    """Base of every tenant-owned row: a tenant, a UUID id, and timestamps."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()
    dangerously_unscoped = DangerouslyUnscopedManager()

    class Meta:
        abstract = True

    def _get_unique_checks(self, exclude: Any = None, include_meta_constraints: bool = False) -> Any:
        # Django validates uniqueness with unscoped queries. Keep the checks that include the tenant;
        # global ones (a fresh uuid4 pk, an API key prefix) are left to the database constraint.
        unique_checks, date_checks = super()._get_unique_checks(  # type: ignore[misc]
            exclude=exclude, include_meta_constraints=include_meta_constraints
        )
        scoped = [(cls, fields) for cls, fields in unique_checks if "tenant" in fields]
        return scoped, date_checks
