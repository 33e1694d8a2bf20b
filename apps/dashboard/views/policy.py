"""The policy editor: the tenant's policy, each agent's, and the channel groups'; live explain of a draft;
each scope's version history with rollback.

Everyone reads; admins edit. A save goes through ``apps.policy.services.policy_save`` and is refused when
the scope got a new version since the editor was opened (the form carries that ``base`` version), so
one admin never silently overwrites another's change. The explain endpoint validates a draft and
returns what it would change for one agent and call context, without saving anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import PolicyContextForm, PolicyEditForm, PolicyTargetForm
from apps.dashboard.views.confirm import confirm_action
from apps.policy import documents as docs
from apps.policy import engine
from apps.policy import selectors as policy_selectors
from apps.policy import services as policy_services
from apps.policy.models import PolicyVersion, Scope
from apps.policy.services import Target
from apps.tenants import access
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list
from apps.tools.catalog import CATALOG

MAX_EXPLAIN_BODY = 2 * docs.MAX_DOCUMENT_BYTES
VERSIONS_SHOWN = 200

# What each key of a policy document does, for the reference next to the editor.
KEY_HELP: dict[str, str] = {
    "profile": "full, coding, messaging or minimal: the tools to start from",
    "allow": "keep only these tools (names, group:<name>, * patterns)",
    "deny": "remove these tools",
    "alsoAllow": "add these tools back, even when denied or outside the profile",
    "byProvider": 'per LLM provider: {"openai": {"allow": [...]}} (the tenant\'s may set a profile)',
    "shellDenyGroups": 'exec deny groups switched on (true) or off (false), e.g. {"package_install": false}',
    "execApproval": '{"security": deny|allowlist|full, "ask": off|on-miss|always, "allowlist": [globs]}',
    "rate_limit_per_hour": "tool calls per session key and hour (0: no limit)",
    "scrub_credentials": "remove secrets from tool results (true or false)",
    "originDeny": 'tools refused per call origin: {"comm": ["exec"]} (user, comm, app, skill, system)',
}


# --- Scopes -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """One scope as the pages show it: its target, title and URLs."""

    target: Target

    @property
    def title(self) -> str:
        t = self.target
        if t.scope == Scope.AGENT and t.agent is not None:
            return f"Policy of agent {t.agent.key}"
        if t.scope == Scope.CHANNEL:
            return f"Policy of channel {t.channel}" + (f", chat {t.chat_id}" if t.chat_id else "")
        return "Tenant policy"

    def _url(self, suffix: str = "") -> str:
        t = self.target
        if t.scope == Scope.AGENT and t.agent is not None:
            return reverse(f"dashboard:policy_agent{suffix}", args=[t.agent.key])
        if t.scope == Scope.CHANNEL:
            url = reverse(f"dashboard:policy_channel{suffix}", args=[t.channel])
            return url + (f"?{_chat_query(t.chat_id)}" if t.chat_id else "")
        return reverse(f"dashboard:policy_tenant{suffix}")

    @property
    def url(self) -> str:
        return self._url()

    @property
    def history_url(self) -> str:
        return self._url("_versions")

    @property
    def save_url(self) -> str:
        return self._url("_save")

    @property
    def delete_url(self) -> str:
        return self._url("_delete")

    @property
    def back_url(self) -> str:
        """Where a deletion or cancel leads: the list for channels, the editor otherwise."""
        if self.target.scope == Scope.CHANNEL:
            return reverse("dashboard:policy_channels")
        return self.url


def _chat_query(chat_id: str) -> str:
    return urlencode({"chat_id": chat_id})


def _channel_target(request: DashboardRequest, channel: str) -> Target:
    """The channel group of the URL (``?chat_id=`` selects a chat); a malformed name is a 404."""
    try:
        return policy_services.target(Scope.CHANNEL, channel=channel, chat_id=request.GET.get("chat_id", ""))
    except ServiceError:
        raise Http404("No such channel group.") from None


def _latest_number(tenant: Tenant, t: Target) -> int:
    return policy_selectors.latest_number(tenant=tenant, target=t)


def _versions(tenant: Tenant, t: Target) -> list[PolicyVersion]:
    return list(policy_selectors.versions_of(tenant=tenant, target=t).order_by("-number")[:VERSIONS_SHOWN])


def _pretty(document: Any) -> str:
    return json.dumps(document, indent=2, sort_keys=True)


def _reference(scope: str) -> list[tuple[str, str]]:
    return [(key, KEY_HELP.get(key, "")) for key in docs.KEYS[scope]]


def _ignored(scope: str) -> list[tuple[str, str]]:
    return sorted(docs.IGNORED[scope].items())


# --- The editor ---------------------------------------------------------------------------------------


def _editor(
    request: DashboardRequest,
    t: Target,
    form: PolicyEditForm | None = None,
    stale: PolicyVersion | None = None,
    status: int = 200,
) -> HttpResponse:
    """The page of ``t``'s policy: the document, and for admins the editor (``form``: a refused save,
    with the submitted text) with the live explain."""
    actor = request.actor
    tenant = actor.tenant
    can_edit = actor.can(Role.ADMIN)
    row = policy_services.current(tenant, t)
    latest = _latest_number(tenant, t)
    if form is None and can_edit:
        form = PolicyEditForm(
            initial={"document": _pretty(row.document if row is not None else {}), "base_version": latest}
        )
    agents = list(agent_list(tenant=tenant).values_list("key", flat=True)[:500])
    context = {
        "page": Page(t),
        "scope": t.scope,
        "policy": row,
        "document_text": _pretty(row.document) if row is not None else "",
        "latest": latest,
        "form": form,
        "stale": stale,
        "can_edit": can_edit,
        "reference": _reference(t.scope),
        "ignored": _ignored(t.scope),
        "context_form": PolicyContextForm(agents=agents, target=t),
        "explain_config": {
            "url": reverse("dashboard:policy_explain"),
            "scope": t.data(),
            "base": _opened_on(form, latest),
        },
    }
    return render(request, "dashboard/policy/edit.html", context, status=status)


def _opened_on(form: PolicyEditForm | None, latest: int) -> int:
    """The version the editor was opened on: the submitted one after a refused save, else the latest."""
    if form is not None and form.is_bound:
        value = form.cleaned_data.get("base_version") if hasattr(form, "cleaned_data") else None
        if isinstance(value, int):
            return value
    return latest


def _save(request: DashboardRequest, t: Target) -> HttpResponse:
    """Save the submitted document for ``t``; on a refusal the editor comes back with the text kept."""
    actor = request.actor
    form = PolicyEditForm(request.POST)
    if not form.is_valid():
        return _editor(request, t, form, status=400)
    try:
        # Refused when the scope got a new version since the editor was opened on ``base_version``.
        saved = policy_services.policy_save(
            actor,
            t,
            form.cleaned_data["document"],
            note=form.cleaned_data["note"],
            base_version=form.cleaned_data["base_version"],
        )
    except policy_services.PolicyChanged as changed:
        newer = changed.newer
        form.add_error(
            None,
            f"Not saved: this policy changed since you opened it (now version {newer.number}, by "
            f"{newer.author_label or newer.author_kind}). Your text is kept below: reload to see "
            "the change, then apply yours again.",
        )
        return _editor(request, t, form, stale=newer, status=409)
    except ServiceError as exc:
        form.add_service_errors(exc)
        return _editor(request, t, form, status=400)
    if saved.version is None:
        messages.info(request, "Nothing changed: the document is the one in effect.")
    else:
        messages.success(request, f"Policy saved as version {saved.version.number}.")
    for warning in saved.warnings:
        messages.warning(request, warning)
    return redirect(Page(t).url)


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def policy_tenant(request: DashboardRequest) -> HttpResponse:
    """The tenant's policy."""
    return _editor(request, policy_services.target(Scope.TENANT))


