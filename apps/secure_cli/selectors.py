"""Reads of credentialed CLIs, always within one tenant. The ``access_*`` functions answer a missing
object and another tenant's with the same 404."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.http import Http404

from apps.secure_cli import lookup
from apps.secure_cli.models import SecureCLIAgentGrant, SecureCLIBinary, SecureCLIUserCredential
from apps.tenants.scoping import TenantQuerySet

if TYPE_CHECKING:
    from apps.tenants.actors import Actor
    from apps.tenants.models import Agent, Tenant


def binary_list(*, tenant: Tenant) -> TenantQuerySet[SecureCLIBinary]:
    return SecureCLIBinary.objects.for_tenant(tenant).order_by("binary_name", "id")


def access_binary(*, actor: Actor, id: object) -> SecureCLIBinary:
    try:
        pk = uuid.UUID(str(id))
    except ValueError:
        raise Http404("No credentialed CLI with this id.") from None
    binary = SecureCLIBinary.objects.for_tenant(actor.tenant).filter(pk=pk).first()
    if binary is None:
        raise Http404("No credentialed CLI with this id.")
    return binary


def grant_list(*, tenant: Tenant, binary: SecureCLIBinary) -> TenantQuerySet[SecureCLIAgentGrant]:
    return (
        SecureCLIAgentGrant.objects.for_tenant(tenant)
        .filter(binary_id=binary.pk)
        .select_related("binary", "agent")
        .order_by("agent__key", "id")
    )


def access_grant(*, actor: Actor, binary: SecureCLIBinary, agent_key: str) -> SecureCLIAgentGrant:
    grant = grant_list(tenant=actor.tenant, binary=binary).filter(agent__key=agent_key).first()
    if grant is None:
        raise Http404("This agent has no grant of this CLI.")
    return grant


def credential_list(*, tenant: Tenant, binary: SecureCLIBinary) -> TenantQuerySet[SecureCLIUserCredential]:
    return (
        SecureCLIUserCredential.objects.for_tenant(tenant)
        .filter(binary_id=binary.pk)
        .select_related("binary")
        .order_by("user_id", "id")
    )


def access_credential(*, actor: Actor, binary: SecureCLIBinary, user_id: str) -> SecureCLIUserCredential:
    credential = credential_list(tenant=actor.tenant, binary=binary).filter(user_id=user_id).first()
    if credential is None:
        raise Http404("This user has no credentials for this CLI.")
    return credential


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
