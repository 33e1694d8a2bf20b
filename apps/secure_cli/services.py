"""Every write to credentialed CLIs: binaries, agent grants, users' credentials, and the administrators'
test run. Each write is atomic, validated field by field, audited (secrets never: only the names of
environment variables), published on the tenant's ``secure_cli`` topic after commit, and, when it can
change what an agent reaches or is told, raises the tenant's ``config_version``.
"""

from __future__ import annotations

import shlex
import time
import uuid
from typing import Any

from django.db import IntegrityError, transaction

from apps.audit.services import record_and_publish
from apps.sandbox.placement import placement_for
from apps.secure_cli import execution, validation
from apps.secure_cli.models import SecureCLIAgentGrant, SecureCLIBinary, SecureCLIUserCredential
from apps.secure_cli.presets import PRESETS
from apps.tenants.actors import Actor
from apps.tenants.errors import Conflict, ErrorCode, ServiceError
from apps.tenants.models import Agent
from apps.tenants.services import config_changed
from apps.toolkit import context as call_context
from apps.toolkit import runtime_settings, shell_parse
from apps.toolkit.results import ToolResult
from apps.toolkit.scrubber import Scrubber
from apps.toolkit.workspace import real_workspace

TOPIC = "secure_cli"
BINARY_FIELDS = (
    "binary_name",
    "binary_path",
    "description",
    "env",
    "deny_args",
    "deny_verbose",
    "timeout_seconds",
    "tips",
    "is_global",
    "enabled",
)
MAX_TEST_ARGS = 100
MAX_TEST_ARG_CHARS = 4096
MAX_TEST_OUTPUT_CHARS = 64 * 1024


def _invalid(errors: dict[str, str]) -> ServiceError:
    field, message = next(iter(errors.items()))
    return ServiceError(ErrorCode.INVALID, f"{field}: {message}", details={k: [v] for k, v in errors.items()})


# --- binaries --------------------------------------------------------------------------------------------


def binary_data(binary: SecureCLIBinary) -> dict[str, Any]:
    """What may be shown and audited of a binary: its environment by variable name only."""
    return {
        "id": str(binary.pk),
        "binary_name": binary.binary_name,
        "binary_path": binary.binary_path,
        "description": binary.description,
        "env": sorted(binary.env),
        "deny_args": list(binary.deny_args or []),
        "deny_verbose": list(binary.deny_verbose or []),
        "timeout_seconds": binary.timeout_seconds,
        "tips": binary.tips,
        "is_global": binary.is_global,
        "enabled": binary.enabled,
        "preset": binary.preset,
        "created_by": binary.created_by,
    }


def _check_binary(fields: dict[str, Any]) -> None:
    """Every field of a binary as it would be saved; raises with each problem by field."""
    errors: dict[str, str] = {}
    name = fields["binary_name"]
    checks = {
        "binary_name": validation.binary_name_error(name),
        "description": validation.text_error(fields["description"], validation.MAX_DESCRIPTION_CHARS),
        "env": validation.env_error(fields["env"]),
        "deny_args": validation.pattern_list_error(fields["deny_args"]),
        "deny_verbose": validation.pattern_list_error(fields["deny_verbose"]),
        "timeout_seconds": validation.timeout_error(fields["timeout_seconds"]),
        "tips": validation.text_error(fields["tips"], validation.MAX_TIPS_CHARS),
        "is_global": validation.flag_error(fields["is_global"]),
        "enabled": validation.flag_error(fields["enabled"]),
    }
    if not checks["binary_name"]:
        checks["binary_path"] = validation.binary_path_error(fields["binary_path"], name)
    errors = {key: message for key, message in checks.items() if message}
    if errors:
        raise _invalid(errors)


def _current(binary: SecureCLIBinary) -> dict[str, Any]:
    return {key: getattr(binary, key) for key in BINARY_FIELDS}


def _apply(binary: SecureCLIBinary, fields: dict[str, Any]) -> None:
    _check_binary(fields)
    for key in BINARY_FIELDS:
        setattr(binary, key, fields[key])


def _save(binary: SecureCLIBinary, **kwargs: Any) -> None:
    try:
        with transaction.atomic():
            binary.save(**kwargs)
    except IntegrityError:
        raise Conflict(
            ErrorCode.CONFLICT, f"binary_name: {binary.binary_name!r} is registered already."
        ) from None


