"""Every write to skills. Each is atomic, validated as a whole (the SKILL.md is parsed: name,
description and triggers come from its frontmatter), audited in its transaction and published on the
tenant's ``skills`` topic after commit.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction

from apps.audit.services import record_and_publish
from apps.skills import parsing
from apps.skills.errors import SkillErrorCode
from apps.skills.models import (
    MAX_FILE_CHARS,
    MAX_FILE_PATH_CHARS,
    MAX_FILES,
    MAX_PUBLISHED_FROM_CHARS,
    MAX_SESSION_KEY_CHARS,
    MAX_USER_ID_CHARS,
    Skill,
    SkillFile,
    SkillUse,
)
from apps.skills.parsing import ParsedSkill, SkillFormatError
from apps.tenants.actors import Actor
from apps.tenants.errors import Conflict, ErrorCode, ServiceError
from apps.tenants.models import Agent

TOPIC = "skills"
SKILL_MD = "SKILL.md"


class _Unset:
    """The default of an argument that was not given (None means "global" for ``agent``)."""


UNSET = _Unset()


def skill_data(skill: Skill) -> dict[str, Any]:
    """What audit and live events say about a skill (never its content)."""
    return {
        "id": str(skill.pk),
        "name": skill.name,
        "description": skill.description,
        "triggers": list(skill.triggers),
        "scope": skill.scope,
        "agent": skill.agent.key if skill.agent_id and skill.agent is not None else None,
        "enabled": skill.enabled,
        "source": skill.source,
        "published_from": skill.published_from,
        "version": skill.version,
        "size": len(skill.content),
    }


def _invalid(field: str, message: str) -> ServiceError:
    return ServiceError(ErrorCode.INVALID, message, details={field: [message]})


def _parsed(content: str) -> ParsedSkill:
    try:
        return parsing.parse(content)
    except SkillFormatError as error:
        raise _invalid(error.field, error.message) from None


def _check_agent(actor: Actor, agent: Agent | None) -> None:
    if agent is not None and agent.tenant_id != actor.tenant.pk:
        raise _invalid("agent", "agent: no such agent in this tenant.")


def _duplicate(name: str, agent: Agent | None) -> Conflict:
    where = f"of the agent {agent.key!r}" if agent is not None else "global"
    message = f"name: a skill {name!r} ({where}) exists already; change that one or choose another name."
    return Conflict(SkillErrorCode.DUPLICATE_NAME, message, details={"name": ["in use in this scope."]})


def _check_free(actor: Actor, name: str, agent: Agent | None, exclude: Any = None) -> None:
    same = Skill.objects.for_tenant(actor.tenant).filter(name=name)
    same = same.filter(agent_id=agent.pk) if agent is not None else same.filter(agent__isnull=True)
    if exclude is not None:
        same = same.exclude(pk=exclude)
    if same.exists():
        raise _duplicate(name, agent)


def _save(skill: Skill, *, update_fields: list[str] | None = None) -> None:
    try:
        skill.full_clean(exclude=["tenant", "agent"], validate_constraints=False, validate_unique=False)
    except DjangoValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise ServiceError(ErrorCode.INVALID, f"{field}: {messages[0]}", details=exc.message_dict) from None
    try:
        with transaction.atomic():
            skill.save(update_fields=update_fields)
    except IntegrityError:
        raise _duplicate(skill.name, skill.agent) from None


def _apply(skill: Skill, parsed: ParsedSkill, content: str) -> None:
    skill.name = parsed.name
    skill.description = parsed.description
    skill.triggers = list(parsed.triggers)
    skill.content = content


def compose(*, name: Any, description: Any, triggers: Any = None, body: Any = "") -> str:
    """A SKILL.md text from explicit fields, each checked (400 by field)."""
    try:
        checked_name = parsing.check_name(name)
        checked_description = parsing.check_description(description)
        checked_triggers = parsing.check_triggers(triggers)
    except SkillFormatError as error:
        raise _invalid(error.field, error.message) from None
    if not isinstance(body, str):
        raise _invalid("body", "body: the Markdown instructions, as text.")
    return parsing.build(
        name=checked_name, description=checked_description, triggers=checked_triggers, body=body
    )


def _check_enabled(enabled: Any) -> None:
    if not isinstance(enabled, bool):
        raise _invalid("enabled", "enabled: true or false.")


@transaction.atomic
def skill_create(
    *,
    actor: Actor,
    content: str,
    agent: Agent | None = None,
    enabled: bool = True,
    source: str = Skill.Source.API,
) -> Skill:
    """Add a skill from its SKILL.md text (see :func:`compose` for one from fields), global (``agent``
    None) or one agent's. A text that is not a skill is 400 by field; a name the same scope uses
    already is 409."""
    _check_enabled(enabled)
    parsed = _parsed(content)
    _check_agent(actor, agent)
    _check_free(actor, parsed.name, agent)
    skill = Skill(tenant=actor.tenant, agent=agent, enabled=enabled, source=source)
    _apply(skill, parsed, content)
    skill.created_by = skill.updated_by = actor.label[:300]
    _save(skill)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="skill.created",
        target_type="skill",
        target_id=str(skill.pk),
        data=skill_data(skill),
    )
    return skill


def _edited_content(current: str, *, name: Any, description: Any, triggers: Any, body: Any) -> str:
    """``current`` with some frontmatter fields or the body replaced (other keys kept)."""
    parsed = _parsed(current)
    metadata = dict(parsed.metadata)
    if name is not None:
        metadata["name"] = name
    if description is not None:
        metadata["description"] = description
    if triggers is not None:
        if triggers:
            metadata["triggers"] = list(parsing.check_triggers(triggers))
        else:
            metadata.pop("triggers", None)
    return parsing.render(metadata, parsed.body if body is None else body)


@transaction.atomic
def skill_update(
    *,
    actor: Actor,
    skill: Skill,
    content: str | None = None,
    name: str | None = None,
    description: str | None = None,
    triggers: list[str] | str | None = None,
    body: str | None = None,
    enabled: bool | None = None,
    agent: Agent | _Unset | None = UNSET,
) -> Skill:
    """Change a skill: ``content`` replaces the whole SKILL.md; ``name``, ``description``,
    ``triggers`` or ``body`` change those parts of it (other frontmatter keys are kept); ``enabled``
    switches it; ``agent`` moves it to another agent, or makes it global with None. Every change of the
    content raises ``version``."""
    if content is not None and any(v is not None for v in (name, description, triggers, body)):
        raise _invalid("content", "content: give the whole SKILL.md, or some of its fields, not both.")
    if body is not None and not isinstance(body, str):
        raise _invalid("body", "body: the Markdown instructions, as text.")
    current = (
        Skill.objects.for_tenant(actor.tenant).select_for_update(of=("self",)).select_related("agent")
    ).get(pk=skill.pk)
    if content is None and any(v is not None for v in (name, description, triggers, body)):
        if triggers is not None and not isinstance(triggers, list | str):
            raise _invalid("triggers", "triggers: a list of phrases, or one comma-separated string.")
        content = _edited_content(
            current.content, name=name, description=description, triggers=triggers, body=body
        )
    if enabled is not None:
        _check_enabled(enabled)
    target_agent = current.agent if isinstance(agent, _Unset) else agent
    _check_agent(actor, target_agent)
    changed: list[str] = []
    if content is not None and content != current.content:
        parsed = _parsed(content)
        before = (current.name, current.description, list(current.triggers))
        _apply(current, parsed, content)
        after = (current.name, current.description, list(current.triggers))
        changed += [
            key
            for key, old, new in zip(("name", "description", "triggers"), before, after, strict=True)
            if old != new
        ]
        changed.append("content")
        current.version += 1
    if enabled is not None and enabled != current.enabled:
        current.enabled = enabled
        changed.append("enabled")
    new_agent_id = target_agent.pk if target_agent is not None else None
    if new_agent_id != current.agent_id:
        current.agent = target_agent
        changed.append("agent")
    if not changed:
        return current
    if {"name", "agent"} & set(changed):
        _check_free(actor, current.name, target_agent, exclude=current.pk)
    current.updated_by = actor.label[:300]
    columns = ["version"] if "content" in changed else []
    _save(current, update_fields=[*changed, *columns, "updated_by", "updated_at"])
    data = skill_data(current)
    data["changed"] = sorted(changed)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="skill.updated",
        target_type="skill",
        target_id=str(current.pk),
        data=data,
    )
    return current


@transaction.atomic
def skill_delete(*, actor: Actor, skill: Skill) -> None:
    """Delete a skill with its files and activations (its uses stay, by name)."""
    target = str(skill.pk)
    data = {"id": target, "name": skill.name, "agent": skill.agent.key if skill.agent else None}
    deleted, _ = Skill.objects.for_tenant(actor.tenant).filter(pk=skill.pk).delete()
    if not deleted:
        raise ServiceError(ErrorCode.NOT_FOUND, "Skill not found.", status=404)
    record_and_publish(
        actor=actor, topic=TOPIC, verb="skill.deleted", target_type="skill", target_id=target, data=data
    )


def clean_file_path(path: str) -> str:
    """A skill file's path relative to its directory ('/'-separated, no '..'), or ``ServiceError``."""
    if not isinstance(path, str) or not path or len(path) > MAX_FILE_PATH_CHARS:
        raise _invalid("files", f"files: a path of 1 to {MAX_FILE_PATH_CHARS} characters.")
    if any(ord(char) < 32 or ord(char) == 127 for char in path) or "\\" in path:
        raise _invalid("files", f"files: {path[:80]!r}: control characters and backslashes are not allowed.")
    normal = posixpath.normpath(path)
    if path.startswith("/") or normal.startswith("..") or normal in (".", SKILL_MD):
        raise _invalid("files", f"files: {path[:80]!r} is not a file inside the skill's directory.")
    return normal


