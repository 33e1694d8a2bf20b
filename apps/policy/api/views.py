"""The policy API: documents per scope, their versions and rollback, explain, preview, import/export.

Reads answer viewers, writes need admins (a preview, which saves nothing, is for members). Every write
goes through ``apps.policy.services``, which audits, publishes a ``policy`` event and raises the
tenant's ``config_version`` so that the next call of any agent already sees the change.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.policy import documents as docs
from apps.policy import engine, selectors, services
from apps.policy.api import serializers as s
from apps.policy.engine import CallScope, Explanation
from apps.policy.models import PolicyDocument, PolicyVersion, Scope
from apps.tenants.access import access_agent
from apps.tenants.api.base import TenantScopedViewSet, TenantViewMixin
from apps.tenants.api.pagination import CreatedCursorPagination
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from apps.toolkit.call_scope import CALL_SCOPE_PARAMETERS
from apps.tools.catalog import CATALOG

# --- documents -------------------------------------------------------------------------------------


def _policy_body(t: services.Target, row: PolicyDocument | None) -> dict[str, Any]:
    return {
        "scope": t.scope,
        "agent": t.agent.key if t.agent is not None else None,
        "channel": t.channel or None,
        "chat_id": t.chat_id if t.scope == Scope.CHANNEL else None,
        "document": row.document if row is not None else {},
        "version": row.version if row is not None else 0,
        "updated_at": row.updated_at if row is not None else None,
    }


def _saved_body(t: services.Target, saved: services.Saved, tenant: Tenant) -> dict[str, Any]:
    body = _policy_body(t, services.current(tenant, t))
    body["changed"] = saved.version is not None
    body["warnings"] = saved.warnings
    return body


class _PolicyView(TenantViewMixin, APIView):
    """GET, PUT and DELETE of one scope's document; subclasses say which scope."""

    def target(self, **kwargs: Any) -> services.Target:
        raise NotImplementedError

    def _get(self, **kwargs: Any) -> Response:
        t = self.target(**kwargs)
        return Response(s.PolicyOutput(_policy_body(t, services.current(self.actor.tenant, t))).data)

    def _put(self, request: Request, **kwargs: Any) -> Response:
        t = self.target(**kwargs)
        data = s.PolicySaveInput(data=request.data)
        data.is_valid(raise_exception=True)
        saved = services.policy_save(
            self.actor, t, data.validated_data["document"], note=data.validated_data["note"]
        )
        return Response(s.PolicySavedOutput(_saved_body(t, saved, self.actor.tenant)).data)

    def _delete(self, **kwargs: Any) -> Response:
        services.policy_delete(self.actor, self.target(**kwargs))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TenantPolicyView(_PolicyView):
    """The tenant's policy: profile, provider profiles, allow/deny/alsoAllow, exec approvals, limits."""

    def target(self, **kwargs: Any) -> services.Target:
        return services.target(Scope.TENANT)

    @extend_schema(responses={200: s.PolicyOutput})
    def get(self, request: Request) -> Response:
        return self._get()

    @extend_schema(request=s.PolicySaveInput, responses={200: s.PolicySavedOutput})
    def put(self, request: Request) -> Response:
        return self._put(request)

    @extend_schema(responses={204: None})
    def delete(self, request: Request) -> Response:
        return self._delete()


class AgentPolicyView(_PolicyView):
    """One agent's policy (allow, deny, alsoAllow, byProvider allow lists, exec approvals)."""

    def target(self, **kwargs: Any) -> services.Target:
        return services.target(Scope.AGENT, agent=access_agent(actor=self.actor, key=kwargs["key"]))

    @extend_schema(responses={200: s.PolicyOutput})
    def get(self, request: Request, key: str) -> Response:
        return self._get(key=key)

    @extend_schema(request=s.PolicySaveInput, responses={200: s.PolicySavedOutput})
    def put(self, request: Request, key: str) -> Response:
        return self._put(request, key=key)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, key: str) -> Response:
        return self._delete(key=key)


