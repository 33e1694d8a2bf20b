"""Every persona on every MCP route: tenant A's viewer, member, admin and owner, tenant B's owner (404
below A's server, agent or request; its own empty lists) and an anonymous client (401). A refused
request changes nothing."""

from __future__ import annotations

import pytest

from apps.mcp_grants import services
from apps.mcp_grants.models import AccessRequest
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.api import roles_mcp
from tests.api.personas import check_personas, error
from tests.api.tenant_state import tenant_state
from tests.api.test_roles import _targets

pytestmark = pytest.mark.django_db


def _outsider_status(method: str, template: str, success: int) -> int:
    """Tenant B's owner: 404 for anything under A's server, agent or request; B's own (empty) lists and
    a server registered in B succeed; a request naming A's server is invalid in B (no such server)."""
    if "{" in template:
        return 404
    if template.startswith(roles_mcp.REQUESTS) and method == "post":
        return 400
    return success


@pytest.mark.parametrize(
    ("method", "template", "body", "least", "success"),
    roles_mcp.ACTIONS,
    ids=[f"{a[0]} {a[1]}" for a in roles_mcp.ACTIONS],
)
def test_personas_on_every_route(method, template, body, least, success, request, tenant_a):
    ids = _targets(tenant_a)
    check_personas(
        request,
        tenant_a,
        method=method,
        url=template.format(**ids),
        body=body,
        least=least,
        success=success,
        outsider_status=_outsider_status(method, template, success),
        never_shown_to_outsider=(ids["mcp_server"], ids["mcp_request"], "roles-user@a.test"),
    )


def test_one_request_is_for_admins_and_its_requester_only(
    tenant_a, viewer_a, member_a, admin_a, owner_a, outsider, anonymous
):
    ids = _targets(tenant_a)
    mine = member_a.post(
        roles_mcp.REQUESTS, {"server": ids["mcp_server"], "scope": "agent", "agent": "target"}, format="json"
    ).json()
    others = f"{roles_mcp.REQUESTS}{ids['mcp_request']}/"
    before = tenant_state(tenant_a)

    assert member_a.get(f"{roles_mcp.REQUESTS}{mine['id']}/").json()["id"] == mine["id"]
    for admin in (admin_a, owner_a):
        assert admin.get(others).json()["id"] == ids["mcp_request"]
        assert admin.get(f"{roles_mcp.REQUESTS}{mine['id']}/").status_code == 200
    for stranger in (viewer_a, member_a, outsider):
        error(stranger.get(others), 404, "not_found")
    error(viewer_a.get(f"{roles_mcp.REQUESTS}{mine['id']}/"), 404, "not_found")
    error(anonymous.get(others), 401, "not_authenticated")
    # a member cannot decide even their own request
    error(
        member_a.post(f"{roles_mcp.REQUESTS}{mine['id']}/approve", {}, format="json"),
        403,
        "permission_denied",
    )
    assert tenant_state(tenant_a) == before


def test_another_tenant_cannot_name_our_objects_in_its_own_requests(tenant_a, tenant_b, outsider):
    ids = _targets(tenant_a)
    services.server_create(
        actor=Actor.system(tenant_b), name=ids["mcp_server"], transport="stdio", command="npx"
    )
    before = tenant_state(tenant_a)
    # B's server of the same name, A's agent: no such agent in B
    refused = outsider.post(
        roles_mcp.REQUESTS,
        {"server": ids["mcp_server"], "scope": "agent", "agent": ids["mcp_agent"]},
        format="json",
    )
    assert error(refused, 400, "invalid")["details"] == {
        "agent": [f"no agent {ids['mcp_agent']!r} in this tenant."]
    }
    grant = outsider.put(
        f"/api/v1/mcp/servers/{ids['mcp_server']}/grants/agents/{ids['mcp_agent']}/", {}, format="json"
    )
    error(grant, 404, "not_found")
    error(
        outsider.post(f"{roles_mcp.REQUESTS}{ids['mcp_request']}/approve", {}, format="json"),
        404,
        "not_found",
    )
    assert tenant_state(tenant_a) == before
    assert AccessRequest.objects.for_tenant(tenant_a).get(pk=ids["mcp_request"]).status == "pending"


def test_a_viewer_reads_servers_but_not_credentials(tenant_a):
    viewer = factories.key_client(factories.make_api_key(tenant_a, Role.VIEWER))
    ids = _targets(tenant_a)
    assert viewer.get(f"/api/v1/mcp/servers/{ids['mcp_server']}/").json()["headers"] == ["Authorization"]
    error(viewer.get(f"/api/v1/mcp/servers/{ids['mcp_server']}/credentials/"), 403, "permission_denied")
