"""Which registered binaries a command names, for one agent and user (SPEC B §5.2 and the gate of §5.3).

One bounded query answers both questions ``exec`` asks before it runs anything:

* **routing**: is the first word a binary this agent reaches? Reachable means enabled, in the tenant,
  and either global (unless the agent's grant of it is disabled) or not global with an enabled grant;
* **the gate**: which of the programs the command would run (through ``sh -c``, ``env`` …) are
  registered, enabled, not global, and not granted to this agent?

Grant overrides replace the binary's settings when set; a user's own environment overrides the
binary's and the grant's, variable by variable. Each lookup runs with a 2-second statement timeout; any
database error raises :class:`LookupUnavailable`, and callers refuse the command (fail closed).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db import DatabaseError, connection, transaction
from django.db.models import OuterRef, Subquery

from apps.secure_cli.models import SecureCLIAgentGrant, SecureCLIBinary, SecureCLIUserCredential

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

STATEMENT_TIMEOUT_MS = 2000
SYNTHETIC_USERS = frozenset({"", "system"})
DEFAULT_TIMEOUT_SECONDS = 30


class LookupUnavailable(Exception):
    """The registry of credentialed CLIs could not be read (database error or timeout)."""


def normalize_name(word: str) -> str:
    """B §5.2: lower-case, trimmed, base name (``/usr/bin/GH`` → ``gh``)."""
    return os.path.basename(word.strip().lower())


def reachable(binary: SecureCLIBinary, grant: SecureCLIAgentGrant | None) -> bool:
    """B §5.2 with an agent: a global binary unless its grant is disabled; a restricted one only with
    an enabled grant."""
    if not binary.enabled:
        return False
    if binary.is_global:
        return grant is None or grant.enabled
    return grant is not None and grant.enabled


@dataclass(frozen=True)
class ResolvedCLI:
    """A binary as one agent (and user) runs it: the effective settings and where each came from."""

    binary: SecureCLIBinary
    grant: SecureCLIAgentGrant | None
    deny_args: tuple[str, ...]
    deny_verbose: tuple[str, ...]
    timeout_seconds: int
    tips: str
    env: dict[str, str] = field(repr=False)
    env_sources: dict[str, str]  # variable name -> "binary" | "grant" | "user"
    sources: dict[str, str]  # setting -> "binary" | "grant"

    @property
    def name(self) -> str:
        return self.binary.binary_name


def resolve(
    binary: SecureCLIBinary, grant: SecureCLIAgentGrant | None, user_env: dict[str, str] | None = None
) -> ResolvedCLI:
    """The effective settings of ``binary`` under ``grant`` and a user's environment."""
    sources: dict[str, str] = {}

    def pick(setting: str, default: object, override: object) -> object:
        if grant is not None and override is not None:
            sources[setting] = "grant"
            return override
        sources[setting] = "binary"
        return default

    deny_args = pick("deny_args", binary.deny_args, grant.deny_args if grant else None)
    deny_verbose = pick("deny_verbose", binary.deny_verbose, grant.deny_verbose if grant else None)
    timeout = pick("timeout_seconds", binary.timeout_seconds, grant.timeout_seconds if grant else None)
    tips = pick("tips", binary.tips, grant.tips if grant else None)
    env: dict[str, str] = {}
    env_sources: dict[str, str] = {}
    layers: list[tuple[str, dict[str, str]]] = [("binary", binary.env)]
    if grant is not None:
        layers.append(("grant", grant.env))
    if user_env:
        layers.append(("user", user_env))
    for source, values in layers:
        for name, value in values.items():
            env[name] = value
            env_sources[name] = source
    seconds = timeout if isinstance(timeout, int) and timeout > 0 else DEFAULT_TIMEOUT_SECONDS
    return ResolvedCLI(
        binary=binary,
        grant=grant,
        deny_args=tuple(deny_args if isinstance(deny_args, list) else []),
        deny_verbose=tuple(deny_verbose if isinstance(deny_verbose, list) else []),
        timeout_seconds=seconds,
        tips=str(tips or ""),
        env=env,
        env_sources=env_sources,
        sources=sources,
    )