_CHAT_PARAM = OpenApiParameter(
    "chat_id", OpenApiTypes.STR, description="a chat of the channel (its own group); empty: the channel"
)


class ChannelPolicyView(_PolicyView):
    """The allow list of one channel group, or of one chat of it (``?chat_id=``); 404 when it has none."""

    def target(self, **kwargs: Any) -> services.Target:
        query = s.ChannelQueryInput(data=self.request.query_params.dict())
        query.is_valid(raise_exception=True)
        return services.target(
            Scope.CHANNEL, channel=kwargs["channel"], chat_id=query.validated_data["chat_id"]
        )

    @extend_schema(parameters=[_CHAT_PARAM], responses={200: s.PolicyOutput})
    def get(self, request: Request, channel: str) -> Response:
        # A channel group exists only through its policy (unlike the tenant and its agents).
        t = self.target(channel=channel)
        row = services.current(self.actor.tenant, t)
        if row is None:
            raise Http404(f"The {t.label} has no policy.")
        return Response(s.PolicyOutput(_policy_body(t, row)).data)

    @extend_schema(parameters=[_CHAT_PARAM], request=s.PolicySaveInput, responses={200: s.PolicySavedOutput})
    def put(self, request: Request, channel: str) -> Response:
        return self._put(request, channel=channel)

    @extend_schema(parameters=[_CHAT_PARAM], responses={204: None})
    def delete(self, request: Request, channel: str) -> Response:
        return self._delete(channel=channel)


class ChannelPolicyListView(TenantViewMixin, APIView):
    """Every channel-group policy of the tenant, by channel then chat."""

    @extend_schema(responses={200: s.ChannelPolicyOutput(many=True)})
    def get(self, request: Request) -> Response:
        rows = selectors.channel_policies(tenant=self.actor.tenant)
        return Response(s.ChannelPolicyOutput(rows, many=True).data)


# --- versions --------------------------------------------------------------------------------------

_VERSION_FILTERS = [
    OpenApiParameter("scope", OpenApiTypes.STR, enum=Scope.values),
    OpenApiParameter("agent", OpenApiTypes.STR, description="an agent's key (also a deleted agent's)"),
    OpenApiParameter("channel", OpenApiTypes.STR),
    OpenApiParameter("chat_id", OpenApiTypes.STR),
]


@extend_schema_view(list=extend_schema(parameters=_VERSION_FILTERS))
class PolicyVersionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Every saved state of every scope's policy, newest first, with its diff and author."""

    model = PolicyVersion
    serializer_class = s.PolicyVersionOutput
    pagination_class = CreatedCursorPagination

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset
        filters = s.VersionFilterInput(data=self.request.query_params.dict())
        filters.is_valid(raise_exception=True)
        params = filters.validated_data
        if "scope" in params:
            queryset = queryset.filter(scope=params["scope"])
        if "agent" in params:
            queryset = queryset.filter(agent_key=params["agent"])
        if "channel" in params:
            queryset = queryset.filter(channel=params["channel"])
        if "chat_id" in params:
            queryset = queryset.filter(chat_id=params["chat_id"])
        return queryset.order_by("-created_at", "-id")


def _access_version(*, tenant: Tenant, pk: uuid.UUID) -> PolicyVersion:
    version = selectors.version_get(tenant=tenant, id=pk)
    if version is None:
        raise Http404("No policy version with this id.")
    return version


def _version_target(tenant: Tenant, version: PolicyVersion) -> tuple[services.Target | None, str]:
    """The scope ``version`` belongs to, or None and why it is gone."""
    agent: Agent | None = None
    if version.scope == Scope.AGENT:
        agent = selectors.version_agent(tenant=tenant, version=version)
        if agent is None:
            return None, f"Agent {version.agent_key!r} no longer exists; its policy cannot be restored."
    return services.target(version.scope, agent=agent, channel=version.channel, chat_id=version.chat_id), ""


