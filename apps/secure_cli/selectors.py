"""Reads of credentialed CLIs, always within one tenant (one of them for a request:
``apps.secure_cli.access``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from apps.secure_cli import lookup
from apps.secure_cli.models import SecureCLIAgentGrant, SecureCLIBinary, SecureCLIUserCredential
from apps.tenants.scoping import TenantQuerySet

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant


def binary_list(*, tenant: Tenant) -> TenantQuerySet[SecureCLIBinary]:
    return SecureCLIBinary.objects.for_tenant(tenant).order_by("binary_name", "id")


def grant_list(*, tenant: Tenant, binary: SecureCLIBinary) -> TenantQuerySet[SecureCLIAgentGrant]:
    return (
        SecureCLIAgentGrant.objects.for_tenant(tenant)
        .filter(binary_id=binary.pk)
        .select_related("binary", "agent")
        .order_by("agent__key", "id")
    )


def credential_list(*, tenant: Tenant, binary: SecureCLIBinary) -> TenantQuerySet[SecureCLIUserCredential]:
    return (
        SecureCLIUserCredential.objects.for_tenant(tenant)
        .filter(binary_id=binary.pk)
        .select_related("binary")
        .order_by("user_id", "id")
    )


def guidance(*, tenant: Tenant, agent: Agent) -> str:
    """TOOLS.md-style guidance on the credentialed CLIs ``agent`` reaches (one query), or "" if none."""
    reachable = lookup.reachable_tips(tenant=tenant, agent=agent)
    if not reachable:
        return ""
    lines = [
        "## Credentialed CLIs",
        "",
        "These programs run through `exec` with credentials that Toolgate injects (you never see them).",
        "Call each directly as the first word of the command, without pipes, redirections, chains,",
        "`$(…)` or `sh -c`; put arguments that contain such characters in quotes.",
    ]
    for name, tips in reachable:
        lines += ["", f"### {name}"]
        if tips.strip():
            lines.append(tips.strip())
    return "\n".join(lines)
