"""Every write of policy documents: save, delete, rollback, import. Each is atomic, writes a version,
an audit event and a live ``policy`` event, and raises the tenant's ``config_version`` so that every
process's engine cache stops serving the old result the moment the change commits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.audit.services import record
from apps.policy import documents as docs
from apps.policy import selectors
from apps.policy.models import PolicyDocument, PolicyVersion, Scope
from apps.policy.universe import universe_for
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent, Tenant
from apps.tenants.services import config_changed

EXPORT_FORMAT = 1
MAX_CHANNEL = 100
MAX_CHAT = 200


def invalid(exc: docs.PolicyInvalid) -> ServiceError:
    return ServiceError(ErrorCode.INVALID, str(exc), details=exc.errors)


@dataclass(frozen=True)
class Target:
    """One policy scope: the tenant, an agent, or a channel (with an optional chat)."""

    scope: str
    agent: Agent | None = None
    channel: str = ""
    chat_id: str = ""

    @property
    def label(self) -> str:
        if self.scope == Scope.AGENT and self.agent is not None:
            return f"agent {self.agent.key}"
        if self.scope == Scope.CHANNEL:
            return f"channel {self.channel}" + (f" chat {self.chat_id}" if self.chat_id else "")
        return "tenant"

    def data(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "agent": self.agent.key if self.agent is not None else None,
            "channel": self.channel or None,
            "chat_id": self.chat_id or None,
        }


def target(scope: str, *, agent: Agent | None = None, channel: str = "", chat_id: str = "") -> Target:
    """A checked target (the API and the dashboard build theirs through this)."""
    if scope == Scope.TENANT:
        return Target(Scope.TENANT)
    if scope == Scope.AGENT:
        if agent is None:
            raise ServiceError(ErrorCode.INVALID, "An agent policy needs an agent.")
        return Target(Scope.AGENT, agent=agent)
    if scope == Scope.CHANNEL:
        channel, chat_id = channel.strip(), chat_id.strip()
        if not channel or len(channel) > MAX_CHANNEL or not channel.isprintable() or "/" in channel:
            raise ServiceError(
                ErrorCode.INVALID, f"A channel name has 1 to {MAX_CHANNEL} printable characters and no '/'."
            )
        if len(chat_id) > MAX_CHAT or not chat_id.isprintable():
            raise ServiceError(ErrorCode.INVALID, f"A chat id has at most {MAX_CHAT} printable characters.")
        return Target(Scope.CHANNEL, channel=channel, chat_id=chat_id)
    raise ServiceError(ErrorCode.INVALID, f"Unknown scope {scope!r}; use tenant, agent or channel.")


def _rows(tenant: Tenant, t: Target) -> Any:
    rows = PolicyDocument.objects.for_tenant(tenant).filter(scope=t.scope)
    if t.scope == Scope.AGENT:
        assert t.agent is not None
        rows = rows.filter(agent_id=t.agent.pk)
    elif t.scope == Scope.CHANNEL:
        rows = rows.filter(channel=t.channel, chat_id=t.chat_id)
    return rows


def current(tenant: Tenant, t: Target) -> PolicyDocument | None:
    return _rows(tenant, t).first()  # type: ignore[no-any-return]


def check(tenant: Tenant, t: Target, document: Any) -> docs.Checked:
    """Validate ``document`` for ``t`` against every tool the tenant has (raises ``ServiceError``)."""
    try:
        return docs.check(t.scope, document, universe_for(tenant))
    except docs.PolicyInvalid as exc:
        raise invalid(exc) from None


@dataclass
class Saved:
    policy: PolicyDocument | None
    version: PolicyVersion | None  # None: nothing changed
    warnings: list[str] = field(default_factory=list)


class PolicyChanged(Exception):
    """A save refused because the scope got a new version since its editor was opened on ``base``;
    ``newer`` is the scope's latest version."""

    def __init__(self, newer: PolicyVersion) -> None:
        super().__init__(f"The policy changed since it was opened (now version {newer.number}).")
        self.newer = newer


def _lock(tenant: Tenant) -> None:
    """Serialise saves of one tenant's policy (version numbers, read-modify-write of documents)."""
    Tenant.objects.select_for_update().filter(pk=tenant.pk).values_list("pk", flat=True).get()


