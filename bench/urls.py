"""The bench-only URLconf: every real route plus the bare baseline view.

The baseline lives here, never in ``config.urls``: an unauthenticated endpoint must not exist in the
product just so it can be measured.
"""

from __future__ import annotations

from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config import urls as product_urls

BASELINE_PATH = "/bench/baseline/"


class BareView(APIView):
    """The cheapest DRF request: no authentication, no permission check, a constant JSON body."""

    authentication_classes = ()
    permission_classes = ()

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


urlpatterns = [
    path(BASELINE_PATH.strip("/") + "/", BareView.as_view(), name="bench-baseline"),
    *product_urls.urlpatterns,
]

handler404 = product_urls.handler404
handler500 = product_urls.handler500