@contextmanager
def _bounded() -> Iterator[None]:
    """A transaction whose statements give up after :data:`STATEMENT_TIMEOUT_MS` (the previous limit is
    put back for an enclosing transaction); database errors become :class:`LookupUnavailable`."""
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT current_setting('statement_timeout'), set_config('statement_timeout', %s, true)",
                    [f"{STATEMENT_TIMEOUT_MS}ms"],
                )
                row = cursor.fetchone()
            yield
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('statement_timeout', %s, true)", [row[0] if row else "0"])
    except DatabaseError as exc:
        raise LookupUnavailable(str(exc)) from exc


@dataclass(frozen=True)
class Scan:
    """What the registry says about one command."""

    route: ResolvedCLI | None  # the first word is a binary this agent reaches
    ungranted: tuple[str, ...]  # programs of the command that are restricted and not granted


def _user_env(tenant: Tenant, binary: SecureCLIBinary, user_id: str) -> dict[str, str] | None:
    if user_id in SYNTHETIC_USERS:
        return None
    row = (
        SecureCLIUserCredential.objects.for_tenant(tenant)
        .filter(binary_id=binary.pk, user_id=user_id)
        .only("env_encrypted")
        .first()
    )
    return row.env if row is not None else None


def scan(*, tenant: Tenant, agent: Agent, first: str, programs: Iterable[str], user_id: str = "") -> Scan:
    """Look ``first`` (the command's first word) and ``programs`` (every program the command would run)
    up at once. Raises :class:`LookupUnavailable` when the registry cannot be read."""
    first = normalize_name(first) if first else ""
    names = {normalize_name(p) for p in programs if p} | ({first} if first else set())
    names.discard("")
    if not names:
        return Scan(route=None, ungranted=())
    try:
        with _bounded():
            binaries = list(
                SecureCLIBinary.objects.for_tenant(tenant).filter(binary_name__in=sorted(names), enabled=True)
            )
            grants: dict[object, SecureCLIAgentGrant] = {}
            if binaries:
                grants = {
                    g.binary_id: g
                    for g in SecureCLIAgentGrant.objects.for_tenant(tenant).filter(
                        binary_id__in=[b.pk for b in binaries], agent_id=agent.pk
                    )
                }
            route: ResolvedCLI | None = None
            for binary in binaries:
                grant = grants.get(binary.pk)
                if binary.binary_name == first and reachable(binary, grant):
                    route = resolve(binary, grant, _user_env(tenant, binary, user_id))
    except (ValueError, TypeError) as exc:  # an environment that cannot be decrypted or read
        raise LookupUnavailable(f"credentials unreadable: {type(exc).__name__}") from None
    ungranted = tuple(
        sorted(
            b.binary_name
            for b in binaries
            if not b.is_global and not reachable(b, grants.get(b.pk)) and b.binary_name in names
        )
    )
    return Scan(route=route, ungranted=ungranted)


def reachable_tips(*, tenant: Tenant, agent: Agent) -> list[tuple[str, str]]:
    """(binary name, tips) of every binary ``agent`` reaches, by name, in one query: what agents are
    told about their credentialed CLIs."""
    grants = SecureCLIAgentGrant.objects.for_tenant(tenant).filter(
        binary_id=OuterRef("pk"), agent_id=agent.pk
    )
    rows = (
        SecureCLIBinary.objects.for_tenant(tenant)
        .filter(enabled=True)
        .annotate(
            grant_enabled=Subquery(grants.values("enabled")[:1]),
            grant_tips=Subquery(grants.values("tips")[:1]),
        )
        .order_by("binary_name")
        .values_list("binary_name", "tips", "is_global", "grant_enabled", "grant_tips")
    )
    result = []
    for name, tips, is_global, grant_enabled, grant_tips in rows:
        has_grant = grant_enabled is not None
        if (is_global and (not has_grant or grant_enabled)) or (not is_global and grant_enabled):
            result.append((name, grant_tips if grant_tips is not None else tips))
    return result
