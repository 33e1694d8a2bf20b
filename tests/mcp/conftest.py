from __future__ import annotations

from collections.abc import Iterator

import pytest

from apps.mcp_grants import client


@pytest.fixture
def mcp_connections() -> Iterator[client.Manager]:
    """This process's connection manager, emptied after the test (its stdio servers stopped)."""
    mgr = client.manager()
    yield mgr
    mgr.run(mgr.close_all(), 60)
