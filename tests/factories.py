"""Test data built through the services, exactly as the API would build it."""

from __future__ import annotations

import itertools

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant

PASSWORD = "a-long-test-passphrase"
_seq = itertools.count(1)


def make_tenant(slug: str | None = None) -> Tenant:
    return services.tenant_create(slug=slug or f"t{next(_seq)}", name="Test tenant")


def make_user(tenant: Tenant, role: str, email: str | None = None):  # type: ignore[no-untyped-def]
    email = email or f"{role}{next(_seq)}@{tenant.slug}.test"
    membership = services.membership_create(
        actor=Actor.system(tenant), email=email, role=role, password=PASSWORD
    )
    return get_user_model().objects.get(pk=membership.user_id)


def make_api_key(tenant: Tenant, role: str, name: str | None = None) -> str:
    _, raw = services.api_key_create(actor=Actor.system(tenant), name=name or f"key-{next(_seq)}", role=role)
    return raw


def key_client(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def call_context(tenant: Tenant, agent, workspace, *, tool_settings=None):  # type: ignore[no-untyped-def]
    """A tool's CallContext as the pipeline builds it, on a given workspace (for calling tools directly)."""
    from apps.toolkit.context import CallContext
    from apps.toolkit.scrubber import Scrubber

    return CallContext(
        tenant=tenant,
        agent=agent,
        actor=Actor.system(tenant),
        call_id="call-1",
        workspace=workspace,
        scrubber=Scrubber(),
        tool_settings=tool_settings or {},
    )