@dashboard_view(Role.ADMIN, methods=("POST",))
def policy_tenant_save(request: DashboardRequest) -> HttpResponse:
    return _save(request, policy_services.target(Scope.TENANT))


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def policy_agent(request: DashboardRequest, key: str) -> HttpResponse:
    """One agent's policy (another tenant's agent: 404)."""
    agent = access.access_agent(actor=request.actor, key=key)
    return _editor(request, policy_services.target(Scope.AGENT, agent=agent))


@dashboard_view(Role.ADMIN, methods=("POST",))
def policy_agent_save(request: DashboardRequest, key: str) -> HttpResponse:
    agent = access.access_agent(actor=request.actor, key=key)
    return _save(request, policy_services.target(Scope.AGENT, agent=agent))


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def policy_channel(request: DashboardRequest, channel: str) -> HttpResponse:
    """One channel group's policy (``?chat_id=`` for one chat); empty when it has none yet."""
    return _editor(request, _channel_target(request, channel))


@dashboard_view(Role.ADMIN, methods=("POST",))
def policy_channel_save(request: DashboardRequest, channel: str) -> HttpResponse:
    return _save(request, _channel_target(request, channel))


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def policy_channels(request: DashboardRequest) -> HttpResponse:
    """The channel-group policies, and (admins) a form to add one."""
    tenant = request.actor.tenant
    form = PolicyTargetForm(request.GET if "channel" in request.GET else None)
    if form.is_bound and form.is_valid():
        t = form.cleaned_data["target"]
        return redirect(Page(t).url)
    rows = list(policy_selectors.channel_policies(tenant=tenant))
    return render(
        request,
        "dashboard/policy/channels.html",
        {
            "rows": [
                (row, Page(Target(Scope.CHANNEL, channel=row.channel, chat_id=row.chat_id))) for row in rows
            ],
            "form": form,
            "can_edit": request.actor.can(Role.ADMIN),
        },
    )


