"""Tenant-isolation cases for the routes of context files (merged into ``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from collections.abc import Callable

from apps.accounts import services as tenant_services
from apps.context_files import services
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api.isolation_support import Case


def make_context_files(tenant: Tenant, prefix: str = "secret") -> dict[str, str]:
    """A predefined agent of ``tenant`` with its own SOUL.md, and a user with a copy of USER.md whose first
    run is complete."""
    system = Actor.system(tenant)
    agent = tenant_services.agent_create(
        actor=system, key=f"{prefix}-ctx-agent", name="Agent", type=Agent.Type.PREDEFINED
    )
    services.agent_file_save(actor=system, agent=agent, name="SOUL.md", content=f"{prefix} soul text")
    user = f"{prefix}-ctx-user"
    services.user_file_save(actor=system, agent=agent, user_id=user, name="USER.md", content=f"{prefix} user")
    services.bootstrap_complete(actor=system, agent=agent, user_id=user)
    return {"key": agent.key, "user_id": user}


def _kwargs(name: str | None = None, user: bool = False) -> Callable[[Tenant], dict[str, str]]:
    def make(tenant: Tenant) -> dict[str, str]:
        made = make_context_files(tenant)
        kwargs = {"key": made["key"]}
        if user:
            kwargs["user_id"] = made["user_id"]
        if name is not None:
            kwargs["name"] = name
        return kwargs

    return make


CASES: dict[str, Case] = {
    "context-file-list": Case(make=_kwargs()),
    "context-file-detail": Case(
        make=_kwargs("SOUL.md"), writes=[("put", {"content": "hijacked"}), ("delete", None)]
    ),
    "context-file-user-list": Case(make=_kwargs(user=True)),
    "context-file-user-detail": Case(make=_kwargs("USER.md", user=True), writes=[("delete", None)]),
    "context-file-user-bootstrap": Case(make=_kwargs(user=True), writes=[("delete", None)]),
}
