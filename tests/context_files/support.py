"""Agents with context files, and tool calls through POST /api/v1/runtime/execute."""

from __future__ import annotations

from typing import Any

from apps.accounts import services as tenant_services
from apps.context_files import services
from apps.context_files.models import NAMES
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant

EXECUTE = "/api/v1/runtime/execute"
SHARED = ("SOUL.md", "IDENTITY.md", "AGENTS.md", "TOOLS.md")  # a predefined agent's configuration
PER_USER_PREDEFINED = ("USER.md", "BOOTSTRAP.md")


def make_agent(tenant: Tenant, key: str, type: str, *, templates: bool = True) -> Agent:
    """An agent of ``type`` whose seven files have agent-level text ``"<key> <name>"`` (``templates``)."""
    system = Actor.system(tenant)
    agent = tenant_services.agent_create(actor=system, key=key, name=key, type=type)
    if templates:
        for name in NAMES:
            services.agent_file_save(actor=system, agent=agent, name=name, content=f"{key} {name}\n")
    return agent


def give_user(tenant: Tenant, agent: Agent, user_id: str, names: tuple[str, ...] = NAMES) -> None:
    """``user_id``'s own copies: ``"<user_id> <name>"``."""
    for name in names:
        services.user_file_save(
            actor=Actor.system(tenant),
            agent=agent,
            user_id=user_id,
            name=name,
            content=f"{user_id} {name}\n",
        )


def call(client: Any, agent: str, tool: str, user_id: str = "", **args: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"agent": agent, "tool": tool, "args": args}
    if user_id:
        body["context"] = {"user_id": user_id}
    response = client.post(EXECUTE, body, format="json")
    assert response.status_code == 200, response.content
    result: dict[str, Any] = response.json()
    return result


def read(client: Any, agent: str, path: str, user_id: str = "") -> dict[str, Any]:
    return call(client, agent, "read_file", user_id, path=path)


def text_of(result: dict[str, Any]) -> str:
    """The file's text in a successful read_file answer (line numbers and the note removed)."""
    assert result["is_error"] is False, result["for_llm"]
    body = result["for_llm"].split("\n\n[", 1)[0]
    return "".join(line.split("\t", 1)[1] + "\n" for line in body.split("\n") if "\t" in line)
