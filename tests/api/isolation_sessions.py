"""Tenant-isolation cases for the sessions routes (merged into ``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from apps.accounts import services as tenant_services
from apps.sessions import services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case


def make_session(tenant: Tenant, prefix: str = "secret") -> dict[str, str]:
    """An agent of ``tenant`` with a session holding one message; returns the session's id."""
    system = Actor.system(tenant)
    agent = tenant_services.agent_create(actor=system, key=f"{prefix}-session-agent", name="Agent")
    session, _ = services.session_open(actor=system, agent=agent, key=f"{prefix}-key", user_id="alice")
    services.message_append(
        actor=system, session=session, role="user", content=f"{prefix} words", source="api"
    )
    return {"pk": str(session.pk)}


CASES: dict[str, Case] = {
    "session-list": Case(make=make_session, collection=True),
    "session-detail": Case(make=make_session, writes=[("patch", {"label": "hijacked"}), ("delete", None)]),
    "session-message-list": Case(
        make=make_session, writes=[("post", {"role": "user", "content": "hijacked"})]
    ),
}
