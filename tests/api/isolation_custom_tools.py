"""Tenant-isolation cases for the routes of custom tools (merged into ``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from collections.abc import Callable

from apps.accounts import services as tenant_services
from apps.custom_tools import services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case


def make_custom_tools(tenant: Tenant, prefix: str = "secret") -> dict[str, str]:
    """A global custom tool of ``tenant`` with a secret env value, and an agent with a tool of its own;
    returns their ids and the agent's key."""
    system = Actor.system(tenant)
    agent = tenant_services.agent_create(actor=system, key=f"{prefix}-tools-agent", name="Agent")
    shared = services.custom_tool_create(
        actor=system,
        name=f"{prefix}_lookup",
        description="Say a word.",
        parameters={"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
        command="echo {{.word}}",
        env={"API_TOKEN": "a-secret-env-value"},
    )
    own = services.custom_tool_create(actor=system, name=f"{prefix}_lookup", command="echo own", agent=agent)
    return {"tool": str(shared.pk), "agent_tool": str(own.pk), "agent": agent.key}


def _kwargs(**names: str) -> Callable[[Tenant], dict[str, str]]:
    """A ``Case.make`` that builds the objects and returns URL kwargs: ``kwarg=name in make_custom_tools``."""

    def make(tenant: Tenant) -> dict[str, str]:
        made = make_custom_tools(tenant)
        return {kwarg: made[name] for kwarg, name in names.items()}

    return make


CASES: dict[str, Case] = {
    "custom-tool-list": Case(make=_kwargs(pk="tool"), collection=True),
    "custom-tool-detail": Case(
        make=_kwargs(pk="tool"),
        writes=[
            ("patch", {"enabled": False, "command": "echo hijacked", "env": {"API_TOKEN": "b"}}),
            ("delete", None),
        ],
    ),
    "custom-tool-test": Case(
        make=_kwargs(pk="agent_tool"),
        writes=[("post", {}), ("post", {"agent": "secret-tools-agent", "args": {"word": "x"}})],
    ),
}
