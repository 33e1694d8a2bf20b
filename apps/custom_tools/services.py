"""Every write to custom tools, and their test run. Each change is atomic, validated as a whole, audited
(env by variable name only, the command with the env values masked), published on the tenant's
``custom_tools`` topic after commit, and raises the tenant's ``config_version`` so that the next call in
every process uses the new definition.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction

from apps.audit.services import record_and_publish
from apps.custom_tools import validation
from apps.custom_tools.errors import CustomToolErrorCode
from apps.custom_tools.execution import ToolSpec, execute, mask
from apps.custom_tools.models import DEFAULT_TIMEOUT_SECONDS, CustomTool
from apps.mcp_grants import selectors as mcp_selectors
from apps.policy import engine
from apps.policy.engine import CallScope
from apps.tenants.actors import Actor
from apps.tenants.errors import Conflict, ErrorCode, ServiceError, invalid_fields
from apps.tenants.models import Agent
from apps.tenants.selectors import setting_secrets_for_call
from apps.tenants.services import config_changed
from apps.toolkit import context as call_context
from apps.toolkit import runtime_settings
from apps.toolkit.context import CallContext
from apps.toolkit.scrubber import Scrubber

TOPIC = "custom_tools"
FIELDS = (
    "name",
    "description",
    "parameters",
    "command",
    "working_dir",
    "timeout_seconds",
    "env",
    "agent",
    "enabled",
)
MAX_USER_ID = 255
MAX_TEST_ARGS_BYTES = 64 * 1024


def tool_data(tool: CustomTool) -> dict[str, Any]:
    """What may be shown and audited of a tool: env by variable name only, and the command template
    with the env values masked (a value pasted into the template is not logged either)."""
    secrets = [value for value in tool.env.values() if value]
    return {
        "id": str(tool.pk),
        "name": tool.name,
        "description": tool.description,
        "scope": "agent" if tool.agent_id else "global",
        "agent": tool.agent.key if tool.agent_id and tool.agent is not None else None,
        "parameters": tool.parameters,
        "command": mask(tool.command, secrets),
        "working_dir": tool.working_dir,
        "timeout_seconds": tool.timeout_seconds,
        "env": sorted(tool.env),
        "enabled": tool.enabled,
        "created_by": tool.created_by,
    }


def _check_agent(actor: Actor, agent: Agent | None) -> None:
    if agent is not None and agent.tenant_id != actor.tenant.pk:
        raise invalid_fields({"agent": ["no such agent in this tenant."]})


def _check_free(actor: Actor, name: str, agent: Agent | None, exclude: uuid.UUID | None = None) -> None:
    """409 for a name with a built-in meaning, or one the same scope already uses."""
    reserved = validation.reserved_name(name)
    if reserved is not None:
        raise Conflict(
            CustomToolErrorCode.NAME_RESERVED,
            f"name: {reserved} Custom tools cannot take it; choose another name.",
            details={"name": [reserved]},
        )
    server = mcp_selectors.registered_tool_names(tenant=actor.tenant).get(name)
    if server is not None:
        taken = f"{name!r} is the name of a tool of the MCP server {server!r} (registered without a prefix)."
        raise Conflict(
            CustomToolErrorCode.NAME_RESERVED,
            f"name: {taken} Custom tools cannot take it; choose another name.",
            details={"name": [taken]},
        )
    same = CustomTool.objects.for_tenant(actor.tenant).filter(name=name)
    same = same.filter(agent_id=agent.pk) if agent is not None else same.filter(agent__isnull=True)
    if exclude is not None:
        same = same.exclude(pk=exclude)
    if same.exists():
        where = f"for the agent {agent.key!r}" if agent is not None else "global"
        raise Conflict(
            CustomToolErrorCode.DUPLICATE_NAME,
            f"name: a custom tool {name!r} ({where}) exists already.",
            details={"name": ["in use in this scope."]},
        )


def _fields(tool: CustomTool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "command": tool.command,
        "working_dir": tool.working_dir,
        "timeout_seconds": tool.timeout_seconds,
        "env": tool.env,
        "agent": tool.agent_id,
        "enabled": tool.enabled,
    }


def _save(tool: CustomTool, **kwargs: Any) -> None:
    try:
        tool.full_clean(validate_constraints=False, validate_unique=False)
    except DjangoValidationError as exc:
        raise invalid_fields({k: [str(m) for m in v] for k, v in exc.message_dict.items()}) from None
    try:
        with transaction.atomic():
            tool.save(**kwargs)
    except IntegrityError:
        raise Conflict(
            CustomToolErrorCode.DUPLICATE_NAME,
            f"name: a custom tool {tool.name!r} exists already in this scope.",
            details={"name": ["in use in this scope."]},
        ) from None


@transaction.atomic
def custom_tool_create(
    *,
    actor: Actor,
    name: str,
    command: str,
    description: str = "",
    parameters: dict[str, Any] | None = None,
    working_dir: str = "",
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
    env: dict[str, str] | None = None,
    agent: Agent | None = None,
    enabled: bool = True,
) -> CustomTool:
    """Define a tool, global (``agent`` None) or for one agent. Invalid fields are 400 by field; a
    built-in, alias, domain or MCP tool's name, or a name in use in the same scope, is 409."""
    parameters = {"type": "object", "properties": {}} if parameters is None else parameters
    fields = {
        "name": name,
        "description": description,
        "parameters": parameters,
        "command": command,
        "working_dir": working_dir,
        "timeout_seconds": timeout_seconds,
        "env": env or {},
        "enabled": enabled,
    }
    errors = validation.check_tool(fields)
    if errors:
        raise invalid_fields(errors)
    _check_agent(actor, agent)
    _check_free(actor, name, agent)
    tool = CustomTool(
        tenant=actor.tenant,
        name=name,
        description=description,
        parameters=parameters,
        command=command,
        working_dir=working_dir,
        timeout_seconds=timeout_seconds,
        agent=agent,
        enabled=enabled,
        created_by=actor.label[:255],
    )
    tool.env = env or {}
    _save(tool)
    config_changed(actor.tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="custom_tool.created",
        target_type="custom_tool",
        target_id=str(tool.pk),
        data=tool_data(tool),
    )
    return tool


