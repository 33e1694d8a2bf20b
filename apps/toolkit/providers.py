"""Tools that are not in the catalog: each kind (MCP servers' tools, a tenant's custom tools, …) is a
:class:`Provider` registered here, and the pipeline and the tool listing reach them only through it.

A provider says which registered names are its own, gives their definitions for listings, and resolves
a name for one call into an :class:`ExternalTool` (its JSON Schema and how to run it), checking access
again at call time; :class:`ToolRefused` says why it may not be called. Argument handling is common:
empty optional arguments are dropped, then the arguments are validated against the tool's schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

import jsonschema

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant
    from apps.toolkit.context import CallContext
    from apps.toolkit.results import ToolResult


class ToolRefused(Exception):
    """The agent (for this user) may not call the tool now; ``reason`` is a short code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class ExternalTool:
    name: str
    schema: dict[str, Any]
    run: Callable[[CallContext, dict[str, Any]], ToolResult]


class Provider(Protocol):
    def owns(self, name: str, tenant: Tenant | None = None) -> bool:
        """Whether ``name`` is this provider's; with ``tenant``, also the names only that tenant has
        (an MCP server registered without a prefix gives its tools their own names)."""
        ...

    def definitions(
        self, tenant: Tenant, names: Iterable[str], agent: Agent | None = None
    ) -> list[dict[str, Any]]: ...

    def resolve(self, tenant: Tenant, agent: Agent, user_id: str, name: str) -> ExternalTool: ...


_PROVIDERS: list[Provider] = []


def register(provider: Provider) -> Provider:
    """Add a provider (idempotent). Earlier ones are asked first."""
    if provider not in _PROVIDERS:
        _PROVIDERS.append(provider)
    return provider


def provider_for(name: str, tenant: Tenant | None = None) -> Provider | None:
    """The provider of ``name`` (for ``tenant``: its own names count too); earlier ones first."""
    return next((p for p in _PROVIDERS if p.owns(name, tenant)), None)


def listed(names: list[str], *, tenant: Tenant, agent: Agent, user_id: str, session_key: str) -> list[str]:
    """The allowed non-catalog ``names`` a listing shows: a provider with a ``listed`` method may hold
    some back (MCP's search mode lists one search tool instead of very many tools)."""
    for provider in _PROVIDERS:
        choose = getattr(provider, "listed", None)
        if choose is not None:
            names = choose(names, tenant=tenant, agent=agent, user_id=user_id, session_key=session_key)
    return names


def not_granted(tenant: Tenant, agent: Agent, user_id: str, name: str) -> str | None:
    """Why ``name``, a tool the tenant has but ``agent`` (for ``user_id``) was not granted, cannot be
    called, and how access is asked for; None when no provider knows it so (an unknown name). A
    provider with a ``not_granted`` method answers for its own names."""
    provider = provider_for(name, tenant)
    explain = getattr(provider, "not_granted", None)
    return explain(tenant, agent, user_id, name) if explain is not None else None


def definitions(tenant: Tenant, names: Iterable[str], agent: Agent | None = None) -> list[dict[str, Any]]:
    """The definitions of these non-catalog ``names``, from their providers (one batch each); with
    ``agent``, the definitions that agent gets (a provider may serve one name differently per agent)."""
    by_provider: dict[int, tuple[Provider, list[str]]] = {}
    for name in names:
        provider = provider_for(name, tenant)
        if provider is not None:
            by_provider.setdefault(id(provider), (provider, []))[1].append(name)
    result = [
        d for provider, owned in by_provider.values() for d in provider.definitions(tenant, owned, agent)
    ]
    return sorted(result, key=lambda d: str(d["name"]))


# --- arguments ------------------------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _validator(schema_json: str) -> jsonschema.protocols.Validator | None:
    schema = json.loads(schema_json)
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
    except (jsonschema.SchemaError, TypeError):
        return None  # a schema that is not one cannot be enforced here
    return cls(schema)  # type: ignore[no-any-return]


def strip_empty_optional(schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """Arguments without the optional ones an LLM sent empty (``null`` or ``""``): a tool that
    validates strictly would refuse them, and an empty optional value means "not given"."""
    required = set(schema.get("required") or ())
    return {k: v for k, v in args.items() if k in required or (v is not None and v != "")}


def schema_error(name: str, schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    validator = _validator(json.dumps(schema, sort_keys=True, default=str))
    if validator is None:
        return None
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    messages = []
    for error in errors[:5]:
        where = ".".join(str(p) for p in error.absolute_path)
        messages.append(f"{where}: {error.message}" if where else error.message)
    properties = ", ".join(schema.get("properties") or {}) or "none"
    return f"Invalid arguments for {name}: {'; '.join(messages)}. Parameters: {properties}."


def required_parameters(schema: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(r) for r in schema.get("required") or ())


def empty_args_message(required: Sequence[str]) -> str:
    """What a model is told when it sent no arguments to a tool with ``required`` parameters."""
    return (
        f"Tool call had empty arguments (required: {', '.join(required)}). This usually means your previous "
        "response was too long and the tool call was cut off; call the tool again with its arguments."
    )