class PolicyVersionRollbackView(TenantViewMixin, APIView):
    """GET: what restoring this version would change. POST: restore it, as a new version (admins)."""

    @extend_schema(responses={200: s.RollbackPreviewOutput})
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        tenant = self.actor.tenant
        version = _access_version(tenant=tenant, pk=pk)
        t, reason = _version_target(tenant, version)
        row = services.current(tenant, t) if t is not None else None
        current = row.document if row is not None else None
        restored = version.document
        if t is not None and restored is not None:
            try:
                restored = services.check(tenant, t, restored).document
            except ServiceError as exc:
                reason = f"It no longer validates: {exc.message}"
        body = {
            "version": version,
            "current": current,
            "current_version": row.version if row is not None else 0,
            "diff": docs.diff(current, restored),
            "changed": current != restored,
            "restorable": not reason,
            "reason": reason,
        }
        return Response(s.RollbackPreviewOutput(body).data)

    @extend_schema(request=None, responses={200: s.PolicySavedOutput})
    def post(self, request: Request, pk: uuid.UUID) -> Response:
        tenant = self.actor.tenant
        version = _access_version(tenant=tenant, pk=pk)
        saved = services.policy_rollback(self.actor, version)
        t, _ = _version_target(tenant, version)
        assert t is not None  # the rollback refused a version whose agent is gone
        return Response(s.PolicySavedOutput(_saved_body(t, saved, tenant)).data)


# --- explain and preview ---------------------------------------------------------------------------


def _explanations(entries: Sequence[Explanation]) -> list[dict[str, Any]]:
    return [
        {
            "tool": e.tool,
            "group": CATALOG[e.tool].group if e.tool in CATALOG else None,
            "allowed": e.allowed,
            "decided_by": e.decided_by,
            "trail": [{"step": step, "effect": effect} for step, effect in e.trail],
        }
        for e in entries
    ]


def _context(scope: CallScope, tool_allow: Sequence[str] | None) -> dict[str, Any]:
    return {
        "provider": scope.provider,
        "user_id": scope.user_id,
        "channel": scope.channel,
        "chat_id": scope.chat_id,
        "subagent_depth": scope.subagent_depth,
        "tool_allow": list(tool_allow) if tool_allow is not None else None,
    }


