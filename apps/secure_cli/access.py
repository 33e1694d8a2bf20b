"""Access to one credentialed CLI, agent grant or user credential inside the actor's tenant: a missing
object and another tenant's give the same 404."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.http import Http404

from apps.secure_cli.models import SecureCLIAgentGrant, SecureCLIBinary, SecureCLIUserCredential
from apps.secure_cli.selectors import credential_list, grant_list

if TYPE_CHECKING:
    from apps.tenants.actors import Actor


def access_binary(*, actor: Actor, id: object) -> SecureCLIBinary:
    try:
        pk = uuid.UUID(str(id))
    except ValueError:
        raise Http404("No credentialed CLI with this id.") from None
    binary = SecureCLIBinary.objects.for_tenant(actor.tenant).filter(pk=pk).first()
    if binary is None:
        raise Http404("No credentialed CLI with this id.")
    return binary


def access_grant(*, actor: Actor, binary: SecureCLIBinary, agent_key: str) -> SecureCLIAgentGrant:
    grant = grant_list(tenant=actor.tenant, binary=binary).filter(agent__key=agent_key).first()
    if grant is None:
        raise Http404("This agent has no grant of this CLI.")
    return grant


def access_credential(*, actor: Actor, binary: SecureCLIBinary, user_id: str) -> SecureCLIUserCredential:
    credential = credential_list(tenant=actor.tenant, binary=binary).filter(user_id=user_id).first()
    if credential is None:
        raise Http404("This user has no credentials for this CLI.")
    return credential