# --- Delete and rollback ------------------------------------------------------------------------------


def _delete(request: DashboardRequest, t: Target) -> HttpResponse:
    page = Page(t)
    if policy_services.current(request.actor.tenant, t) is None:
        messages.info(request, f"The {t.label} has no policy.")
        return redirect(page.back_url)

    def perform() -> tuple[str, str]:
        saved = policy_services.policy_delete(request.actor, t)
        number = saved.version.number if saved.version is not None else 0
        return f"Policy of the {t.label} deleted (version {number}).", page.back_url

    return confirm_action(
        request,
        title=f"Delete the policy of the {t.label}?",
        body=(
            "The scope then adds no rules of its own. The deletion is a version: its history can restore it."
        ),
        action="Delete policy",
        back=page.url,
        perform=perform,
    )


@dashboard_view(Role.ADMIN)
def policy_tenant_delete(request: DashboardRequest) -> HttpResponse:
    return _delete(request, policy_services.target(Scope.TENANT))


@dashboard_view(Role.ADMIN)
def policy_agent_delete(request: DashboardRequest, key: str) -> HttpResponse:
    agent = access.access_agent(actor=request.actor, key=key)
    return _delete(request, policy_services.target(Scope.AGENT, agent=agent))


@dashboard_view(Role.ADMIN)
def policy_channel_delete(request: DashboardRequest, channel: str) -> HttpResponse:
    return _delete(request, _channel_target(request, channel))


def _history(request: DashboardRequest, t: Target) -> HttpResponse:
    versions = _versions(request.actor.tenant, t)
    return render(
        request,
        "dashboard/policy/history.html",
        {"page": Page(t), "versions": versions, "can_edit": request.actor.can(Role.ADMIN)},
    )


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def policy_tenant_versions(request: DashboardRequest) -> HttpResponse:
    """The tenant policy's versions, newest first."""
    return _history(request, policy_services.target(Scope.TENANT))


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def policy_agent_versions(request: DashboardRequest, key: str) -> HttpResponse:
    agent = access.access_agent(actor=request.actor, key=key)
    return _history(request, policy_services.target(Scope.AGENT, agent=agent))


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def policy_channel_versions(request: DashboardRequest, channel: str) -> HttpResponse:
    return _history(request, _channel_target(request, channel))