def _write(actor: Actor, t: Target, new: dict[str, Any] | None, *, note: str) -> PolicyVersion | None:
    """Store ``new`` (None deletes) for ``t`` with its version; no version when nothing changes."""
    tenant = actor.tenant
    _lock(tenant)
    row = current(tenant, t)
    before = row.document if row is not None else None
    if before == new:
        return None
    number = selectors.latest_number(tenant=tenant, target=t) + 1
    change = docs.diff(before, new)
    if new is None:
        if row is not None:
            _rows(tenant, t).delete()
    elif row is None:
        PolicyDocument.objects.create(
            tenant=tenant,
            scope=t.scope,
            agent=t.agent,
            channel=t.channel,
            chat_id=t.chat_id,
            document=new,
            version=number,
        )
    else:
        _rows(tenant, t).update(document=new, version=number, updated_at=timezone.now())
    version = PolicyVersion.objects.create(
        tenant=tenant,
        scope=t.scope,
        agent=t.agent,
        agent_key=t.agent.key if t.agent is not None else "",
        channel=t.channel,
        chat_id=t.chat_id,
        number=number,
        document=new,
        diff=change,
        note=note[:200],
        author_kind=actor.kind,
        author_id=actor.id,
        author_label=actor.label[:200],
    )
    data = {**t.data(), "version": number, "note": note, "changes": change}
    verb = "policy.deleted" if new is None else "policy.updated"
    record(actor=actor, verb=verb, target_type="policy", target_id=str(version.pk), data=data)
    events.publish(tenant=tenant, topic="policy", type=verb, data=data)
    config_changed(tenant)
    return version


@transaction.atomic
def policy_save(
    actor: Actor, t: Target, document: Any, *, note: str = "", base_version: int | None = None
) -> Saved:
    """Replace ``t``'s policy with ``document`` (validated; unknown names refused with suggestions).

    With ``base_version`` (the version an editor was opened on), :class:`PolicyChanged` refuses the save
    when the scope has a newer one: under the policy lock, so no other save can land between this check
    and this save."""
    if base_version is not None:
        _lock(actor.tenant)
        if selectors.latest_number(tenant=actor.tenant, target=t) != base_version:
            versions = selectors.versions_of(tenant=actor.tenant, target=t).order_by("-number")
            raise PolicyChanged(versions[0])
    checked = check(actor.tenant, t, document)
    version = _write(actor, t, checked.document, note=note)
    return Saved(policy=current(actor.tenant, t), version=version, warnings=checked.warnings)


@transaction.atomic
def policy_delete(actor: Actor, t: Target) -> Saved:
    """Remove ``t``'s policy (the scope then adds no rules); the deletion is a version too."""
    if current(actor.tenant, t) is None:
        raise ServiceError(ErrorCode.NOT_FOUND, f"The {t.label} has no policy.", status=404)
    version = _write(actor, t, None, note="deleted")
    return Saved(policy=None, version=version)


@transaction.atomic
def policy_rollback(actor: Actor, version: PolicyVersion) -> Saved:
    """Make ``version``'s document the current one again, as a new version (checked again: a tool
    it named may have gone since)."""
    agent: Agent | None = None
    if version.scope == Scope.AGENT:
        agent = selectors.version_agent(tenant=actor.tenant, version=version)
        if agent is None:
            raise ServiceError(
                ErrorCode.CONFLICT,
                f"Agent {version.agent_key!r} no longer exists; its policy cannot be restored.",
                status=409,
            )
    t = target(version.scope, agent=agent, channel=version.channel, chat_id=version.chat_id)
    note = f"rollback to v{version.number}"
    if version.document is None:
        if current(actor.tenant, t) is None:
            return Saved(policy=None, version=None)
        return Saved(policy=None, version=_write(actor, t, None, note=note))
    checked = check(actor.tenant, t, version.document)
    saved = _write(actor, t, checked.document, note=note)
    return Saved(policy=current(actor.tenant, t), version=saved, warnings=checked.warnings)


# --- Export and import -----------------------------------------------------------------------------------


def policy_export(tenant: Tenant) -> dict[str, Any]:
    """The tenant's whole policy as one document (what ``policy_import`` takes)."""
    tenant_doc: dict[str, Any] | None = None
    agents: dict[str, Any] = {}
    channels: list[dict[str, Any]] = []
    rows = (
        PolicyDocument.objects.for_tenant(tenant)
        .select_related("agent")
        .order_by("scope", "channel", "chat_id")
    )
    for row in rows:
        if row.scope == Scope.TENANT:
            tenant_doc = row.document
        elif row.scope == Scope.AGENT and row.agent is not None:
            agents[row.agent.key] = row.document
        elif row.scope == Scope.CHANNEL:
            channels.append({"channel": row.channel, "chat_id": row.chat_id, **row.document})
    return {
        "format": EXPORT_FORMAT,
        "tenant": tenant_doc or {},
        "agents": dict(sorted(agents.items())),
        "channels": channels,
    }


