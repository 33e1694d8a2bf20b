"""The loading rules of active skills (seed 003 "Skill System"), per conversation: one agent, one user,
one session.

* A skill becomes active when the agent calls ``use_skill`` (manual) or when the user's message contains
  one of its triggers (auto; the agent loop passes the message to the context route).
* An active skill expires after :data:`AUTO_TTL_TURNS` turns without use (auto) or
  :data:`MANUAL_TTL_TURNS` (manual): at turn ``t`` a skill last used at turn ``u`` is still active while
  ``t - u <= ttl``. Using it again (``use_skill``, a trigger) counts as a use. ``use_skill`` runs in the
  middle of a turn whose number it does not know: its activation counts from the next turn reported.
* At most :data:`MAX_ACTIVE` skills are active; past that the least recently used one is dropped, and
  of two used at the same turn the auto-matched one goes first (manual ones outlive auto ones).
* The active skills' bodies are injected, most recently used first, while their combined length fits
  :data:`CONTENT_BUDGET_CHARS`; a skill that does not fit stays active, listed without its content.

The agent loop asks ``POST /api/v1/agents/<key>/skills/context`` once per turn, with the turn number,
and puts the answer into its system prompt.
"""

from __future__ import annotations

import functools
import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from apps.skills import parsing, selectors
from apps.skills.models import Skill, SkillActivation, SkillUse
from apps.skills.services import skill_use_record
from apps.tenants.actors import Actor
from apps.tenants.models import Agent

AUTO_TTL_TURNS = 4  # seed 003 DefaultSkillTTL
MANUAL_TTL_TURNS = 6  # seed 003 ManualSkillTTL
MAX_ACTIVE = 4  # seed 003 MaxActiveSkills
CONTENT_BUDGET_CHARS = 16_000  # seed 003 MaxSkillTokenBudget: the active skills' bodies together
MAX_MESSAGE_CHARS = 32_000  # of the user's message matched against triggers
MAX_TURN = 2**31 - 1


def ttl(manual: bool) -> int:
    return MANUAL_TTL_TURNS if manual else AUTO_TTL_TURNS


@dataclass(frozen=True)
class Hint:
    name: str
    description: str
    trigger: str  # the trigger found in the message


@dataclass(frozen=True)
class ActiveSkill:
    name: str
    manual: bool
    expires_after_turn: int | None  # None: activated during the current turn, counted from the next
    content: str | None  # the body, or None when it did not fit the budget
    truncated_reason: str | None


@dataclass(frozen=True)
class SkillContext:
    active: list[ActiveSkill]
    hints: list[Hint]
    used: int
    limit: int = CONTENT_BUDGET_CHARS

    def as_dict(self) -> dict[str, Any]:
        return {
            "active": [
                {
                    "name": a.name,
                    "manual": a.manual,
                    "expires_after_turn": a.expires_after_turn,
                    "content": a.content,
                    "truncated_reason": a.truncated_reason,
                }
                for a in self.active
            ],
            "hints": [
                {"name": h.name, "description": h.description, "trigger": h.trigger} for h in self.hints
            ],
            "budget": {"used": self.used, "limit": self.limit},
        }


@functools.lru_cache(maxsize=4096)
def _trigger_pattern(trigger: str) -> re.Pattern[str]:
    """A trigger matches as whole words, case-insensitively, whatever the spacing ("go" is not in
    "good"; "release notes" is in "Release  notes?")."""
    words = [re.escape(word) for word in trigger.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)


def match_triggers(message: str, skills: dict[str, Skill]) -> list[Hint]:
    """The skills whose triggers the message contains, best first (the longest trigger found, then by
    name); one hint per skill."""
    if not message.strip():
        return []
    found: list[tuple[int, str, Hint]] = []
    for name, skill in skills.items():
        hits = [
            t
            for t in skill.triggers
            if isinstance(t, str) and t.strip() and _trigger_pattern(t).search(message)
        ]
        if hits:
            best = max(hits, key=len)
            found.append((-len(best), name, Hint(name, skill.description, best)))
    return [hint for _, _, hint in sorted(found, key=lambda item: (item[0], item[1]))]


def _keep_order(row: SkillActivation, fresh: dict[uuid.UUID, int]) -> tuple[int, int, int, float]:
    """Sort key of what stays active, first kept first: the most recently used (an activation not yet
    counted is the newest), manual before auto, then the better trigger match of this turn, then the
    newest activation."""
    last = MAX_TURN + 1 if row.last_used_turn is None else row.last_used_turn
    rank = fresh.get(row.skill_id, MAX_ACTIVE)
    created = row.created_at.timestamp() if row.created_at else 0.0
    return (-last, 0 if row.manual else 1, rank, -created)


def enforce_cap(
    rows: list[SkillActivation], fresh: dict[uuid.UUID, int] | None = None
) -> list[SkillActivation]:
    """Delete all but the :data:`MAX_ACTIVE` rows to keep; returns the kept rows, first kept first."""
    ordered = sorted(rows, key=lambda row: _keep_order(row, fresh or {}))
    dropped = ordered[MAX_ACTIVE:]
    if dropped:
        tenant_id = dropped[0].tenant_id
        SkillActivation.objects.filter(tenant_id=tenant_id, pk__in=[row.pk for row in dropped]).delete()
    return ordered[:MAX_ACTIVE]


