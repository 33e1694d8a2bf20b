"""Django's admin (``/admin/``) for the people who run the installation: platform staff.

Each domain app registers its models in its own ``admin.py`` with :class:`PlatformModelAdmin`. The admin
is the one place that reads across tenants, through the models' ``dangerously_unscoped`` manager; a test
fails if anything else names that manager. What it allows, and why:

- Only active staff users reach it (Django's admin checks ``is_staff``; a tenant's members and API keys
  never are staff). Dashboard logins of tenant members are refused like anonymous visitors.
- It reads everything but writes little. Most of a tenant's rows change only through their services,
  which check the input (the jail, the SSRF guard, policy syntax), raise the tenant's ``config_version``
  and tell the live pages; an admin form would skip all of that. So a model is read-only unless its admin
  names the few plain fields staff may edit (``editable``); nothing is added or deleted here (a tenant is
  suspended or deleted with the lifecycle commands).
- A secret is never shown: encrypted fields appear as "set" or "not set".
- Every change is written to the tenant's audit log with the staff user as the actor, in the transaction
  of the change, and raises the tenant's ``config_version``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.contrib import admin
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models.fields.related import RelatedField
from django.http import HttpRequest

from apps.tenants.models import Tenant
from apps.tenants.scoping import TenantScoped
from apps.tenants.services import config_changed

# Written by the audit app's admin module (``apps.audit.admin``), which Django's admin imports when it
# starts: the audit log sits above this app, so it hands its writer down. Without one, a change is
# refused rather than left unaudited.
AuditWriter = Callable[..., None]
_audit_writer: AuditWriter | None = None

# Fields no screen shows whatever their type: the digest of an API key is as good as a secret to an
# attacker with time, and vectors are noise.
HIDDEN_FIELDS = frozenset({"digest", "embedding", "search_vector"})


def set_audit_writer(writer: AuditWriter) -> None:
    global _audit_writer
    _audit_writer = writer


def is_secret(field: models.Field[Any, Any]) -> bool:
    return type(field).__module__.startswith("encrypted_model_fields")


def _secret_status(name: str, label: str) -> Callable[[Any], str]:
    @admin.display(description=f"{label} (secret)")
    def status(obj: Any) -> str:
        return "set" if getattr(obj, name, "") else "not set"

    return status


class PlatformModelAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A read-mostly, cross-tenant admin screen for one model (see the module's docstring)."""

    #: Plain fields platform staff may change here; empty means the screen only reads.
    editable: Sequence[str] = ()
    list_per_page = 50
    # A count of every row of a big table on each page costs more than the page.
    show_full_result_count = False

    def __init__(self, model: type[models.Model], admin_site: admin.AdminSite) -> None:
        super().__init__(model, admin_site)
        for name in self.editable:
            field = model._meta.get_field(name)
            if (
                not isinstance(field, models.Field)
                or is_secret(field)
                or isinstance(field, RelatedField)
                or name in HIDDEN_FIELDS
            ):
                raise ImproperlyConfigured(f"{model.__name__}.{name} cannot be edited in the admin")
        self._secret_names = [f.name for f in model._meta.concrete_fields if is_secret(f)]
        for name in self._secret_names:
            setattr(self, f"{name}_status", _secret_status(name, name.replace("_", " ")))

    # Reading

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        if issubclass(self.model, TenantScoped):
            queryset = self.model.dangerously_unscoped.select_related("tenant")
        else:
            queryset = self.model._default_manager.all()
        ordering = self.get_ordering(request)
        return queryset.order_by(*ordering) if ordering else queryset

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:  # type: ignore[override]
        shown = [
            f.name
            for f in self.model._meta.concrete_fields
            if not is_secret(f) and f.name not in HIDDEN_FIELDS
        ]
        return shown + [f"{name}_status" for name in self._secret_names]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [name for name in self.get_fields(request, obj) if name not in self.editable]

    # Writing: only the named plain fields, never an addition or a deletion

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(self.editable) and super().has_change_permission(request, obj)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        return {}

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # In the change's transaction (the admin's change view is atomic), like every service's audit row.
        self._audit(request, obj, verb="platform_admin.changed", data={"fields": sorted(form.changed_data)})
        # Names and descriptions reach tool lists and prompts: the tenant's caches must not keep them.
        config_changed(_tenant_of(obj))

    def _audit(self, request: HttpRequest, obj: Any, *, verb: str, data: dict[str, Any]) -> None:
        if _audit_writer is None:
            raise ImproperlyConfigured("the admin has no audit writer: apps.audit.admin was not loaded")
        _audit_writer(
            tenant=_tenant_of(obj),
            user=request.user,
            verb=verb,
            target_type=self.model._meta.label_lower,
            target_id=str(obj.pk),
            data={"model": self.model._meta.label, **data},
        )


def _tenant_of(obj: Any) -> Tenant:
    return obj if isinstance(obj, Tenant) else obj.tenant
