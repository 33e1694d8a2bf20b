"""Where the jail cannot be made (here: bubblewrap is not where Toolgate looks for it), tenants' commands
are refused with the reason and never run on the host; /readyz, the sandbox API and the dashboard's
Sandbox page say why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from apps.toolkit import jail
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_bubblewrap(settings) -> Iterator[None]:  # type: ignore[no-untyped-def]
    settings.TOOLGATE_BWRAP = "/nonexistent/bwrap"
    jail.status(refresh=True)
    yield
    settings.TOOLGATE_BWRAP = "bwrap"
    jail.status(refresh=True)


@pytest.fixture
def api_admin(tenant_a: Tenant) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {factories.make_api_key(tenant_a, Role.ADMIN)}")
    return client


def test_commands_are_refused_not_run_on_the_host(no_bubblewrap, api_admin, bot: Agent, tmp_path: Path):
    marker = tmp_path / "marker-file"
    response = api_admin.post(
        "/api/v1/runtime/execute",
        {"agent": bot.key, "tool": "exec", "args": {"command": f"touch {marker}; echo ran"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["is_error"] is True
    assert body["for_llm"].startswith("jail unavailable: bubblewrap (/nonexistent/bwrap) is not installed")
    assert "will not fall back to unconfined host execution" in body["for_llm"]
    assert not marker.exists()


def test_readyz_the_api_and_the_sandbox_page_say_why(no_bubblewrap, api_admin, admin):
    ready = admin.get("/readyz")
    assert ready.status_code == 503
    check = ready.json()["checks"]["jail"]
    assert check["ok"] is False
    assert "bubblewrap (/nonexistent/bwrap) is not installed" in check["error"]

    status = api_admin.get("/api/v1/sandbox/").json()["jail"]
    assert status["available"] is False
    assert "install Debian's bubblewrap package" in status["reason"]

    page = admin.get("/sandbox/").content.decode()
    assert 'data-jail data-available="false"' in page
    assert "install Debian&#x27;s bubblewrap package" in page


def test_when_it_can_be_made_readyz_and_the_page_say_so(api_admin, admin):
    jail.status(refresh=True)
    assert admin.get("/readyz").json()["checks"]["jail"]["ok"] is True
    assert api_admin.get("/api/v1/sandbox/").json()["jail"]["available"] is True
    assert 'data-jail data-available="true"' in admin.get("/sandbox/").content.decode()
