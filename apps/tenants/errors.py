"""Error codes of the tenants app and the domain error every service raises."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    INVALID = "invalid"
    MALFORMED_JSON = "malformed_json"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    BODY_TOO_LARGE = "body_too_large"
    NOT_AUTHENTICATED = "not_authenticated"
    AUTHENTICATION_FAILED = "authentication_failed"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    CONFLICT = "conflict"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    # tenants
    DUPLICATE_AGENT_KEY = "duplicate_agent_key"
    DUPLICATE_API_KEY_NAME = "duplicate_api_key_name"
    DUPLICATE_MEMBER = "duplicate_member"
    LAST_OWNER = "last_owner"
    ROLE_TOO_HIGH = "role_too_high"
    ALREADY_REVOKED = "already_revoked"
    TENANT_EXISTS = "tenant_exists"
    TENANT_SUSPENDED = "tenant_suspended"
    QUOTA_EXCEEDED = "quota_exceeded"
    # policy
    APPROVAL_EXPIRED = "approval_expired"


class ServiceError(Exception):
    """A refused domain action. The API turns it into the error envelope with ``status``."""

    status = 400

    def __init__(
        self, code: str, message: str, *, details: dict[str, Any] | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.code = str(code)
        self.message = message
        self.details = details or {}
        if status is not None:
            self.status = status


class Conflict(ServiceError):
    status = 409


class Forbidden(ServiceError):
    status = 403


def invalid_fields(errors: Mapping[str, list[str]]) -> ServiceError:
    """The error for problems found by field: the first one as ``field: message``, all of them in
    ``details``. ``errors`` holds at least one field."""
    field, messages = next(iter(errors.items()))
    return ServiceError(ErrorCode.INVALID, f"{field}: {messages[0]}", details=dict(errors))
