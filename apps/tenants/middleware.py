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
    """The innermost middleware. Synchronous only, on purpose: under ASGI, Django runs each middleware
    in the mode of the one inside it, and Django's own (``MiddlewareMixin``) would otherwise run in
    async mode, crossing from the event loop to a thread and back for every ``process_request`` and
    ``process_response`` (16 crossings for a plain GET). With this one synchronous, the whole chain runs
    in the request's thread, and only Django's own steps around the view cross (6: the
    ``request_started`` signal, the chain, CSRF's ``process_view``, the view, the response's rendering
    and closing; the same for the async execute view)."""

    async_capable = False
    sync_capable = True

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, (OperationalError, InterfaceError, PoolTimeout)):
            if not isinstance(exception, database.DatabaseUnavailable):
                logger.warning("database error answered with 503: %s", exception)
            return unavailable(request)
        return None