@dataclass
class Imported:
    changed: list[str]  # labels of the scopes that got a new version
    warnings: list[str]


@transaction.atomic
def policy_import(actor: Actor, bundle: Any) -> Imported:
    """Replace the tenant's whole policy with ``bundle`` (the export format). Everything is validated
    first; on any error nothing changes. Scopes absent from the bundle lose their policy."""
    tenant = actor.tenant
    if not isinstance(bundle, dict):
        raise ServiceError(ErrorCode.INVALID, "The policy must be a JSON object.")
    unknown = sorted(set(bundle) - {"format", "tenant", "agents", "channels"})
    errors: dict[str, list[str]] = {}
    if unknown:
        errors["document"] = [f"Unknown keys: {', '.join(unknown)}; use format, tenant, agents and channels."]
    version = bundle.get("format", EXPORT_FORMAT)
    if isinstance(version, bool) or version != EXPORT_FORMAT:
        errors["format"] = [f"Unsupported format; this server reads format {EXPORT_FORMAT}."]
    universe = universe_for(tenant)
    planned: list[tuple[Target, dict[str, Any]]] = []
    warnings: list[str] = []

    def checked(path: str, t: Target, document: Any) -> None:
        try:
            result = docs.check(t.scope, document, universe)
        except docs.PolicyInvalid as exc:
            for key, messages in exc.errors.items():
                errors.setdefault(f"{path}.{key}", []).extend(messages)
            return
        planned.append((t, result.document))
        warnings.extend(f"{path}: {w}" for w in result.warnings)

    tenant_document = bundle.get("tenant")
    checked("tenant", Target(Scope.TENANT), {} if tenant_document is None else tenant_document)
    agents = bundle.get("agents")
    if agents is None:
        agents = {}
    elif not isinstance(agents, dict):
        errors["agents"] = ["Must be an object of agent key -> policy."]
        agents = {}
    known = {a.key: a for a in Agent.objects.for_tenant(tenant).filter(key__in=list(agents)[:10_000])}
    for key, document in agents.items():
        if key not in known:
            errors.setdefault(f"agents.{key}", []).append("No agent with this key in this tenant.")
            continue
        checked(f"agents.{key}", Target(Scope.AGENT, agent=known[key]), document)
    channels = bundle.get("channels")
    if channels is None:
        channels = []
    elif not isinstance(channels, list):
        errors["channels"] = ["Must be a list of channel policies."]
        channels = []
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(channels):
        path = f"channels[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("channel"), str):
            errors.setdefault(path, []).append('Must be an object with "channel" (and optionally "chat_id").')
            continue
        chat = entry.get("chat_id") or ""
        if not isinstance(chat, str):
            errors.setdefault(f"{path}.chat_id", []).append("Must be a string.")
            continue
        try:
            t = target(Scope.CHANNEL, channel=entry["channel"], chat_id=chat)
        except ServiceError as exc:
            errors.setdefault(path, []).append(exc.message)
            continue
        if (t.channel, t.chat_id) in seen:
            errors.setdefault(path, []).append("This channel and chat appear twice.")
            continue
        seen.add((t.channel, t.chat_id))
        checked(path, t, {k: v for k, v in entry.items() if k not in ("channel", "chat_id")})
    if errors:
        first, messages = next(iter(errors.items()))
        raise ServiceError(ErrorCode.INVALID, f"{first}: {messages[0]}", details=errors)

    changed: list[str] = []
    for t, document in planned:
        # An empty tenant document and no document at all mean the same: keep it absent.
        new = document if (document or t.scope != Scope.TENANT or current(tenant, t) is not None) else None
        if new is None and current(tenant, t) is None:
            continue
        if _write(actor, t, new, note="import") is not None:
            changed.append(t.label)
    planned_keys = {(t.scope, t.agent.pk if t.agent else None, t.channel, t.chat_id) for t, _ in planned}
    for row in PolicyDocument.objects.for_tenant(tenant).select_related("agent"):
        if (row.scope, row.agent_id, row.channel, row.chat_id) in planned_keys:
            continue
        t = Target(row.scope, agent=row.agent, channel=row.channel, chat_id=row.chat_id)
        if _write(actor, t, None, note="import") is not None:
            changed.append(t.label)
    record(
        actor=actor,
        verb="policy.imported",
        target_type="tenant",
        target_id=str(tenant.pk),
        data={"changed": changed, "warnings": warnings[:50]},
    )
    return Imported(changed=changed, warnings=warnings)
