"""Every write to context files. Each is atomic, audited (sizes and a digest, never the text) and
published on the tenant's ``context_files`` topic after commit.

Administrators write through the API and the dashboard; an agent writes through its file tools
(``via="tool"``), where :mod:`apps.context_files.interceptor` has already decided which copy the call
may change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import IntegrityError, transaction
from django.db.models import Model

from apps.audit.services import record_and_publish
from apps.context_files.models import (
    MAX_CONTENT_BYTES,
    MAX_USER_ID,
    AgentContextFile,
    BootstrapCompletion,
    UserContextFile,
)
from apps.context_files.routing import BOOTSTRAP
from apps.context_files.selectors import known_name
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent

TOPIC = "context_files"
VIAS = ("api", "dashboard", "tool")

_M = TypeVar("_M", bound=Model)


def size_of(content: str) -> int:
    return len(content.encode("utf-8", errors="surrogatepass"))


def check_content(content: str) -> str:
    """``content`` when it fits a context file, else a 400 saying how large it is."""
    if "\x00" in content:
        raise ServiceError(
            ErrorCode.INVALID,
            "content: context files are text; remove the NUL characters.",
            details={"content": ["contains NUL characters."]},
        )
    size = size_of(content)
    if size > MAX_CONTENT_BYTES:
        message = (
            f"content is {size} bytes; a context file holds at most {MAX_CONTENT_BYTES} bytes (256 KiB). "
            "Shorten it."
        )
        raise ServiceError(ErrorCode.INVALID, f"content: {message}", details={"content": [message]})
    return content


def check_user_id(user_id: str) -> str:
    if not user_id or len(user_id) > MAX_USER_ID or "\x00" in user_id:
        message = f"a user id is 1-{MAX_USER_ID} characters without NUL."
        raise ServiceError(ErrorCode.INVALID, f"user_id: {message}", details={"user_id": [message]})
    return user_id


def _data(
    agent: Agent, name: str, *, user_id: str, via: str, content: str | None = None, append: bool = False
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "agent": agent.key,
        "name": name,
        "scope": "user" if user_id else "agent",
        "user_id": user_id or None,
        "via": via,
    }
    if content is not None:
        data["bytes"] = size_of(content)
        data["sha256"] = hashlib.sha256(content.encode("utf-8", errors="surrogatepass")).hexdigest()
        data["append"] = append
    return data


def _locked_upsert(find: Callable[[], _M | None], create: Callable[[], _M]) -> tuple[_M, bool]:
    """The row ``find`` locks, or a new one from ``create``; a concurrent insert of the same row is
    retried once as an update."""
    for _ in range(2):
        row = find()
        if row is not None:
            return row, False
        try:
            with transaction.atomic():
                return create(), True
        except IntegrityError:
            continue
    raise ServiceError(ErrorCode.CONFLICT, "the file changed meanwhile; try again.", status=409)


@transaction.atomic
def agent_file_save(
    *, actor: Actor, agent: Agent, name: str, content: str, append: bool = False, via: str = "api"
) -> AgentContextFile:
    """Set (or append to) the agent's own text of ``name``."""
    known_name(name)
    tenant = actor.tenant
    check_content(content)
    row, created = _locked_upsert(
        lambda: (
            AgentContextFile.objects.for_tenant(tenant)
            .select_for_update()
            .filter(agent=agent, name=name)
            .first()
        ),
        lambda: AgentContextFile.objects.create(
            tenant=tenant, agent=agent, name=name, content=content, updated_by=actor.label[:300]
        ),
    )
    if not created:
        row.content = check_content(row.content + content if append else content)
        row.updated_by = actor.label[:300]
        row.save(update_fields=["content", "updated_by", "updated_at"])
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="context_file.saved",
        target_type="context_file",
        target_id=str(row.pk),
        data=_data(agent, name, user_id="", via=via, content=row.content, append=append),
    )
    return row


@transaction.atomic
def agent_file_delete(*, actor: Actor, agent: Agent, name: str, via: str = "api") -> None:
    """Delete the agent's own text of ``name`` (404 when it has none)."""
    known_name(name)
    row = AgentContextFile.objects.for_tenant(actor.tenant).filter(agent=agent, name=name).first()
    if row is None:
        raise ServiceError(
            ErrorCode.NOT_FOUND, f"the agent {agent.key} has no text of its own for {name}.", status=404
        )
    target = str(row.pk)
    row.delete()
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="context_file.deleted",
        target_type="context_file",
        target_id=target,
        data=_data(agent, name, user_id="", via=via),
    )


