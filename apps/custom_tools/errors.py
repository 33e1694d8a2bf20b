"""Error codes of the custom tools app (beside the shared ones of ``apps.tenants.errors``)."""

from __future__ import annotations

from enum import StrEnum


class CustomToolErrorCode(StrEnum):
    NAME_RESERVED = "name_reserved"  # a built-in, alias, domain or MCP tool's name
    DUPLICATE_NAME = "duplicate_custom_tool"  # the same name in the same scope
