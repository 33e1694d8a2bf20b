"""503 for a database that cannot be reached: the API's error envelope under ``/api/``, a short page
elsewhere, with ``Retry-After``. The request's open transaction, if any, was not committed; a write
the view had already committed on its own stays."""

from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin
from psycopg_pool import PoolTimeout

from apps.tenants import database

logger = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 5


def unavailable(request: HttpRequest) -> HttpResponse:
    response: HttpResponse
    if request.path.startswith("/api/"):
        body = {"error": {"code": "database_unavailable", "message": database.MESSAGE, "details": {}}}
        response = JsonResponse(body, status=503)
    else:
        response = HttpResponse(database.MESSAGE, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, (OperationalError, InterfaceError, PoolTimeout)):
            if not isinstance(exception, database.DatabaseUnavailable):
                logger.warning("database error answered with 503: %s", exception)
            return unavailable(request)
        return None
