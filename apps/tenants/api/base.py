"""The tenant-scoped API building blocks every app's views use."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db.models import QuerySet
from rest_framework import serializers, viewsets

from apps.tenants import selectors
from apps.tenants.actors import Actor
from apps.tenants.scoping import TenantScoped


class TenantViewMixin:
    """Resolves the request's actor (tenant + role) once; ``self.actor`` is always set in handlers."""

    request: Any
    action_roles: ClassVar[dict[str, str]] = {}

    @property
    def actor(self) -> Actor:
        actor = self.request.auth
        assert isinstance(actor, Actor), "tenant views run only for authenticated actors"
        return actor


class TenantScopedViewSet(TenantViewMixin, viewsets.GenericViewSet):  # type: ignore[type-arg]
    """Base viewset for tenant-owned models.

    The queryset is always the model's rows in the actor's tenant (``selectors.tenant_rows``) narrowed
    by :meth:`scope_queryset`. Subclasses may not override ``get_queryset`` or ``get_object``: that is
    how scope gets widened by accident, so it is refused at class creation.
    """

    model: ClassVar[type[TenantScoped]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("get_queryset", "get_object"):
            if name in cls.__dict__:
                raise TypeError(f"{cls.__name__} must not override {name}; use scope_queryset()")

    def scope_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Add filters (never remove the tenant)."""
        return queryset

    def get_queryset(self) -> QuerySet[Any]:
        if getattr(self, "swagger_fake_view", False):  # OpenAPI generation: no request, no tenant
            return selectors.no_rows(model=self.model)
        queryset = selectors.tenant_rows(model=self.model, tenant=self.actor.tenant)
        return self.scope_queryset(queryset)


class StrictSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Input serializer that refuses unknown fields and non-object bodies."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError(
                {"non_field_errors": [f"Expected a JSON object, got {type(data).__name__}."]}
            )
        writable = {name for name, field in self.fields.items() if not field.read_only}
        errors: dict[str, list[str]] = {name: ["Unknown field."] for name in sorted(set(data) - writable)}
        # DRF would quietly turn 7 into "7"; a wrong JSON type is an error, not something to coerce.
        for name in sorted(writable & set(data)):
            field, value = self.fields[name], data[name]
            textual = isinstance(field, serializers.CharField | serializers.ChoiceField)
            if textual and not isinstance(value, str) and not (value is None and field.allow_null):
                errors[name] = [f"Must be a string, got {_json_type(value)}."]
        if errors:
            raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {"dict": "object", "list": "array"}.get(type(value).__name__, type(value).__name__)