@transaction.atomic
def skill_publish(
    *,
    actor: Actor,
    agent: Agent,
    content: str,
    files: Sequence[tuple[str, str]],
    published_from: str,
) -> tuple[Skill, bool]:
    """Register a skill directory as ``agent``'s skill of its frontmatter's name: created, or updated
    (version + 1) with its files replaced. Returns the skill and whether it was created."""
    parsed = _parsed(content)
    _check_agent(actor, agent)
    if len(files) > MAX_FILES:
        raise _invalid(
            "files", f"files: a skill has at most {MAX_FILES} files besides SKILL.md; found {len(files)}."
        )
    cleaned: dict[str, str] = {}
    for path, text in files:
        relative = clean_file_path(path)
        if len(text) > MAX_FILE_CHARS:
            raise _invalid(
                "files",
                f"files: {relative} has {len(text)} characters; a skill file holds at most {MAX_FILE_CHARS}.",
            )
        cleaned[relative] = text
    rows = Skill.objects.for_tenant(actor.tenant).filter(agent_id=agent.pk, name=parsed.name)
    locked = rows.select_for_update(of=("self",))

    def fill(skill: Skill) -> Skill:
        _apply(skill, parsed, content)
        skill.source = Skill.Source.PUBLISH
        skill.published_from = published_from[:MAX_PUBLISHED_FROM_CHARS]
        skill.updated_by = actor.label[:300]
        return skill

    skill = locked.first()
    created = False
    if skill is None:
        new = fill(Skill(tenant=actor.tenant, agent=agent, created_by=actor.label[:300]))
        try:
            _save(new)
        except Conflict:
            skill = locked.get()  # published at the same moment by another call: update that one
        else:
            skill, created = new, True
    if not created:
        skill.version += 1
        _save(fill(skill))
    SkillFile.objects.for_tenant(actor.tenant).filter(skill_id=skill.pk).delete()
    SkillFile.objects.bulk_create(
        [
            SkillFile(tenant=actor.tenant, skill=skill, path=path, content=text)
            for path, text in sorted(cleaned.items())
        ]
    )
    data = skill_data(skill)
    data["files"] = sorted(cleaned)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="skill.created" if created else "skill.updated",
        target_type="skill",
        target_id=str(skill.pk),
        data=data,
    )
    return skill, created


@transaction.atomic
def skill_use_record(
    *, actor: Actor, agent: Agent, skill: Skill, user_id: str, session_key: str, how: str
) -> SkillUse:
    """Record that ``agent`` used ``skill`` in one conversation (``how``: manual or auto)."""
    if how not in SkillUse.How.values:
        raise _invalid("how", "how: manual or auto.")
    use = SkillUse.objects.create(
        tenant=actor.tenant,
        skill=skill,
        skill_name=skill.name,
        agent=agent,
        user_id=user_id[:MAX_USER_ID_CHARS],
        session_key=session_key[:MAX_SESSION_KEY_CHARS],
        how=how,
    )
    data = {
        "id": str(use.pk),
        "skill": str(skill.pk),
        "name": skill.name,
        "agent": agent.key,
        "user_id": use.user_id,
        "session_key": use.session_key,
        "how": how,
    }
    record_and_publish(
        actor=actor, topic=TOPIC, verb="skill.used", target_type="skill", target_id=str(skill.pk), data=data
    )
    return use