@transaction.atomic
def custom_tool_update(*, actor: Actor, tool: CustomTool, **changes: Any) -> CustomTool:
    """Change any field (``env`` replaces the whole environment; ``agent`` moves the tool to another
    agent, or makes it global with None). The result is validated as a whole."""
    unknown = set(changes) - set(FIELDS)
    if unknown:
        raise invalid_fields({sorted(unknown)[0]: ["unknown field."]})
    locked = (
        CustomTool.objects.for_tenant(actor.tenant).select_for_update(of=("self",)).select_related("agent")
    )
    current = locked.get(pk=tool.pk)
    before = _fields(current)
    agent: Agent | None = changes.pop("agent", current.agent)
    errors = validation.check_tool({**before, **changes})
    if errors:
        raise invalid_fields(errors)
    _check_agent(actor, agent)
    after = {**before, **changes, "agent": agent.pk if agent is not None else None}
    changed = sorted(key for key in FIELDS if before[key] != after[key])
    if not changed:
        return current
    if {"name", "agent"} & set(changed):
        _check_free(actor, after["name"], agent, exclude=current.pk)
    for key in ("name", "description", "parameters", "command", "working_dir", "timeout_seconds", "enabled"):
        setattr(current, key, after[key])
    current.env = after["env"]
    current.agent = agent
    columns = {"env": "env_encrypted"}
    _save(current, update_fields=[*(columns.get(key, key) for key in changed), "updated_at"])
    config_changed(actor.tenant)
    data = tool_data(current)
    data["changed"] = changed
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="custom_tool.updated",
        target_type="custom_tool",
        target_id=str(current.pk),
        data=data,
    )
    return current


@transaction.atomic
def custom_tool_delete(*, actor: Actor, tool: CustomTool) -> None:
    data = {"id": str(tool.pk), "name": tool.name, "agent": tool.agent.key if tool.agent else None}
    target = str(tool.pk)
    deleted, _ = CustomTool.objects.for_tenant(actor.tenant).filter(pk=tool.pk).delete()
    if not deleted:
        raise ServiceError(ErrorCode.NOT_FOUND, "Custom tool not found.", status=404)
    config_changed(actor.tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="custom_tool.deleted",
        target_type="custom_tool",
        target_id=target,
        data=data,
    )


