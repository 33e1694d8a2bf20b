"""Error codes of the messaging app (beside the shared ones of ``apps.tenants.errors``)."""

from __future__ import annotations

from enum import StrEnum


class MessagingErrorCode(StrEnum):
    DUPLICATE_NAME = "duplicate_channel"  # another channel of the tenant has the name