@transaction.atomic
def binary_create(*, actor: Actor, preset: str | None = None, **fields: Any) -> SecureCLIBinary:
    """Register a binary. With ``preset`` (gh, gcloud, aws, kubectl, terraform) its name, deny lists,
    timeout, tips and description come from the template unless given, and the template's required
    variables must be in ``env``."""
    unknown = set(fields) - set(BINARY_FIELDS)
    if unknown:
        raise _invalid({sorted(unknown)[0]: "unknown field."})
    binary = SecureCLIBinary(tenant=actor.tenant, created_by=actor.label[:255])
    base = _current(binary)
    base.update({"deny_args": [], "deny_verbose": [], "env": {}})
    if preset is not None:
        template = PRESETS.get(preset) if isinstance(preset, str) else None
        if template is None:
            raise _invalid({"preset": f"one of {', '.join(sorted(PRESETS))}."})
        base.update(
            {
                "binary_name": template.name,
                "description": template.description,
                "deny_args": list(template.deny_args),
                "deny_verbose": list(template.deny_verbose),
                "timeout_seconds": template.timeout_seconds,
                "tips": template.tips,
            }
        )
        env = fields.get("env", {})
        missing = [n for n in template.required_env if not (isinstance(env, dict) and env.get(n))]
        if missing:
            raise _invalid({"env": f"the {preset} preset needs {', '.join(missing)}."})
        binary.preset = template.name
    elif "binary_name" not in fields:
        raise _invalid({"binary_name": "required (or a preset)."})
    _apply(binary, {**base, **fields})
    _save(binary)
    config_changed(actor.tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="secure_cli.binary.created",
        target_type="secure_cli_binary",
        target_id=str(binary.pk),
        data=binary_data(binary),
    )
    return binary


@transaction.atomic
def binary_update(*, actor: Actor, binary: SecureCLIBinary, **changes: Any) -> SecureCLIBinary:
    """Change any field; ``env`` replaces the whole environment. The result is validated as a whole."""
    unknown = set(changes) - set(BINARY_FIELDS)
    if unknown:
        raise _invalid({sorted(unknown)[0]: "unknown field."})
    locked = SecureCLIBinary.objects.for_tenant(actor.tenant).select_for_update().get(pk=binary.pk)
    before = _current(locked)
    _apply(locked, {**before, **changes})
    changed = sorted(key for key in BINARY_FIELDS if before[key] != getattr(locked, key))
    if not changed:
        return locked
    columns = ["env_encrypted" if key == "env" else key for key in changed]
    _save(locked, update_fields=[*columns, "updated_at"])
    config_changed(actor.tenant)
    data = {**binary_data(locked), "changed": changed}
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="secure_cli.binary.updated",
        target_type="secure_cli_binary",
        target_id=str(locked.pk),
        data=data,
    )
    return locked


@transaction.atomic
def binary_delete(*, actor: Actor, binary: SecureCLIBinary) -> None:
    data = {"id": str(binary.pk), "binary_name": binary.binary_name}
    deleted, _ = SecureCLIBinary.objects.for_tenant(actor.tenant).filter(pk=binary.pk).delete()
    if not deleted:
        raise ServiceError(ErrorCode.NOT_FOUND, "Credentialed CLI not found.", status=404)
    config_changed(actor.tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="secure_cli.binary.deleted",
        target_type="secure_cli_binary",
        target_id=data["id"],
        data=data,
    )


# --- agent grants ---------------------------------------------------------------------------------------


def grant_data(grant: SecureCLIAgentGrant) -> dict[str, Any]:
    return {
        "id": str(grant.pk),
        "binary": grant.binary.binary_name,
        "binary_id": str(grant.binary_id),
        "agent": grant.agent.key,
        "enabled": grant.enabled,
        "deny_args": grant.deny_args,
        "deny_verbose": grant.deny_verbose,
        "timeout_seconds": grant.timeout_seconds,
        "tips": grant.tips,
        "env": sorted(grant.env),
        "granted_by": grant.granted_by,
    }


