from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.policy.engine import CallScope
from apps.runs.selectors import open_run_of_agent
from apps.runtime import caller, pipeline
from apps.runtime.api import serializers as s
from apps.runtime.approval_wait import finish_after_decision
from apps.runtime.selectors import agent_tool_definitions
from apps.secure_cli.selectors import guidance as cli_guidance
from apps.tenants.access import access_runtime_agent
from apps.tenants.api.base import TenantViewMixin
from apps.tenants.api.parsers import ToolArgumentsJSONParser
from apps.tenants.roles import Role
from apps.toolkit import gateway, presentation
from apps.toolkit.call_scope import CALL_SCOPE_PARAMETERS, CallScopeQueryInput

# What an omitted "context" means (the defaults of CallContextInput).
DEFAULT_CONTEXT: dict[str, Any] = {
    "session_key": "",
    "user_id": "",
    "channel": "",
    "chat_id": "",
    "peer_kind": "",
    "provider": "",
    "origin": None,  # the caller's own
    "subagent_depth": 0,
    "tool_allow": None,
    "run": None,
    "wait": True,
}


RESULT_EXTRAS = ("structured_content", "content")


def _outcome_body(outcome: gateway.CallOutcome) -> dict[str, Any]:
    body = {
        "call_id": outcome.call_id,
        "for_llm": outcome.result.for_llm,
        "for_user": outcome.result.for_user,
        "is_error": outcome.result.is_error,
        "duration_ms": outcome.duration_ms,
    }
    # What an MCP tool returned besides text (scrubbed by the pipeline): images, audio, resources, and
    # its structured content.
    for key in RESULT_EXTRAS:
        if key in outcome.result.data:
            body[key] = outcome.result.data[key]
    return body


class ExecuteView(TenantViewMixin, APIView):
    parser_classes = [ToolArgumentsJSONParser]
    """Run one tool call for an agent. A tool's own failure is 200 with ``is_error: true``.

    An exec call that needs a human's approval waits for the decision (at most
    ``TOOLGATE_APPROVAL_TIMEOUT_SECONDS``) without holding a database connection or a pooled thread:
    the route is served by an async view (:meth:`as_view`) that runs this synchronous view, and, when
    it handed back a pending call, awaits the decision and finishes the call. (The synchronous
    middleware above it keeps the request's own thread, which asgiref makes for each request, waiting
    idle meanwhile; no other request waits for it.) With ``"wait": false`` in the context the answer
    is 202 with the approval's id at once.

    The call's origin is its caller's (``apps.runtime.caller``): a context naming another origin, or one
    of Toolgate's internal channels, is refused with 403 before anything runs or is recorded."""

    write_role = Role.MEMBER

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Any:
        sync_view = super().as_view(**initkwargs)
        run_sync = sync_to_async(sync_view)

        async def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            response = await run_sync(request, *args, **kwargs)
            pending: pipeline.PendingCall | None = getattr(response, "pending_call", None)
            if pending is None:
                return response  # type: ignore[no-any-return]
            outcome = await finish_after_decision(pending)
            return JsonResponse(_outcome_body(outcome))

        view.cls = cls  # type: ignore[attr-defined]
        view.initkwargs = initkwargs  # type: ignore[attr-defined]
        view.csrf_exempt = True  # type: ignore[attr-defined]  # DRF's SessionAuthentication checks CSRF
        return view

    @extend_schema(request=s.ExecuteInput, responses={200: s.ExecuteOutput, 202: s.ExecutePendingOutput})
    def post(self, request: Request) -> Response:
        data = s.ExecuteInput(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        agent = access_runtime_agent(actor=self.actor, key=body["agent"])
        context = body.get("context") or DEFAULT_CONTEXT
        tool_allow = context.get("tool_allow")  # the pipeline adds the channel topic's list
        run_id = ""
        if context.get("run") is not None:
            run = open_run_of_agent(tenant=self.actor.tenant, agent=agent, id=context["run"])
            if run is None:
                raise ValidationError(
                    {"context": {"run": ["No running or waiting run of this agent has this id."]}}
                )
            run_id = str(run.pk)
        step = pipeline.call(
            actor=self.actor,
            request=gateway.CallRequest(
                agent=agent,
                tool=body["tool"],
                args=dict(body.get("args") or {}),
                session_key=context["session_key"],
                user_id=context["user_id"],
                channel=context["channel"],
                chat_id=context["chat_id"],
                peer_kind=context["peer_kind"],
                provider=context["provider"],
                origin=context["origin"],
                subagent_depth=context["subagent_depth"],
                tool_allow=tuple(tool_allow) if tool_allow is not None else None,
                style=body["style"],
                run_id=run_id,
            ),
            wait=context["wait"],
        )
        if isinstance(step, gateway.CallOutcome):
            return Response(_outcome_body(step))
        if not step.wait:
            return Response(
                {"approval_id": str(step.approval_id), "call_id": step.call_id, "status": "pending"},
                status=202,
            )
        response = Response(status=202)
        response.pending_call = step  # type: ignore[attr-defined]  # finished by the async view
        return response


class AgentToolsView(TenantViewMixin, APIView):
    """The tool definitions this agent may use now, sorted by name (stable for prompt caching)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("format", OpenApiTypes.STR, enum=list(presentation.FORMATS)),
            OpenApiParameter("style", OpenApiTypes.STR, enum=list(presentation.STYLES)),
            *CALL_SCOPE_PARAMETERS,
            OpenApiParameter("include_unavailable", OpenApiTypes.BOOL),
            OpenApiParameter("session_key", OpenApiTypes.STR, description="whose MCP tool searches count"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, key: str) -> Response:
        agent = access_runtime_agent(actor=self.actor, key=key)
        query = s.ToolsQueryInput(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        params: dict[str, Any] = query.validated_data
        # As execute refuses it: a listing must not show what a call could not get.
        caller.check_channel(actor=self.actor, channel=params["channel"])
        scope = CallScope(
            provider=params["provider"],
            user_id=params["user_id"],
            channel=params["channel"],
            chat_id=params["chat_id"],
            subagent_depth=params["subagent_depth"],
        )
        definitions = agent_tool_definitions(
            actor=self.actor,
            agent=agent,
            scope=scope,
            tool_allow=CallScopeQueryInput.tool_allow_names(params["tool_allow"]),
            style=params["style"],
            include_unavailable=params["include_unavailable"],
            session_key=params["session_key"],
        )
        # TOOLS.md-style guidance on the credentialed CLIs this agent reaches through exec.
        names = {str(d["name"]) for d in definitions}
        guidance = ""
        if names & {"exec", "shell"}:
            guidance = cli_guidance(tenant=self.actor.tenant, agent=agent)
        return Response(
            {
                "agent": agent.key,
                "style": params["style"],
                "format": params["format"],
                "count": len(definitions),
                "tools": presentation.render(definitions, params["format"]),
                "guidance": guidance,
            }
        )


class CatalogView(TenantViewMixin, APIView):
    """Every built-in tool with its group, schema, capability and availability; groups, profiles, aliases."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response(presentation.catalog_document())
