"""Reads of custom tools, always within one tenant (one tool for a request: ``apps.custom_tools.access``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import F, Q

from apps.custom_tools.models import CustomTool
from apps.tenants.scoping import TenantQuerySet

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

GLOBAL = "global"
AGENT = "agent"


def custom_tool_list(
    *,
    tenant: Tenant,
    agent: Agent | None = None,
    scope: str | None = None,
    enabled: bool | None = None,
    name: str | None = None,
) -> TenantQuerySet[CustomTool]:
    """The tenant's tools by name (global ones before an agent's of the same name); ``agent``: that
    agent's own tools, ``scope``: ``global`` or ``agent`` (any agent's)."""
    tools = CustomTool.objects.for_tenant(tenant).select_related("agent")
    if agent is not None:
        tools = tools.filter(agent_id=agent.pk)
    if scope == GLOBAL:
        tools = tools.filter(agent__isnull=True)
    elif scope == AGENT:
        tools = tools.filter(agent__isnull=False)
    if enabled is not None:
        tools = tools.filter(enabled=enabled)
    if name:
        tools = tools.filter(name=name)
    return tools.order_by("name", "agent__key", "id")


def effective_tools(*, tenant: Tenant, agent: Agent | None) -> dict[str, CustomTool]:
    """The enabled tools ``agent`` has, by name: the global ones, each overridden by an enabled tool of
    the agent's own with the same name. With ``agent`` None: the enabled global tools."""
    scope = Q(agent__isnull=True) if agent is None else Q(agent__isnull=True) | Q(agent_id=agent.pk)
    rows = (
        CustomTool.objects.for_tenant(tenant)
        .filter(scope, enabled=True)
        .order_by(F("agent_id").asc(nulls_first=True), "name")
    )
    # Global rows come first, so an agent's own tool replaces the global one of its name.
    return {tool.name: tool for tool in rows}


def all_names(*, tenant: Tenant) -> list[str]:
    """Every custom tool name of the tenant, enabled or not, any scope (what a policy may name)."""
    return sorted(set(CustomTool.objects.for_tenant(tenant).values_list("name", flat=True)))


def tenant_names(tenant: Tenant) -> list[str]:
    """The names of the tenant's custom tools (an MCP server's tools may not take them)."""
    return all_names(tenant=tenant)
