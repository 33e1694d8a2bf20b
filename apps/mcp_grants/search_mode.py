"""Search mode for agents with many MCP tools (SPEC B §3.3): past :data:`THRESHOLD` tools, listings
defer them behind one tool, ``mcp_tool_search``, and a search activates what it finds.

* The policy universe holds ``mcp_tool_search`` (in the groups ``mcp``) whenever the agent reaches more
  than :data:`THRESHOLD` MCP tools, so a policy allows it with the MCP tools (``group:mcp``) or by name.
* When it is allowed, a listing shows it instead of the MCP tools, plus the ones a search activated for
  this agent, user and session; when it is not, every allowed MCP tool is listed as before.
* Searching ranks the tools the agent may call (never others) with BM25 over the English stems of
  their names and descriptions, answers the best ones with their full definitions (an agent can call
  them at once), and activates them for :data:`ACTIVATION_SECONDS` in the shared cache (every process
  sees them).
* Deferred tools stay callable by name: search mode changes what is listed, not what is allowed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container, Iterable
from typing import TYPE_CHECKING, Any

import snowballstemmer
from django.core.cache import cache
from rank_bm25 import BM25Okapi

from apps.mcp_grants import naming, selectors
from apps.toolkit.results import ToolResult

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant
    from apps.toolkit.context import CallContext

TOOL_NAME = "mcp_tool_search"
THRESHOLD = 40  # more MCP tools than this: search mode
ACTIVATION_SECONDS = 3600
MAX_ACTIVE = 200  # activated tools kept per agent, user and session
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
MAX_QUERY_CHARS = 500
DEFINITION: dict[str, Any] = {
    "name": TOOL_NAME,
    "description": (
        "Find tools of this agent's MCP servers by what they do. Many MCP tools are available but not "
        'listed; search with a few words ("convert currency", "create issue"), then call a tool found '
        "by its name."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What the tool should do.",
                "maxLength": MAX_QUERY_CHARS,
            },
            "limit": {
                "type": "integer",
                "description": f"How many tools (default {DEFAULT_LIMIT}).",
                "minimum": 1,
                "maximum": MAX_LIMIT,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
}
_WORD = re.compile(r"[a-z0-9]+")


def is_mcp(name: str, unprefixed: Container[str] = ()) -> bool:
    """Whether ``name`` is an MCP tool's: prefixed, or one of ``unprefixed`` (the own names of the
    tenant's unprefixed servers' tools, ``selectors.unprefixed_tools``)."""
    return naming.split(name) is not None or name in unprefixed


def active(names: Iterable[str], unprefixed: Container[str] = ()) -> bool:
    """Whether these (allowed, reachable) names put an agent in search mode."""
    return sum(1 for name in names if is_mcp(name, unprefixed)) > THRESHOLD


def _key(tenant: Tenant, agent: Agent, user_id: str, session_key: str) -> str:
    digest = hashlib.sha256(f"{user_id}\x1f{session_key}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"mcp-search:{tenant.pk}:{agent.pk}:{digest}"


def activated(tenant: Tenant, agent: Agent, user_id: str, session_key: str) -> set[str]:
    value = cache.get(_key(tenant, agent, user_id, session_key))
    return set(value) if isinstance(value, list) else set()


def activate(tenant: Tenant, agent: Agent, user_id: str, session_key: str, names: Iterable[str]) -> None:
    current = activated(tenant, agent, user_id, session_key)
    merged = sorted(current | set(names))[:MAX_ACTIVE]
    cache.set(_key(tenant, agent, user_id, session_key), merged, ACTIVATION_SECONDS)


def listed(names: list[str], *, tenant: Tenant, agent: Agent, user_id: str, session_key: str) -> list[str]:
    """The allowed external ``names`` a listing shows: in search mode (more than THRESHOLD MCP tools
    and the search tool allowed) the search tool and the activated MCP tools; otherwise all of them but
    the search tool."""
    unprefixed = selectors.unprefixed_tools(tenant)
    if TOOL_NAME in names and active(names, unprefixed):
        keep = activated(tenant, agent, user_id, session_key)
        return [n for n in names if not is_mcp(n, unprefixed) or n in keep]
    return [n for n in names if n != TOOL_NAME]


_STEMMER = snowballstemmer.stemmer("english")


def _words(text: str) -> list[str]:
    """Lower-case words reduced to their English stems ("currencies" and "currency" meet)."""
    return list(_STEMMER.stemWords(_WORD.findall(text.lower())))


def rank(query: str, definitions: list[dict[str, Any]], limit: int) -> list[tuple[dict[str, Any], float]]:
    """The ``definitions`` that match ``query`` best (BM25 over name and description), best first;
    only those sharing at least one word with the query."""
    wanted = _words(query)
    if not wanted or not definitions:
        return []
    documents = [_words(f"{d['name'].replace('__', ' ')} {d.get('description', '')}") for d in definitions]
    scores = BM25Okapi(documents).get_scores(wanted)
    ranked = sorted(
        (
            (definition, float(score), set(words) & set(wanted))
            for definition, score, words in zip(definitions, scores, documents, strict=True)
        ),
        key=lambda item: (-item[1], str(item[0]["name"])),
    )
    return [(definition, score) for definition, score, shared in ranked if shared][:limit]


def run(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """``mcp_tool_search``: the best matching tools this agent may call, activated for its session."""
    from apps.mcp_grants.bridge import definitions, reachable_names

    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return ToolResult.error("query is required: a few words on what the tool should do.")
    if len(query) > MAX_QUERY_CHARS:
        return ToolResult.error(f"query is longer than {MAX_QUERY_CHARS} characters; use a few words.")
    limit = args.get("limit", DEFAULT_LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        return ToolResult.error(f"limit must be a whole number from 1 to {MAX_LIMIT}.")
    names = reachable_names(ctx.tenant, ctx.agent, ctx.user_id)
    if ctx.allowed is not None:  # never offer (or activate) what the policy takes from this call
        permitted = set(ctx.allowed)
        names = [name for name in names if name in permitted]
    found = rank(query, definitions(ctx.tenant, names), limit)
    if not found:
        return ToolResult.ok(
            f"No MCP tool matches {query!r}. Try other words (what the tool does, or the service's name).",
            tools=[],
        )
    activate(ctx.tenant, ctx.agent, ctx.user_id, ctx.session_key, [d["name"] for d, _ in found])
    lines = [f"{len(found)} tool(s) found and activated; call them by name:"]
    for definition, score in found:
        lines.append(f"- {definition['name']}: {definition.get('description', '')} (score {score:.2f})")
    return ToolResult.ok(
        "\n".join(lines),
        tools=[{**definition, "score": round(score, 3)} for definition, score in found],
    )
