"""The dashboard personas: tenant A's viewer, member, admin and owner, and tenant B's owner (the
outsider), each a logged-in session; and tenant A's agent ``bot``. A module may override any of them."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.accounts import services as tenant_services
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.dashboard.personas import login


@pytest.fixture
def viewer(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.VIEWER, email="viewer@a.test"))


@pytest.fixture
def member(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.MEMBER, email="member@a.test"))


@pytest.fixture
def admin(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.ADMIN, email="admin@a.test"))


@pytest.fixture
def owner(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.OWNER, email="owner@a.test"))


@pytest.fixture
def outsider(tenant_b: Tenant) -> Client:
    return login(factories.make_user(tenant_b, Role.OWNER, email="owner@b.test"))


@pytest.fixture
def bot(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