class AgentToolsExplainView(TenantViewMixin, APIView):
    """For every tool of the agent: allowed or not for this call, which step decided, and the trail of
    steps that removed or re-added it. ``allowed`` is exactly what the tool listing returns (with
    ``include_unavailable=true``) and what execution enforces for the same parameters."""

    @extend_schema(
        parameters=CALL_SCOPE_PARAMETERS,
        responses={200: s.ExplainOutput},
    )
    def get(self, request: Request, key: str) -> Response:
        agent = access_agent(actor=self.actor, key=key)
        query = s.ExplainQueryInput(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        params = query.validated_data
        tool_allow = s.ExplainQueryInput.tool_allow_names(params["tool_allow"])
        scope = CallScope(
            provider=params["provider"],
            user_id=params["user_id"],
            channel=params["channel"],
            chat_id=params["chat_id"],
            subagent_depth=params["subagent_depth"],
        )
        allowed, entries, documents = engine.explain(self.actor.tenant, agent, scope, tool_allow)
        key_of_channel = documents.channel_key
        body = {
            "agent": agent.key,
            "context": _context(scope, tool_allow),
            "allowed": allowed,
            "tools": _explanations(entries),
            "documents": {
                "tenant": documents.tenant,
                "agent": documents.agent,
                "channel": documents.channel if key_of_channel is not None else None,
                "channel_key": {"channel": key_of_channel[0], "chat_id": key_of_channel[1]}
                if key_of_channel is not None
                else None,
            },
        }
        return Response(s.ExplainOutput(body).data)


def _invalid(field: str, message: str) -> ServiceError:
    return ServiceError(ErrorCode.INVALID, f"{field}: {message}", details={field: [message]})


_DEFAULT_CONTEXT: Mapping[str, Any] = {
    "provider": "",
    "user_id": "",
    "channel": "",
    "chat_id": "",
    "subagent_depth": 0,
    "tool_allow": None,
}


class PolicyPreviewView(TenantViewMixin, APIView):
    """What a draft document would change for one agent, before it is saved (nothing is saved). A
    malformed request is a 400; a draft that would not save is 200 with ``valid: false`` and its
    errors by path, so an editor can call this as the admin types."""

    write_role = Role.MEMBER

    @extend_schema(request=s.PreviewInput, responses={200: s.PreviewOutput})
    def post(self, request: Request) -> Response:
        data = s.PreviewInput(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        tenant = self.actor.tenant
        scope: str = body["scope"]
        agent: Agent | None = None
        if scope == Scope.AGENT:
            if "agent" not in body:
                raise _invalid("agent", "Required for an agent policy.")
            agent = access_agent(actor=self.actor, key=body["agent"])
        elif "agent" in body:
            raise _invalid("agent", "Only for an agent policy; name the agent to explain in explain_agent.")
        if scope != Scope.CHANNEL and (body["channel"] or body["chat_id"]):
            raise _invalid("channel", "channel and chat_id are only for a channel policy.")
        t = services.target(scope, agent=agent, channel=body["channel"], chat_id=body["chat_id"])

        explained: Agent
        if agent is not None:
            if body.get("explain_agent", agent.key) != agent.key:
                raise _invalid("explain_agent", "An agent policy is explained for its own agent.")
            explained = agent
        elif "explain_agent" in body:
            explained = access_agent(actor=self.actor, key=body["explain_agent"])
        else:
            raise _invalid("explain_agent", "Required for a tenant or channel policy: the agent to explain.")

        context = dict(body.get("context") or _DEFAULT_CONTEXT)
        if scope == Scope.CHANNEL:
            # The draft applies to calls on its own channel (and chat): explain one of those.
            if context["channel"] not in ("", t.channel) or context["chat_id"] not in ("", t.chat_id):
                raise _invalid("context", "The context of a channel policy preview is that channel and chat.")
            context["channel"], context["chat_id"] = t.channel, t.chat_id
        tool_allow = context["tool_allow"]
        call = CallScope(
            provider=context["provider"],
            user_id=context["user_id"],
            channel=context["channel"],
            chat_id=context["chat_id"],
            subagent_depth=context["subagent_depth"],
        )
        before, before_entries, _ = engine.explain(tenant, explained, call, tool_allow)
        try:
            checked = services.check(tenant, t, body["document"])
        except ServiceError as exc:
            if exc.code != ErrorCode.INVALID:
                raise
            result: dict[str, Any] = {
                "valid": False,
                "errors": exc.details,
                "warnings": [],
                "allowed_before": before,
                "allowed_after": before,
                "added": [],
                "removed": [],
                "tools": _explanations(before_entries),
            }
            return Response(s.PreviewOutput(result).data)
        after, after_entries, _ = engine.explain(
            tenant, explained, call, tool_allow, overrides={scope: checked.document}
        )
        result = {
            "valid": True,
            "errors": {},
            "warnings": checked.warnings,
            "allowed_before": before,
            "allowed_after": after,
            "added": sorted(set(after) - set(before)),
            "removed": sorted(set(before) - set(after)),
            "tools": _explanations(after_entries),
        }
        return Response(s.PreviewOutput(result).data)


# --- export and import -----------------------------------------------------------------------------


class PolicyExportView(TenantViewMixin, APIView):
    """GET: the tenant's whole policy as one document. PUT (admins): replace the whole policy with such
    a document, atomically: every error is reported and nothing changes, or every scope is saved (and
    scopes the document leaves out lose their policy)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response(services.policy_export(self.actor.tenant))

    @extend_schema(request=OpenApiTypes.OBJECT, responses={200: s.ImportedOutput})
    def put(self, request: Request) -> Response:
        if request.stream is None:  # an empty body would silently remove every policy
            raise ServiceError(
                ErrorCode.INVALID,
                "The body must be the whole policy, as GET /api/v1/policy/export returns it.",
            )
        imported = services.policy_import(self.actor, request.data)
        return Response(s.ImportedOutput({"changed": imported.changed, "warnings": imported.warnings}).data)
