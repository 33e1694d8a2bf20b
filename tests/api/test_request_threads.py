"""Under ASGI a request crosses from the event loop to a thread as few times as Django allows. The
middleware chain runs in the request's thread (``DatabaseUnavailableMiddleware``, the innermost, is
synchronous on purpose): in async mode Django's own middleware would cross for every
``process_request`` and ``process_response`` (16 crossings for a plain GET, against 6 now: the
``request_started`` signal, the chain, CSRF's ``process_view``, the view, the response's rendering and
closing). Counted through Django's ASGI request handling (``AsyncClient``)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import SyncToAsync, async_to_sync
from django.test import AsyncClient

from apps.accounts import services as tenant_services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)  # the request's thread has its own connection

MOST_CROSSINGS = 6


@pytest.fixture
def crossings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What each crossing to a thread runs, by name."""
    names: list[str] = []
    to_thread = SyncToAsync.__call__

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        names.append(getattr(self.func, "__qualname__", repr(self.func)))
        return to_thread(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    return names


def _auth(tenant: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {factories.make_api_key(tenant, Role.MEMBER)}"}


def _per_middleware(names: list[str]) -> list[str]:
    return [n for n in names if n.endswith((".process_request", ".process_response", ".__acall__"))]


def test_a_synchronous_view_runs_its_middleware_in_one_thread(tenant_a, crossings):
    response = async_to_sync(AsyncClient().get)("/api/v1/agents/", headers=_auth(tenant_a))
    assert response.status_code == 200, response.content
    assert response.headers["X-Request-ID"]  # the middleware ran
    assert _per_middleware(crossings) == [], crossings
    assert len(crossings) <= MOST_CROSSINGS, crossings


def test_execute_and_its_async_view_cross_no_more(tenant_a, crossings):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    body = {"agent": "bot", "tool": "datetime", "args": {}}
    post = async_to_sync(AsyncClient().post)
    response = post("/api/v1/runtime/execute", body, content_type="application/json", headers=_auth(tenant_a))
    assert response.status_code == 200, response.content
    assert response.json()["is_error"] is False, response.json()
    assert response.headers["X-Request-ID"]
    assert _per_middleware(crossings) == [], crossings
    assert len(crossings) <= MOST_CROSSINGS, crossings