def _test_context(*, actor: Actor, agent: Agent, user_id: str) -> CallContext:
    """The call context the pipeline would give ``agent`` for ``user_id``: its workspace, its effective
    exec deny groups and tool settings, and a fresh scrubber holding the setting secrets."""

    tenant = actor.tenant
    policy = engine.resolve(tenant, agent, CallScope(user_id=user_id))
    secrets = setting_secrets_for_call(tenant=tenant, agent=agent)
    settings = runtime_settings.effective(tenant.settings, agent.settings, secrets=secrets)
    return call_context.build(
        actor=actor,
        agent=agent,
        call_id=uuid.uuid4().hex,
        scrubber=Scrubber([*secrets[0].values(), *secrets[1].values()]),
        settings=settings,
        deny_groups=policy.shell_deny_groups,
        user_id=user_id,
        origin="system",
    )


def custom_tool_test_run(
    *, actor: Actor, tool: CustomTool, agent: Agent | None, args: Any, user_id: str = ""
) -> dict[str, Any]:
    """Run ``tool`` once with sample ``args`` for ``agent`` (its workspace and deny-group settings; an
    agent's own tool defaults to its agent), enabled or not, through every step an agent's call takes
    (schema, render, working directory, safeguard, deny groups, run). Answers the output and the
    rendered command through the scrubber (the tool's env values masked), and the decision path.
    Audited and published with the outcome, never the output. Runs outside a transaction: the command
    may take up to its timeout."""
    if agent is None:
        agent = tool.agent
    errors: dict[str, list[str]] = {}
    if agent is None:
        errors["agent"] = ["required for a global tool: the agent whose workspace and settings the run uses."]
    elif agent.tenant_id != actor.tenant.pk:
        errors["agent"] = ["no such agent in this tenant."]
    elif tool.agent is not None and agent.pk != tool.agent_id:
        errors["agent"] = [f"this tool belongs to the agent {tool.agent.key!r}; test it with that agent."]
    if not isinstance(args, dict):
        errors["args"] = ["must be an object of arguments."]
    elif len(repr(args)) > MAX_TEST_ARGS_BYTES:
        errors["args"] = [f"at most {MAX_TEST_ARGS_BYTES} bytes of arguments."]
    if not isinstance(user_id, str) or len(user_id) > MAX_USER_ID:
        errors["user_id"] = [f"a string of at most {MAX_USER_ID} characters."]
    if errors:
        raise invalid_fields(errors)
    assert agent is not None
    ctx = _test_context(actor=actor, agent=agent, user_id=user_id)
    spec = ToolSpec.of(tool)
    run = execute(ctx, spec, dict(args), check_schema=True)
    scrub = ctx.scrubber.scrub
    stopped = next((step.step for step in run.steps if not step.ok), None)
    outcome = run.outcome
    answer: dict[str, Any] = {
        "tool": tool.name,
        "agent": agent.key,
        "ok": not run.result.is_error,
        "output": scrub(run.result.for_llm),
        "rendered_command": scrub(run.rendered),
        "steps": [{"step": s.step, "ok": s.ok, "detail": scrub(s.detail)} for s in run.steps],
        "stopped_at": stopped if stopped is not None and stopped != "run" else None,
        "exit_code": outcome.exit_code if outcome is not None else None,
        "timed_out": outcome.timed_out if outcome is not None else False,
        "duration_ms": round(outcome.seconds * 1000) if outcome is not None else 0,
    }
    audit = {
        "id": str(tool.pk),
        "name": tool.name,
        "agent": agent.key,
        "user_id": user_id,
        "arguments": sorted(str(k) for k in args),
        "ok": answer["ok"],
        "stopped_at": answer["stopped_at"],
        "steps": [{"step": s.step, "ok": s.ok} for s in run.steps],
        "exit_code": answer["exit_code"],
        "timed_out": answer["timed_out"],
        "duration_ms": answer["duration_ms"],
    }
    with transaction.atomic():
        record_and_publish(
            actor=actor,
            topic=TOPIC,
            verb="custom_tool.tested",
            target_type="custom_tool",
            target_id=str(tool.pk),
            data=audit,
        )
    return answer
