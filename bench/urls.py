"""The bench-only URLconf: every real route plus the bare baseline view.

The baseline lives here, never in ``config.urls``: an unauthenticated endpoint must not exist in the
product just so it can be measured.
"""

from __future__ import annotations

from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.tenants.api.base import TenantViewMixin
from apps.tenants.roles import Role
from config import urls as product_urls

BASELINE_PATH = "/bench/baseline/"
AUTHED_BASELINE_PATH = "/bench/authed-baseline/"


class BareView(APIView):
    """The cheapest DRF request: no authentication, no permission check, a constant JSON body."""

    authentication_classes = ()
    permission_classes = ()

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


class AuthedView(TenantViewMixin, APIView):
    """What any authenticated API call costs: the product's authentication (API key) and role check,
    the JSON body parsed, and a constant answer shaped like ``/runtime/execute``'s (a GET: the same
    without a body, for read endpoints)."""

    write_role = Role.MEMBER

    def get(self, request: Request) -> Response:
        return Response({"ok": True})

    def post(self, request: Request) -> Response:
        assert isinstance(request.data, dict)
        return Response(
            {
                "call_id": "0" * 32,
                "for_llm": "Saturday",
                "for_user": "Saturday",
                "is_error": False,
                "duration_ms": 0.1,
            }
        )


urlpatterns = [
    path(BASELINE_PATH.strip("/") + "/", BareView.as_view(), name="bench-baseline"),
    path(AUTHED_BASELINE_PATH.strip("/") + "/", AuthedView.as_view(), name="bench-authed-baseline"),
    *product_urls.urlpatterns,
]

handler404 = product_urls.handler404
handler500 = product_urls.handler500