def _access_version(request: DashboardRequest, id: Any) -> PolicyVersion:
    """A version of the actor's tenant (another tenant's or a missing one: 404)."""
    version = policy_selectors.version_get(tenant=request.actor.tenant, id=id)
    if version is None:
        raise Http404("No such policy version.")
    return version


def _version_page(tenant: Tenant, version: PolicyVersion) -> Page | None:
    """The scope page of a version (None for an agent that no longer exists)."""
    agent = None
    if version.scope == Scope.AGENT:
        agent = policy_selectors.version_agent(tenant=tenant, version=version)
        if agent is None:
            return None
    return Page(Target(version.scope, agent=agent, channel=version.channel, chat_id=version.chat_id))


def _scope_label(version: PolicyVersion) -> str:
    if version.scope == Scope.AGENT:
        return f"agent {version.agent_key}"
    if version.scope == Scope.CHANNEL:
        return f"channel {version.channel}" + (f" chat {version.chat_id}" if version.chat_id else "")
    return "tenant"


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def policy_version(request: DashboardRequest, id: Any) -> HttpResponse:
    """One version: its document and what it changed."""
    version = _access_version(request, id)
    page = _version_page(request.actor.tenant, version)
    latest = _latest_number(request.actor.tenant, page.target) if page is not None else version.number
    changes = []
    for path, change in sorted((version.diff or {}).items()):
        if "added" in change or "removed" in change:
            changes.append((path, "list", change.get("added", []), change.get("removed", [])))
        else:
            before, after = change.get("from"), change.get("to")
            changes.append(
                (
                    path,
                    "value",
                    "—" if before is None else json.dumps(before, sort_keys=True),
                    "—" if after is None else json.dumps(after, sort_keys=True),
                )
            )
    return render(
        request,
        "dashboard/policy/version.html",
        {
            "version": version,
            "page": page,
            "scope_label": _scope_label(version),
            "document_text": _pretty(version.document) if version.document is not None else None,
            "changes": changes,
            "is_latest": version.number == latest,
            "can_edit": request.actor.can(Role.ADMIN) and page is not None,
        },
    )


@dashboard_view(Role.ADMIN)
def policy_version_rollback(request: DashboardRequest, id: Any) -> HttpResponse:
    """Ask, then make this version's document the current one again (as a new version)."""
    version = _access_version(request, id)
    page = _version_page(request.actor.tenant, version)
    back = reverse("dashboard:policy_version", args=[version.pk])

    def perform() -> tuple[str, str]:
        saved = policy_services.policy_rollback(request.actor, version)
        target_url = page.url if page is not None else back
        if saved.version is None:
            return f"Nothing changed: version {version.number} is the policy in effect.", target_url
        for warning in saved.warnings:
            messages.warning(request, warning)
        return (
            f"Rolled back to version {version.number} (saved as version {saved.version.number}).",
            target_url,
        )

    label = _scope_label(version)
    what = "delete the policy again" if version.document is None else "restore its document"
    return confirm_action(
        request,
        title=f"Roll the {label} policy back to version {version.number}?",
        body=f"This will {what} as a new version; the versions in between stay in the history.",
        action=f"Roll back to version {version.number}",
        back=back,
        perform=perform,
    )


# --- Live explain -------------------------------------------------------------------------------------


