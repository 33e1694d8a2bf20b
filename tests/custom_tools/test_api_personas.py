"""Every persona on every custom tools route: tenant A's viewer, member, admin and owner, tenant B's owner
(404 for A's tool whatever the method; its own empty list, and a tool defined in B, succeed) and an
anonymous client (401). A refused request changes nothing."""

from __future__ import annotations

import pytest

from apps.tenants.roles import Role
from tests import factories
from tests.api import roles_custom_tools
from tests.api.personas import check_personas, error
from tests.api.tenant_state import tenant_state
from tests.api.test_roles import _targets

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("method", "template", "body", "least", "success"),
    roles_custom_tools.ACTIONS,
    ids=[f"{a[0]} {a[1]}" for a in roles_custom_tools.ACTIONS],
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
        outsider_status=404 if "{" in template else success,
        never_shown_to_outsider=(ids["custom_tool"], "roles_lookup", ids["custom_tool_agent"]),
    )


def test_viewers_read_tools_but_never_env_values_and_cannot_test_run_them(tenant_a):
    ids = _targets(tenant_a)
    viewer = factories.key_client(factories.make_api_key(tenant_a, Role.VIEWER))
    member = factories.key_client(factories.make_api_key(tenant_a, Role.MEMBER))
    shown = viewer.get(f"{roles_custom_tools.TOOLS}{ids['custom_tool']}/")
    assert shown.json()["env"] == ["API_TOKEN"]
    assert "a-secret-env-value" not in shown.content.decode()
    before = tenant_state(tenant_a)
    for client in (viewer, member):
        error(
            client.post(
                f"{roles_custom_tools.TOOLS}{ids['custom_tool']}/test", {"agent": "target"}, format="json"
            ),
            403,
            "permission_denied",
        )
    assert tenant_state(tenant_a) == before


def test_another_tenant_cannot_name_our_agent_for_its_own_tools(tenant_a, tenant_b, outsider):
    ids = _targets(tenant_a)
    before = tenant_state(tenant_a)
    refused = error(
        outsider.post(
            roles_custom_tools.TOOLS,
            {"name": "probe", "command": "echo", "agent": ids["custom_tool_agent"]},
            format="json",
        ),
        400,
        "invalid",
    )
    assert refused["details"] == {"agent": [f"no agent {ids['custom_tool_agent']!r} in this tenant."]}
    error(outsider.get(f"{roles_custom_tools.TOOLS}?agent={ids['custom_tool_agent']}"), 400, "invalid")
    assert tenant_state(tenant_a) == before