@transaction.atomic
def grant_set(
    *,
    actor: Actor,
    binary: SecureCLIBinary,
    agent: Agent,
    enabled: bool = True,
    deny_args: list[str] | None = None,
    deny_verbose: list[str] | None = None,
    timeout_seconds: int | None = None,
    tips: str | None = None,
    env: dict[str, str] | None = None,
) -> tuple[SecureCLIAgentGrant, bool]:
    """Create or replace ``agent``'s grant of ``binary`` (``(grant, created)``). Overrides left null use
    the binary's settings; ``env`` left out keeps the grant's environment (``{}`` clears it)."""
    if binary.tenant_id != actor.tenant.pk or agent.tenant_id != actor.tenant.pk:
        raise ServiceError(ErrorCode.INVALID, "binary and agent: of this tenant only.")
    checks = {
        "enabled": validation.flag_error(enabled),
        "deny_args": validation.pattern_list_error(deny_args, nullable=True),
        "deny_verbose": validation.pattern_list_error(deny_verbose, nullable=True),
        "timeout_seconds": validation.timeout_error(timeout_seconds, nullable=True),
        "tips": validation.text_error(tips, validation.MAX_TIPS_CHARS, nullable=True),
        "env": validation.env_error(env) if env is not None else "",
    }
    errors = {key: message for key, message in checks.items() if message}
    if errors:
        raise _invalid(errors)
    grant = (
        SecureCLIAgentGrant.objects.for_tenant(actor.tenant)
        .select_for_update()
        .filter(binary_id=binary.pk, agent_id=agent.pk)
        .first()
    )
    created = grant is None
    if grant is None:
        grant = SecureCLIAgentGrant(tenant=actor.tenant, binary=binary, agent=agent)
    grant.enabled = enabled
    grant.deny_args = deny_args
    grant.deny_verbose = deny_verbose
    grant.timeout_seconds = timeout_seconds
    grant.tips = tips
    if env is not None:
        grant.env = env
    grant.granted_by = actor.label[:255]
    grant.save()
    config_changed(actor.tenant)
    verb = "secure_cli.grant.created" if created else "secure_cli.grant.updated"
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb=verb,
        target_type="secure_cli_grant",
        target_id=str(grant.pk),
        data=grant_data(grant),
    )
    return grant, created


@transaction.atomic
def grant_delete(*, actor: Actor, grant: SecureCLIAgentGrant) -> None:
    data = grant_data(grant)
    deleted, _ = SecureCLIAgentGrant.objects.for_tenant(actor.tenant).filter(pk=grant.pk).delete()
    if not deleted:
        raise ServiceError(ErrorCode.NOT_FOUND, "Grant not found.", status=404)
    config_changed(actor.tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="secure_cli.grant.deleted",
        target_type="secure_cli_grant",
        target_id=data["id"],
        data=data,
    )


# --- users' credentials -----------------------------------------------------------------------------------


def credential_data(credential: SecureCLIUserCredential) -> dict[str, Any]:
    return {
        "id": str(credential.pk),
        "binary": credential.binary.binary_name,
        "binary_id": str(credential.binary_id),
        "user_id": credential.user_id,
        "env": sorted(credential.env),
        "set_by": credential.set_by,
    }


@transaction.atomic
def credential_set(
    *, actor: Actor, binary: SecureCLIBinary, user_id: str, env: dict[str, str]
) -> tuple[SecureCLIUserCredential, bool]:
    """Create or replace ``user_id``'s own environment for ``binary`` (``(credential, created)``)."""
    if binary.tenant_id != actor.tenant.pk:
        raise ServiceError(ErrorCode.INVALID, "binary: of this tenant only.")
    errors = {
        key: message
        for key, message in (
            ("user_id", validation.user_id_error(user_id)),
            ("env", validation.env_error(env)),
        )
        if message
    }
    if errors:
        raise _invalid(errors)
    credential = (
        SecureCLIUserCredential.objects.for_tenant(actor.tenant)
        .select_for_update()
        .filter(binary_id=binary.pk, user_id=user_id)
        .first()
    )
    created = credential is None
    if credential is None:
        credential = SecureCLIUserCredential(tenant=actor.tenant, binary=binary, user_id=user_id)
    credential.env = env
    credential.set_by = actor.label[:255]
    credential.save()
    verb = "secure_cli.credential.created" if created else "secure_cli.credential.updated"
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb=verb,
        target_type="secure_cli_credential",
        target_id=str(credential.pk),
        data=credential_data(credential),
    )
    return credential, created


