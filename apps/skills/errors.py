"""Error codes of the skills app (beside the shared ones of ``apps.tenants.errors``)."""

from __future__ import annotations

from enum import StrEnum


class SkillErrorCode(StrEnum):
    DUPLICATE_NAME = "duplicate_skill"  # the same name in the same scope (global, or one agent's)