def _bad_request(message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": "invalid", "message": message, "details": {}}}, status=400)


@dashboard_view(Role.ADMIN, methods=("POST",))
def policy_explain(request: DashboardRequest) -> HttpResponse:
    """Validate a draft document of one scope and explain it for one agent and call context.

    Body (JSON): ``{"scope": {"scope", "agent", "channel", "chat_id"}, "document": "<draft text>",
    "context": {"agent", "provider", "channel", "chat_id", "subagent_depth"}}``. Answers
    ``{"valid", "errors", "warnings", "agent", "added", "removed", "allowed", "tools"}``: the tools the
    draft adds and removes for that agent versus the saved policy, and each tool's state with the step
    that decided it. Nothing is saved."""
    if len(request.body) > MAX_EXPLAIN_BODY:
        return _bad_request(f"The request may have at most {MAX_EXPLAIN_BODY} bytes.")
    try:
        body = json.loads(request.body or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _bad_request("The body must be JSON.")
    if not isinstance(body, dict):
        return _bad_request("The body must be a JSON object.")
    tenant = request.actor.tenant
    try:
        t = _explain_target(request, body.get("scope"))
    except ServiceError as exc:
        return _bad_request(exc.message)
    context = PolicyContextForm.parse(body.get("context"))
    if isinstance(context, str):
        return _bad_request(context)

    result: dict[str, Any] = {"valid": False, "errors": {}, "warnings": [], "agent": None}
    draft = body.get("document")
    if not isinstance(draft, str):
        return _bad_request('"document" must be the draft as text.')
    try:
        document = json.loads(draft) if draft.strip() else {}
    except json.JSONDecodeError as exc:
        result["errors"] = {
            "document": [f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."]
        }
        return JsonResponse(result)
    try:
        checked = policy_services.check(tenant, t, document)
    except ServiceError as exc:
        result["errors"] = exc.details or {"document": [exc.message]}
        return JsonResponse(result)
    result.update(valid=True, warnings=checked.warnings)

    # The agent: the scope's own, else the one chosen, else the first of the tenant.
    agent: Agent | None = t.agent
    if agent is None:
        agent = policy_selectors.explain_agent(tenant=tenant, key=context["agent"])
    if agent is None:
        result["message"] = "This tenant has no agent yet: add one to see which tools the policy gives it."
        return JsonResponse(result)
    channel, chat_id = context["channel"], context["chat_id"]
    if t.scope == Scope.CHANNEL:
        channel, chat_id = t.channel, t.chat_id
    scope = engine.CallScope(
        provider=context["provider"],
        channel=channel,
        chat_id=chat_id,
        subagent_depth=context["subagent_depth"],
    )
    saved_allowed, _, _ = engine.explain(tenant, agent, scope)
    allowed, explanations, _ = engine.explain(tenant, agent, scope, overrides={t.scope: checked.document})
    before, after = set(saved_allowed), set(allowed)
    result.update(
        agent=agent.key,
        context={
            "provider": scope.provider,
            "channel": channel,
            "chat_id": chat_id,
            "subagent_depth": scope.subagent_depth,
        },
        added=sorted(after - before),
        removed=sorted(before - after),
        allowed=allowed,
        tools=[
            {
                "tool": e.tool,
                "group": CATALOG[e.tool].group if e.tool in CATALOG else "",
                "allowed": e.allowed,
                "decided_by": e.decided_by,
                "trail": [{"step": step, "effect": effect} for step, effect in e.trail],
                "change": "added"
                if e.tool in after - before
                else "removed"
                if e.tool in before - after
                else "",
            }
            for e in explanations
        ],
    )
    return JsonResponse(result)


def _explain_target(request: DashboardRequest, spec: Any) -> Target:
    if not isinstance(spec, dict):
        raise ServiceError("invalid", '"scope" must be an object with "scope" (tenant, agent or channel).')
    scope = spec.get("scope")
    if scope == Scope.AGENT:
        key = spec.get("agent")
        if not isinstance(key, str) or not key:
            raise ServiceError("invalid", "An agent policy needs the agent's key.")
        return policy_services.target(Scope.AGENT, agent=access.access_agent(actor=request.actor, key=key))
    if scope == Scope.CHANNEL:
        channel, chat_id = spec.get("channel") or "", spec.get("chat_id") or ""
        if not isinstance(channel, str) or not isinstance(chat_id, str):
            raise ServiceError("invalid", "A channel and chat id are strings.")
        return policy_services.target(Scope.CHANNEL, channel=channel, chat_id=chat_id)
    if scope == Scope.TENANT:
        return policy_services.target(Scope.TENANT)
    raise ServiceError("invalid", "Unknown scope; use tenant, agent or channel.")
