"""A live socket does not outlive its credential: revoking or expiring a key, removing a member or
changing their role, and logging out close the sockets opened with it (over a real daphne)."""

from __future__ import annotations

import contextlib
from datetime import timedelta

import httpx
import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone
from django_q.tasks import async_task
from websockets.exceptions import ConnectionClosed

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.tenants.models import ApiKey, Membership
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import EventSocket, event_of, open_socket
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
CLOSE_TIMEOUT = 15.0


def connect(live: LiveProcesses, sockets: contextlib.ExitStack, **kwargs: str) -> EventSocket:
    sock = sockets.enter_context(open_socket(live.ws_url, **kwargs))
    assert sock.recv()["type"] == "hello"
    sock.subscribe(["agents"])
    return sock


def assert_closed_with(sock: EventSocket, reason: str) -> None:
    """The server says why, then closes with 4403; nothing else arrives in between."""
    message = sock.recv(timeout=CLOSE_TIMEOUT)
    assert message == {"type": "error", "code": "credentials_revoked", "message": reason, "details": {}}
    with pytest.raises(ConnectionClosed) as closed:
        sock.recv(timeout=CLOSE_TIMEOUT)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4403


def session_cookie(client: Client) -> str:
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def test_revoking_a_key_closes_its_sockets_only(live, daphne, sockets, tenant_a):
    owner_raw = factories.make_api_key(tenant_a, Role.OWNER)
    victim, victim_raw = services.api_key_create(
        actor=Actor.system(tenant_a), name="victim", role=Role.VIEWER
    )
    doomed = connect(live, sockets, api_key=victim_raw)
    bystander = connect(live, sockets, api_key=owner_raw)

    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {owner_raw}"}, timeout=10) as api:
        assert api.delete(f"/api/v1/api-keys/{victim.pk}/").status_code == 200
        assert_closed_with(doomed, "This API key was revoked.")
        # the other key's socket is untouched and still receives events
        assert api.post("/api/v1/agents/", json={"key": "after", "name": "After"}).status_code == 201
    bystander.wait_for(lambda m: event_of(m, topic="agents", type="agent.created", key="after"))


def test_a_key_expiring_in_the_worker_closes_its_sockets(live, daphne, sockets, tenant_a):
    live.qcluster()
    key, raw = services.api_key_create(
        actor=Actor.system(tenant_a),
        name="expiring",
        role=Role.VIEWER,
        expires_at=timezone.now() + timedelta(hours=1),
    )
    sock = connect(live, sockets, api_key=raw)
    ApiKey.objects.for_tenant(tenant_a).filter(pk=key.pk).update(expires_at=timezone.now())
    async_task("apps.accounts.tasks.expire_api_keys")
    assert_closed_with(sock, "This API key expired.")


def test_removing_a_member_or_changing_their_role_closes_their_sessions(live, daphne, sockets, tenant_a):
    system = Actor.system(tenant_a)
    demoted_user = factories.make_user(tenant_a, Role.ADMIN)
    removed_user = factories.make_user(tenant_a, Role.MEMBER)
    demoted, removed = Client(), Client()
    demoted.force_login(demoted_user)
    removed.force_login(removed_user)
    demoted_sock = connect(live, sockets, cookie=session_cookie(demoted), origin=daphne)
    removed_sock = connect(live, sockets, cookie=session_cookie(removed), origin=daphne)

    services.membership_update(
        actor=system,
        membership=Membership.objects.for_tenant(tenant_a).get(user=demoted_user),
        role=Role.VIEWER,
    )
    assert_closed_with(demoted_sock, "Your role in this tenant changed to viewer; reconnect.")
    services.membership_delete(
        actor=system, membership=Membership.objects.for_tenant(tenant_a).get(user=removed_user)
    )
    assert_closed_with(removed_sock, "You are no longer a member of this tenant.")

    # reconnecting gives the new role; the removed member is refused
    with open_socket(live.ws_url, cookie=session_cookie(demoted), origin=daphne) as again:
        assert again.recv()["role"] == "viewer"


def test_logout_closes_that_sessions_sockets_but_not_other_sessions(live, daphne, sockets, tenant_a):
    user = factories.make_user(tenant_a, Role.ADMIN)
    leaving, staying = Client(), Client()
    leaving.force_login(user)
    staying.force_login(user)
    leaving_sock = connect(live, sockets, cookie=session_cookie(leaving), origin=daphne)
    staying_sock = connect(live, sockets, cookie=session_cookie(staying), origin=daphne)

    with httpx.Client(base_url=daphne, timeout=10) as browser:
        browser.cookies.set(settings.SESSION_COOKIE_NAME, leaving.cookies[settings.SESSION_COOKIE_NAME].value)
        login_page = browser.get("/")  # any dashboard page sets the CSRF cookie
        assert login_page.status_code == 200
        token = browser.cookies[settings.CSRF_COOKIE_NAME]
        response = browser.post("/logout/", headers={"X-CSRFToken": token, "Referer": daphne + "/"})
        assert response.status_code == 302

    assert_closed_with(leaving_sock, "You logged out.")
    services.agent_create(actor=Actor.system(tenant_a), key="still-here", name="Still")
    staying_sock.wait_for(lambda m: event_of(m, topic="agents", type="agent.created", key="still-here"))
