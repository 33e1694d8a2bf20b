"""OpenAPI descriptions of Toolgate's authentication schemes."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[misc,no-untyped-call]
    target_class = "apps.tenants.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "tgk_<prefix>_<secret>",
            "description": "A tenant API key; the key's tenant is the request's tenant.",
        }


class SessionScheme(OpenApiAuthenticationExtension):  # type: ignore[misc,no-untyped-call]
    target_class = "apps.tenants.authentication.TenantSessionAuthentication"
    name = "session"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": "sessionid",
            "description": "Dashboard session; unsafe methods need the X-CSRFToken header. "
            "X-Toolgate-Tenant: <slug> selects the tenant.",
        }
