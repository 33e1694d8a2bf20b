"""The dashboard's sections. A later feature (Tools, Policy, MCP, Teams) adds one entry here."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from apps.tenants.actors import Actor
from apps.tenants.roles import Role


@dataclass(frozen=True)
class Section:
    label: str
    url_name: str
    role: str
    # URL names starting with this prefix belong to the section (it is highlighted on their pages).
    prefix: str
    badge: str = ""  # a live counter shown next to the label ("approvals": pending approvals)


SECTIONS: tuple[Section, ...] = (
    Section("Overview", "dashboard:home", Role.VIEWER, "home"),
    Section("Agents", "dashboard:agents", Role.VIEWER, "agent"),
    # "tools" and "tool_call" are distinct prefixes: neither URL name starts with the other.
    Section("Tools", "dashboard:tools", Role.VIEWER, "tools"),
    Section("Policy", "dashboard:policy_tenant", Role.VIEWER, "policy"),
    Section("Runtime settings", "dashboard:runtime_settings", Role.VIEWER, "runtime"),
    Section("Teams", "dashboard:teams", Role.VIEWER, "team"),
    Section("MCP", "dashboard:mcp_servers", Role.VIEWER, "mcp"),
    Section("Custom tools", "dashboard:custom_tools", Role.VIEWER, "custom_tool"),
    Section("Credentialed CLIs", "dashboard:secure_clis", Role.VIEWER, "secure_cli"),
    Section("Skills", "dashboard:skills", Role.ADMIN, "skill"),
    Section("Sandbox", "dashboard:sandbox", Role.ADMIN, "sandbox"),
    Section("Providers", "dashboard:providers", Role.ADMIN, "provider"),
    Section("Channels", "dashboard:channels", Role.ADMIN, "channel"),
    Section("Runs", "dashboard:runs", Role.MEMBER, "runs"),
    Section("Scheduled jobs", "dashboard:cron", Role.MEMBER, "cron"),
    Section("Tool calls", "dashboard:tool_calls", Role.MEMBER, "tool_call"),
    Section("API keys", "dashboard:api_keys", Role.ADMIN, "api_key"),
    Section("Members", "dashboard:members", Role.VIEWER, "member"),
    Section("Quotas", "dashboard:quota", Role.VIEWER, "quota"),
    Section("Audit log", "dashboard:audit", Role.ADMIN, "audit"),
    Section("Approvals", "dashboard:approvals", Role.ADMIN, "approval", badge="approvals"),
)


@dataclass(frozen=True)
class NavItem:
    label: str
    url: str
    active: bool
    # A live counter's name ("" for none); the page fills it in (static/js/approvals-badge.js), so no
    # page pays a query for it.
    badge: str = ""


def nav_items(actor: Actor | None, current_url_name: str | None) -> list[NavItem]:
    """The sections ``actor`` may open (none when nobody is acting), the current one marked active."""
    if actor is None:
        return []
    current = current_url_name or ""
    return [
        NavItem(s.label, reverse(s.url_name), current.startswith(s.prefix), s.badge)
        for s in SECTIONS
        if actor.can(s.role)
    ]
