from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.tenants.api.base import TenantViewMixin
from apps.toolkit.registry import implemented
from apps.tools.catalog import ALIASES, CATALOG, COMPOSITE_ALIASES, COMPOSITE_GROUP, GROUPS, PROFILES


def catalog_document() -> dict[str, Any]:
    done = implemented()
    return {
        "tools": [
            {
                "name": spec.name,
                "group": spec.group,
                "description": spec.description,
                "parameters": spec.parameters,
                "capability": spec.capability,
                "requires": list(spec.requires),
                "available": spec.name in done,
                "unavailable_reason": ""
                if spec.name in done
                else (spec.unavailable_reason or "not available"),
            }
            for spec in CATALOG.values()
        ],
        "groups": {name: list(members) for name, members in GROUPS.items()},
        "group_aliases": {alias: COMPOSITE_GROUP for alias in COMPOSITE_ALIASES},
        "profiles": {name: list(spec) for name, spec in PROFILES.items()},
        "aliases": dict(ALIASES),
    }


class CatalogView(TenantViewMixin, APIView):
    """Every built-in tool with its group, schema, capability and availability; groups, profiles, aliases."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response(catalog_document())
