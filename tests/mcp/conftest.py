from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from apps.accounts import services
from apps.mcp_grants import client
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant


@pytest.fixture
def mcp_connections() -> Iterator[client.Manager]:
    """This process's connection manager, emptied after the test (its stdio servers stopped)."""
    mgr = client.manager()
    yield mgr
    mgr.run(mgr.close_all(), 60)


@pytest.fixture
def base(live: Any) -> str:
    """The base URL of the session's daphne process (started on first use)."""
    return str(live.daphne())


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    """Tenant A's agent ``bot``, the one the MCP tests call ``/mcp/bot/`` and grant servers to."""
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
