"""Every persona on every credentialed-CLI route: tenant A's viewer, member, admin and owner, tenant B's
owner (404 below A's binary; its own lists, presets and registrations succeed) and an anonymous client
(401). A refused request changes nothing, and no answer carries a credential."""

from __future__ import annotations

import pytest

from tests.api import roles_secure_cli
from tests.api.personas import check_personas
from tests.api.test_roles import _targets

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("method", "template", "body", "least", "success"),
    roles_secure_cli.ACTIONS,
    ids=[f"{a[0]} {a[1]}" for a in roles_secure_cli.ACTIONS],
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
        never_shown_to_outsider=(ids["cli_binary"], "roles-cli-user@a.test", "roles-token-value-123"),
    )
