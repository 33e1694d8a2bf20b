"""Error codes of the llm app (beside the shared ones of ``apps.tenants.errors``)."""

from __future__ import annotations

from enum import StrEnum


class LLMErrorCode(StrEnum):
    DUPLICATE_NAME = "duplicate_provider"  # another provider of the tenant has the name