def _activation(
    actor: Actor, agent: Agent, user_id: str, session_key: str, skill: Skill
) -> tuple[SkillActivation, bool]:
    """The conversation's activation row of ``skill``, locked (created when missing)."""
    rows = selectors.activations(tenant=actor.tenant, agent=agent, user_id=user_id, session_key=session_key)
    row = rows.filter(skill_id=skill.pk).select_for_update().first()
    if row is not None:
        return row, False
    try:
        with transaction.atomic():
            return SkillActivation.objects.create(
                tenant=actor.tenant, agent=agent, user_id=user_id, session_key=session_key, skill=skill
            ), True
    except IntegrityError:
        return rows.filter(skill_id=skill.pk).select_for_update().get(), False


@transaction.atomic
def activate_manual(
    *, actor: Actor, agent: Agent, skill: Skill, user_id: str, session_key: str
) -> SkillActivation:
    """``use_skill``: record the use and make ``skill`` active (manual) in the conversation, counted
    from the next turn the agent loop reports."""
    skill_use_record(
        actor=actor,
        agent=agent,
        skill=skill,
        user_id=user_id,
        session_key=session_key,
        how=SkillUse.How.MANUAL,
    )
    row, _ = _activation(actor, agent, user_id, session_key, skill)
    row.manual = True
    row.last_used_turn = None
    row.save(update_fields=["manual", "last_used_turn", "updated_at"])
    current = list(
        selectors.activations(tenant=actor.tenant, agent=agent, user_id=user_id, session_key=session_key)
    )
    enforce_cap(current)
    return row


def _budget_note(size: int, left: int) -> str:
    return (
        f"not injected: its {size} characters do not fit the {CONTENT_BUDGET_CHARS}-character budget of "
        f"the active skills ({left} left); call use_skill to read it"
    )


@transaction.atomic
def skill_context(
    *, actor: Actor, agent: Agent, user_id: str, session_key: str, turn: int, message: str = ""
) -> SkillContext:
    """The conversation's skills at ``turn``: activations of earlier calls counted from this turn,
    expired ones deleted, the message's triggers activated (auto), the cap applied, and the bodies
    injected within the budget."""
    visible = selectors.visible_skills(tenant=actor.tenant, agent=agent)
    visible_ids = {skill.pk for skill in visible.values()}
    rows = list(
        selectors.activations(tenant=actor.tenant, agent=agent, user_id=user_id, session_key=session_key)
        .select_for_update()
        .order_by("created_at", "id")
    )
    gone: list[Any] = []
    kept: list[SkillActivation] = []
    for row in rows:
        if row.skill_id not in visible_ids:
            gone.append(row.pk)  # disabled, deleted, moved or shadowed since
            continue
        if row.last_used_turn is None:
            row.last_used_turn = turn
            row.activated_turn = row.activated_turn if row.activated_turn is not None else turn
            row.save(update_fields=["last_used_turn", "activated_turn", "updated_at"])
        elif turn - row.last_used_turn > ttl(row.manual):
            gone.append(row.pk)
            continue
        kept.append(row)
    if gone:
        SkillActivation.objects.for_tenant(actor.tenant).filter(pk__in=gone).delete()

    hints = match_triggers(message, visible) if message else []
    by_skill = {row.skill_id: row for row in kept}
    fresh: dict[uuid.UUID, int] = {}
    for rank, hint in enumerate(hints[:MAX_ACTIVE]):
        skill = visible[hint.name]
        known = by_skill.get(skill.pk)
        if known is not None:
            row = known
        else:
            # Created here, or just now by a concurrent call of this conversation (then not a new use).
            row, created = _activation(actor, agent, user_id, session_key, skill)
            by_skill[skill.pk] = row
            kept.append(row)
            if created:
                skill_use_record(
                    actor=actor,
                    agent=agent,
                    skill=skill,
                    user_id=user_id,
                    session_key=session_key,
                    how=SkillUse.How.AUTO,
                )
        if row.activated_turn is None:
            row.activated_turn = turn
        row.last_used_turn = max(turn, row.last_used_turn or 0)
        row.save(update_fields=["activated_turn", "last_used_turn", "updated_at"])
        fresh[skill.pk] = rank
    active_rows = enforce_cap(kept, fresh)

    skills_by_id = {skill.pk: skill for skill in visible.values()}
    used = 0
    active: list[ActiveSkill] = []
    for row in active_rows:
        skill = skills_by_id[row.skill_id]
        body = parsing.body_of(skill.content)
        content: str | None = body
        reason: str | None = None
        if used + len(body) > CONTENT_BUDGET_CHARS:
            content, reason = None, _budget_note(len(body), CONTENT_BUDGET_CHARS - used)
        else:
            used += len(body)
        expires = None if row.last_used_turn is None else row.last_used_turn + ttl(row.manual)
        active.append(ActiveSkill(skill.name, row.manual, expires, content, reason))
    return SkillContext(active=active, hints=hints, used=used)
