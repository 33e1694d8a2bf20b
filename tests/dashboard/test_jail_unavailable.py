"""Where the jail cannot be made (here: bubblewrap is not where Toolgate looks for it, or libseccomp cannot
be loaded), tenants' commands are refused with the reason and never run on the host; /readyz, the
sandbox API and the dashboard's Sandbox page say why."""

from __future__ import annotations

import ctypes.util
from collections.abc import Iterator
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from apps.toolkit import jail, syscall_filter
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
def no_libseccomp(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """libseccomp cannot be loaded: the jail's system call filter cannot be built."""
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "/nonexistent/libseccomp.so.2")
    monkeypatch.setattr(syscall_filter, "_built", {})
    jail.status(refresh=True)
    yield
    monkeypatch.undo()
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


def test_without_the_system_call_filter_no_jail_is_made(
    no_libseccomp, api_admin, admin, bot: Agent, tmp_path: Path
):
    marker = tmp_path / "marker-file"
    response = api_admin.post(
        "/api/v1/runtime/execute",
        {"agent": bot.key, "tool": "exec", "args": {"command": f"touch {marker}; echo ran"}},
        format="json",
    )
    body = response.json()
    assert body["is_error"] is True
    assert body["for_llm"].startswith("jail unavailable: the jail's system call filter could not be built")
    assert "install Debian's libseccomp2 package" in body["for_llm"]
    assert not marker.exists()
    assert admin.get("/readyz").status_code == 503
    assert api_admin.get("/api/v1/sandbox/").json()["jail"]["syscall_filter"] == ""


def test_the_sandbox_page_lists_the_refused_system_calls(api_admin, admin):
    jail.status(refresh=True)
    page = admin.get("/sandbox/").content.decode()
    refused = "add_key, keyctl, request_key, io_uring_setup, io_uring_enter, io_uring_register"
    assert f"<dd data-jail-syscalls>{refused}</dd>" in page
