"""Access to one MCP server, grant, per-user credential or access request inside the actor's tenant: a
missing object and another tenant's give the same 404 (and so does a request the actor may not see)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.http import Http404

from apps.mcp_grants.models import AccessRequest, AgentGrant, MCPServer, UserCredential, UserGrant
from apps.mcp_grants.selectors import agent_grants, credential_list, user_grants, visible_requests

if TYPE_CHECKING:
    from apps.tenants.actors import Actor


def access_server(*, actor: Actor, name: str) -> MCPServer:
    server = MCPServer.objects.for_tenant(actor.tenant).filter(name=name).first()
    if server is None:
        raise Http404("No MCP server with this name.")
    return server


def access_agent_grant(*, actor: Actor, server: MCPServer, agent_key: str) -> AgentGrant:
    grant = agent_grants(tenant=actor.tenant, server=server).filter(agent__key=agent_key).first()
    if grant is None:
        raise Http404("This agent has no grant of this server.")
    return grant


def access_user_grant(*, actor: Actor, server: MCPServer, user_id: str) -> UserGrant:
    grant = user_grants(tenant=actor.tenant, server=server).filter(user_id=user_id).first()
    if grant is None:
        raise Http404("This user has no grant of this server.")
    return grant


def access_credential(*, actor: Actor, server: MCPServer, user_id: str) -> UserCredential:
    credential = credential_list(tenant=actor.tenant, server=server).filter(user_id=user_id).first()
    if credential is None:
        raise Http404("This user has no credentials of their own for this server.")
    return credential


def access_request(*, actor: Actor, id: object) -> AccessRequest:
    """One request for an administrator or for the actor that made it; 404 for anyone else."""
    try:
        pk = uuid.UUID(str(id))
    except ValueError:
        raise Http404("No access request with this id.") from None
    req = visible_requests(actor).filter(pk=pk).first()
    if req is None:
        raise Http404("No access request with this id.")
    return req
