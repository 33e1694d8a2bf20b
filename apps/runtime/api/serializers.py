from __future__ import annotations

from rest_framework import serializers

from apps.runtime.caller import ORIGINS
from apps.tenants.api.base import StrictSerializer
from apps.toolkit.call_scope import CallScopeQueryInput
from apps.toolkit.presentation import FORMATS, STYLES


class CallContextInput(StrictSerializer):
    """The context of one call. None of it can give the caller more than it gets without it:

    * ``origin``: the caller's (a dashboard user and most keys: ``user``; a key an owner restricted:
      its own). Leave it out or repeat it; any other value is refused with 403 and nothing runs.
      ``system`` is Toolgate's own and never accepted (:mod:`apps.runtime.caller`).
    * ``channel`` and ``chat_id``: the channel group whose policy ``allow`` list applies, and the
      channel topic's tool list; both are intersections, so naming a channel only narrows the tools.
      The internal channels ``teammate``, ``system`` and ``dashboard`` (which carry rights in team
      tools) are refused with 403.
    * ``provider``: the provider policies of the tenant and the agent; its ``allow`` lists intersect
      and its ``profile`` is intersected with the tenant's profile, never put in its place.
    * ``subagent_depth``: above 0 the subagent deny lists apply (at the maximum depth the leaf list
      too); 0 is what a call gets without it, so it can only take tools away.
    * ``tool_allow``: a final intersection with the allowed tools.
    * ``peer_kind``: recorded with team tasks the call creates; no decision depends on it.
    * ``run``: the caller's run of this agent (an external runner's claimed run), recorded with the
      call; a run of another agent or tenant, or one that has ended, is refused with 400.
    * ``session_key`` (the rate limit's and the MCP tool search's key), ``user_id`` (the end user the
      caller acts for: their workspace, grants and team access lists), ``wait``: not rights the request
      asserts over the caller's, but the call's own identifiers.
    """

    session_key = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    user_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    channel = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    chat_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    peer_kind = serializers.ChoiceField(choices=["", "direct", "group"], required=False, default="")
    provider = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    origin = serializers.ChoiceField(
        choices=ORIGINS,
        required=False,
        allow_null=True,
        default=None,
        help_text="The caller's own origin or nothing; any other is refused (403).",
    )
    subagent_depth = serializers.IntegerField(min_value=0, max_value=5, required=False, default=0)
    tool_allow = serializers.ListField(
        child=serializers.CharField(max_length=200),
        max_length=500,
        required=False,
        allow_null=True,
        default=None,
    )
    run = serializers.UUIDField(
        required=False,
        allow_null=True,
        default=None,
        help_text="The run (of this agent, running or waiting) whose model made the call: recorded with "
        "the call and shown on its page; any other run is refused (400).",
    )
    wait = serializers.BooleanField(
        required=False,
        default=True,
        help_text="false: a call that needs an approval answers 202 at once; its result is read later "
        "from /api/v1/approvals/<id>/",
    )


class ExecuteInput(StrictSerializer):
    agent = serializers.CharField(max_length=64)
    tool = serializers.CharField(max_length=200)
    args = serializers.DictField(required=False, default=dict)
    # DRF collects declared fields by name; these two shadow Field attributes only for the type checker.
    context = CallContextInput(required=False)  # type: ignore[assignment]
    style = serializers.ChoiceField(choices=STYLES, required=False, default="flat")  # type: ignore[assignment]


class ExecuteOutput(serializers.Serializer):  # type: ignore[type-arg]
    call_id = serializers.CharField()
    for_llm = serializers.CharField()
    for_user = serializers.CharField()
    is_error = serializers.BooleanField()
    duration_ms = serializers.FloatField()


class ExecutePendingOutput(serializers.Serializer):  # type: ignore[type-arg]
    approval_id = serializers.UUIDField()
    call_id = serializers.CharField()
    status = serializers.CharField()


class ToolsQueryInput(CallScopeQueryInput):
    format = serializers.ChoiceField(choices=FORMATS, required=False, default="openai")
    # The session whose MCP tool searches activated deferred tools (search mode).
    session_key = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    style = serializers.ChoiceField(choices=STYLES, required=False, default="flat")  # type: ignore[assignment]
    include_unavailable = serializers.BooleanField(required=False, default=False)
