"""Tenant-isolation cases for the messaging routes (merged into ``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from tests.api.isolation_support import Case

CASES: dict[str, Case] = {}
