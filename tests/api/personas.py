"""Every persona on one API route: tenant A's viewer, member, admin and owner, tenant B's owner
(``outsider``) and an anonymous client. Each meets the same state (an allowed write is undone before the
next persona), and a refused request changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from apps.tenants.models import Tenant
from apps.tenants.roles import RANK, Role
from tests.api.tenant_state import tenant_state

PERSONAS = ["viewer_a", "member_a", "admin_a", "owner_a", "outsider", "anonymous"]
PERSONA_ROLE = {
    "viewer_a": Role.VIEWER,
    "member_a": Role.MEMBER,
    "admin_a": Role.ADMIN,
    "owner_a": Role.OWNER,
}


def error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The error envelope of ``response``, which must have ``status`` and ``code``."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    envelope: dict[str, Any] = body["error"]
    return envelope


def check_personas(
    request: pytest.FixtureRequest,
    tenant: Tenant,
    *,
    method: str,
    url: str,
    body: dict[str, Any] | None,
    least: str,
    success: int,
    outsider_status: int,
    never_shown_to_outsider: tuple[str, ...] = (),
) -> None:
    clients = {persona: request.getfixturevalue(persona) for persona in PERSONAS}
    before = tenant_state(tenant)
    for persona, client in clients.items():
        with transaction.atomic():
            response = getattr(client, method)(url, body, format="json")
            allowed = persona in PERSONA_ROLE and RANK[PERSONA_ROLE[persona]] >= RANK[Role(least)]
            if persona == "anonymous":
                error(response, 401, "not_authenticated")
            elif persona == "outsider":
                assert response.status_code == outsider_status, response.content
                shown = response.content.decode()
                assert tenant.slug not in shown
                for value in never_shown_to_outsider:
                    assert value not in shown
            elif allowed:
                assert response.status_code == success, (persona, response.content)
            else:
                refused = error(response, 403, "permission_denied")
                assert least in refused["message"]
            if not allowed:
                assert tenant_state(tenant) == before, persona
            transaction.set_rollback(True)
