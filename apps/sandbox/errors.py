"""Error codes of the sandbox's API (beside the shared ones of ``apps.tenants.errors``)."""

from __future__ import annotations

from enum import StrEnum


class SandboxErrorCode(StrEnum):
    ENGINE_UNAVAILABLE = "sandbox_engine_unavailable"  # the Docker engine failed to do what was asked