@transaction.atomic
def credential_delete(*, actor: Actor, credential: SecureCLIUserCredential) -> None:
    data = credential_data(credential)
    deleted, _ = SecureCLIUserCredential.objects.for_tenant(actor.tenant).filter(pk=credential.pk).delete()
    if not deleted:
        raise ServiceError(ErrorCode.NOT_FOUND, "Credentials not found.", status=404)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="secure_cli.credential.deleted",
        target_type="secure_cli_credential",
        target_id=data["id"],
        data=data,
    )


# --- test run ----------------------------------------------------------------------------------------------


def _check_test_args(args: Any, user_id: Any) -> None:
    errors: dict[str, str] = {}
    if (
        not isinstance(args, list)
        or len(args) > MAX_TEST_ARGS
        or not all(isinstance(a, str) and len(a) <= MAX_TEST_ARG_CHARS and "\x00" not in a for a in args)
    ):
        errors["args"] = (
            f"a list of at most {MAX_TEST_ARGS} strings of at most {MAX_TEST_ARG_CHARS} characters, no NUL."
        )
    if not isinstance(user_id, str) or (user_id and validation.user_id_error(user_id)):
        errors["user_id"] = "empty, or a user id of 1 to 255 characters."
    if errors:
        raise _invalid(errors)


def binary_test(
    *, actor: Actor, binary: SecureCLIBinary, agent: Agent, args: list[str], user_id: str = ""
) -> dict[str, Any]:
    """Run ``binary`` with ``args`` as ``agent`` (acting for ``user_id``) would through ``exec``: the
    same lookup (grants, overrides, the user's credentials), checks and direct execution. Answers the
    output and the command with every credential value masked, and each decision taken. Audited with
    the outcome and the decisions (not the output). Runs outside a transaction: the program may take
    up to its timeout."""
    _check_test_args(args, user_id)
    if binary.tenant_id != actor.tenant.pk or agent.tenant_id != actor.tenant.pk:
        raise ServiceError(ErrorCode.INVALID, "binary and agent: of this tenant only.")
    started = time.perf_counter()
    scrubber = Scrubber()
    ctx = call_context.build(
        actor=actor,
        agent=agent,
        call_id=uuid.uuid4().hex,
        scrubber=scrubber,
        settings=runtime_settings.effective(actor.tenant.settings, agent.settings),
        user_id=user_id,
    )
    command = shlex.join([binary.binary_name, *args])
    trace = execution.Trace()
    normalised = shell_parse.normalize(command)
    plan = execution.plan(ctx, normalised, trace)
    result: ToolResult
    if plan.route is not None and plan.route.binary.pk == binary.pk:
        result = execution.run_credentialed(
            ctx, normalised, plan.route, real_workspace(ctx.workspace), trace, place=placement_for(ctx)
        )
    else:
        reason = plan.refusal or (
            f"{binary.binary_name} is not reachable for agent {agent.key}: it is disabled, or restricted "
            "and not granted to this agent, or this agent's grant is disabled."
        )
        result = ToolResult.error(reason)
    output = scrubber.scrub(result.for_llm)
    if len(output) > MAX_TEST_OUTPUT_CHARS:
        output = output[:MAX_TEST_OUTPUT_CHARS] + "\n[output shortened for the test run]"
    outcome: dict[str, Any] = {
        "id": str(binary.pk),
        "binary_name": binary.binary_name,
        "agent": agent.key,
        "user_id": user_id,
        "command": scrubber.scrub(command),
        "ok": not result.is_error,
        "exit_code": result.data.get("exit_code"),
        "timed_out": bool(result.data.get("timed_out", False)),
        "decision": trace.steps,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
    }
    with transaction.atomic():
        record_and_publish(
            actor=actor,
            topic=TOPIC,
            verb="secure_cli.binary.tested",
            target_type="secure_cli_binary",
            target_id=str(binary.pk),
            data=outcome,
        )
    return {**outcome, "output": output}
