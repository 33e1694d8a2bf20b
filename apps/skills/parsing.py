"""SKILL.md: YAML frontmatter between ``---`` lines, then the Markdown body.

::

    ---
    name: release-notes
    description: Write release notes from merged pull requests.
    triggers: [release notes, changelog]
    ---
    # Release notes
    ...

``name`` (lower-case letters, digits and ``-``; at most 64) and ``description`` (at most 1024
characters) are required; ``triggers`` (a list, or one comma-separated string; at most 20 of at most
100 characters each) are the phrases that activate the skill when a user's message contains them. Other
keys are kept as they are. The frontmatter is read with PyYAML's safe loader, bounded in size, and
without anchors or aliases (a few bytes of aliases can expand to gigabytes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from apps.skills.models import (
    MAX_CONTENT_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_TRIGGER_CHARS,
    MAX_TRIGGERS,
    NAME_RE,
)

MAX_FRONTMATTER_CHARS = 8_000
_FENCE = "---"
_CLOSERS = ("---", "...")
_NAME = re.compile(NAME_RE)
EXAMPLE = "---\nname: my-skill\ndescription: What the skill is for.\ntriggers: [a phrase, another]\n---\n"


class SkillFormatError(ValueError):
    """A SKILL.md text that cannot be a skill. ``field`` is what is wrong (``content``, ``name``,
    ``description`` or ``triggers``); the message says how to fix it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ParsedSkill:
    name: str
    description: str
    triggers: tuple[str, ...]
    body: str
    metadata: dict[str, Any] = field(default_factory=dict)  # the whole frontmatter


def _split(text: str) -> tuple[str, str]:
    """(frontmatter text, body) of a SKILL.md text."""
    if not isinstance(text, str) or not text.strip():
        raise SkillFormatError("content", "content: empty. A SKILL.md starts with a frontmatter:\n" + EXAMPLE)
    if len(text) > MAX_CONTENT_CHARS:
        raise SkillFormatError(
            "content",
            f"content: a SKILL.md holds at most {MAX_CONTENT_CHARS} characters; this one has {len(text)}.",
        )
    if "\x00" in text:
        raise SkillFormatError("content", "content: NUL characters are not allowed in a SKILL.md.")
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != _FENCE:
        raise SkillFormatError(
            "content",
            "content: a SKILL.md starts with a '---' line, the YAML frontmatter and another "
            "'---' line, e.g.\n" + EXAMPLE,
        )
    for index in range(1, len(lines)):
        if lines[index].rstrip() in _CLOSERS:
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise SkillFormatError("content", "content: the frontmatter has no closing '---' line.")


def _load(frontmatter: str) -> dict[str, Any]:
    if len(frontmatter) > MAX_FRONTMATTER_CHARS:
        raise SkillFormatError(
            "content",
            f"content: the frontmatter holds at most {MAX_FRONTMATTER_CHARS} characters; move "
            "long text into the body.",
        )
    try:
        for event in yaml.parse(frontmatter, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise SkillFormatError(
                    "content", "content: YAML anchors and aliases are not allowed in the frontmatter."
                )
        value = yaml.safe_load(frontmatter)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" (frontmatter line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise SkillFormatError("content", f"content: invalid YAML{where}: {error.problem}.") from None
    except yaml.YAMLError as error:
        raise SkillFormatError("content", f"content: invalid YAML in the frontmatter: {error}.") from None
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise SkillFormatError(
            "content", "content: the frontmatter must be a YAML mapping (key: value lines)."
        )
    return {str(key): item for key, item in value.items()}


def check_name(value: Any) -> str:
    if value is None or value == "":
        raise SkillFormatError("name", "name: missing. Give the skill a name such as 'release-notes'.")
    if not isinstance(value, str) or not _NAME.match(value):
        raise SkillFormatError(
            "name",
            f"name: {str(value)[:80]!r} is not a valid skill name: use 1 to 64 lower-case letters, digits "
            "and '-', starting with a letter or digit (e.g. 'release-notes').",
        )
    return value


def check_description(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SkillFormatError(
            "description", "description: missing. Say in a sentence what the skill is for and when to use it."
        )
    text = str(value).strip()
    if len(text) > MAX_DESCRIPTION_CHARS:
        raise SkillFormatError(
            "description",
            f"description: at most {MAX_DESCRIPTION_CHARS} characters; this one has {len(text)}.",
        )
    return text


def check_triggers(value: Any) -> tuple[str, ...]:
    """Triggers as a list of phrases (a comma-separated string is split), trimmed, without repeats."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, list):
        items = value
    else:
        raise SkillFormatError("triggers", "triggers: a list of phrases, or one comma-separated string.")
    found: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise SkillFormatError(
                "triggers", f"triggers: every trigger is a phrase (text); got {item!r:.80}."
            )
        phrase = " ".join(item.split())
        if not phrase:
            continue
        if len(phrase) > MAX_TRIGGER_CHARS:
            raise SkillFormatError(
                "triggers",
                f"triggers: each at most {MAX_TRIGGER_CHARS} characters; {phrase[:40]!r}… is longer.",
            )
        if phrase.lower() not in (known.lower() for known in found):
            found.append(phrase)
    if len(found) > MAX_TRIGGERS:
        raise SkillFormatError("triggers", f"triggers: at most {MAX_TRIGGERS}; there are {len(found)}.")
    return tuple(found)


def parse(text: str) -> ParsedSkill:
    """The skill a SKILL.md text defines, or :class:`SkillFormatError`."""
    frontmatter, body = _split(text)
    metadata = _load(frontmatter)
    return ParsedSkill(
        name=check_name(metadata.get("name")),
        description=check_description(metadata.get("description")),
        triggers=check_triggers(metadata.get("triggers")),
        body=body.lstrip("\n"),
        metadata=metadata,
    )


def render(metadata: dict[str, Any], body: str) -> str:
    """A SKILL.md text of ``metadata`` (key order kept) and ``body``."""
    frontmatter = yaml.safe_dump(metadata, sort_keys=False, allow_unicode=True, width=1000).rstrip("\n")
    return f"{_FENCE}\n{frontmatter}\n{_FENCE}\n{body}"


def build(*, name: str, description: str, triggers: list[str] | tuple[str, ...], body: str) -> str:
    """A SKILL.md text from explicit fields."""
    metadata: dict[str, Any] = {"name": name, "description": description}
    if triggers:
        metadata["triggers"] = list(triggers)
    return render(metadata, body)


def body_of(text: str) -> str:
    """The body of a stored SKILL.md (the text after the frontmatter)."""
    try:
        return _split(text)[1].lstrip("\n")
    except SkillFormatError:
        return text
