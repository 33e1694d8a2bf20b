"""One error envelope for the whole API: ``{"error": {"code", "message", "details"}}``."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.scoping import MissingTenantScope

logger = logging.getLogger(__name__)


def envelope(
    code: str,
    message: str,
    details: Any = None,
    *,
    http_status: int = 400,
    headers: dict[str, str] | None = None,
) -> Response:
    return Response(
        {"error": {"code": code, "message": message, "details": details or {}}},
        status=http_status,
        headers=headers,
    )


def _first_message(detail: Any, path: str = "") -> str:
    if isinstance(detail, dict):
        for key, value in detail.items():
            label = key if key != "non_field_errors" else ""
            return _first_message(value, f"{path}.{label}".strip(".") if label else path)
    if isinstance(detail, list) and detail:
        if all(isinstance(item, dict) and not item for item in detail):
            return path or "invalid"
        for index, item in enumerate(detail):
            if item:
                inner = f"{path}[{index}]" if isinstance(item, dict) else path
                return _first_message(item, inner)
    text = str(detail)
    return f"{path}: {text}" if path else text


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ServiceError):
        return envelope(exc.code, exc.message, exc.details, http_status=exc.status)
    if isinstance(exc, Http404):
        message = str(exc) if str(exc) else "Not found."
        return envelope(ErrorCode.NOT_FOUND, message, http_status=404)
    if isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, RequestDataTooBig):
        return envelope(
            ErrorCode.BODY_TOO_LARGE,
            "Request body is larger than the allowed limit.",
            http_status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, MissingTenantScope):
        logger.error("tenant scope missing: %s", exc)
        return envelope(ErrorCode.SERVER_ERROR, "Internal error.", http_status=500)
    if not isinstance(exc, exceptions.APIException):
        return None  # Django's 500 handling (and logging) takes over
    headers: dict[str, str] = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(exc.wait))  # type: ignore[attr-defined]
    headers.update(getattr(exc, "response_headers", None) or {})
    code = {
        exceptions.ValidationError: ErrorCode.INVALID,
        exceptions.ParseError: ErrorCode.MALFORMED_JSON,
        exceptions.UnsupportedMediaType: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
        exceptions.NotAuthenticated: ErrorCode.NOT_AUTHENTICATED,
        exceptions.AuthenticationFailed: ErrorCode.AUTHENTICATION_FAILED,
        exceptions.PermissionDenied: ErrorCode.PERMISSION_DENIED,
        exceptions.NotFound: ErrorCode.NOT_FOUND,
        exceptions.MethodNotAllowed: ErrorCode.METHOD_NOT_ALLOWED,
        exceptions.Throttled: ErrorCode.RATE_LIMITED,
    }.get(type(exc), str(exc.default_code))
    if isinstance(exc, exceptions.ValidationError):
        return envelope(
            code, _first_message(exc.detail), exc.detail, http_status=exc.status_code, headers=headers
        )
    if isinstance(exc, exceptions.NotAuthenticated) and not headers:
        headers["WWW-Authenticate"] = 'Bearer realm="toolgate"'
    details = getattr(exc, "envelope_details", None)
    return envelope(code, str(exc.detail), details, http_status=exc.status_code, headers=headers)
