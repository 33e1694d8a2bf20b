"""Fixtures of the runtime tests that run commands for tenant A's agent ``bot`` in its own workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apps.accounts import services as tenant_services
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.toolkit.workspace import workspace_for


@pytest.fixture
def agent_a(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def workspace_a(tenant_a: Tenant, agent_a: Agent) -> Path:
    return Path(os.path.realpath(workspace_for(tenant=tenant_a, agent=agent_a, user_id="")))