@transaction.atomic
def user_file_save(
    *,
    actor: Actor,
    agent: Agent,
    user_id: str,
    name: str,
    content: str,
    append: bool = False,
    via: str = "tool",
) -> UserContextFile:
    """Set (or append to) ``user_id``'s own copy of ``name``. Appending when the user has no copy yet
    starts from the agent's text, as reads show it."""
    known_name(name)
    check_user_id(user_id)
    check_content(content)
    tenant = actor.tenant

    def start() -> UserContextFile:
        text = content
        if append:
            template = AgentContextFile.objects.for_tenant(tenant).filter(agent=agent, name=name).first()
            text = (template.content if template is not None else "") + content
        return UserContextFile.objects.create(
            tenant=tenant,
            agent=agent,
            user_id=user_id,
            name=name,
            content=check_content(text),
            updated_by=actor.label[:300],
        )

    row, created = _locked_upsert(
        lambda: (
            UserContextFile.objects.for_tenant(tenant)
            .select_for_update()
            .filter(agent=agent, user_id=user_id, name=name)
            .first()
        ),
        start,
    )
    if not created:
        row.content = check_content(row.content + content if append else content)
        row.updated_by = actor.label[:300]
        row.save(update_fields=["content", "updated_by", "updated_at"])
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="context_file.saved",
        target_type="context_file",
        target_id=str(row.pk),
        data=_data(agent, name, user_id=user_id, via=via, content=row.content, append=append),
    )
    return row


@transaction.atomic
def user_file_delete(*, actor: Actor, agent: Agent, user_id: str, name: str, via: str = "api") -> bool:
    """Delete ``user_id``'s own copy of ``name``; False (and nothing recorded) when there is none."""
    known_name(name)
    check_user_id(user_id)
    row = (
        UserContextFile.objects.for_tenant(actor.tenant)
        .filter(agent=agent, user_id=user_id, name=name)
        .first()
    )
    if row is None:
        return False
    target = str(row.pk)
    row.delete()
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="context_file.deleted",
        target_type="context_file",
        target_id=target,
        data=_data(agent, name, user_id=user_id, via=via),
    )
    return True


@transaction.atomic
def bootstrap_complete(*, actor: Actor, agent: Agent, user_id: str, via: str = "tool") -> bool:
    """``user_id``'s first run with ``agent`` is complete: their copy of BOOTSTRAP.md (if any) is deleted
    and the completion recorded, so that they no longer read the agent's template either. Returns
    whether a copy was deleted."""
    check_user_id(user_id)
    deleted = user_file_delete(actor=actor, agent=agent, user_id=user_id, name=BOOTSTRAP, via=via)
    tenant = actor.tenant
    row, created = _locked_upsert(
        lambda: (
            BootstrapCompletion.objects.for_tenant(tenant)
            .select_for_update()
            .filter(agent=agent, user_id=user_id)
            .first()
        ),
        lambda: BootstrapCompletion.objects.create(
            tenant=tenant, agent=agent, user_id=user_id, completed_by=actor.label[:300]
        ),
    )
    if not created:
        row.completed_by = actor.label[:300]
        row.save(update_fields=["completed_by", "updated_at"])
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="context_file.bootstrap_completed",
        target_type="context_file",
        target_id=str(row.pk),
        data=_data(agent, BOOTSTRAP, user_id=user_id, via=via),
    )
    return deleted


@transaction.atomic
def bootstrap_reset(*, actor: Actor, agent: Agent, user_id: str, via: str = "api") -> bool:
    """Forget that ``user_id`` completed the first run: they read the agent's BOOTSTRAP.md again.
    False (and nothing recorded) when no completion was recorded."""
    check_user_id(user_id)
    row = BootstrapCompletion.objects.for_tenant(actor.tenant).filter(agent=agent, user_id=user_id).first()
    if row is None:
        return False
    target = str(row.pk)
    row.delete()
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="context_file.bootstrap_reset",
        target_type="context_file",
        target_id=target,
        data=_data(agent, BOOTSTRAP, user_id=user_id, via=via),
    )
    return True
