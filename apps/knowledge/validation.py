"""What an entity or a relation may hold, and how names and types are normalised.

Every check raises ``ServiceError`` (``invalid``) whose message and ``details`` name the field, with the
item's place in a bulk payload (``entities[3].name``), so a person or a model can fix exactly that.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from apps.knowledge.models import (
    MAX_ALIASES,
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    MAX_TYPE_CHARS,
    MAX_USER_ID_CHARS,
)
from apps.tenants.errors import ErrorCode, ServiceError

MAX_PROPERTIES = 50
MAX_PROPERTY_KEY_CHARS = 100
MAX_PROPERTIES_BYTES = 16 * 1024
MAX_BULK_ENTITIES = 500
MAX_BULK_RELATIONS = 1000

_TYPE = re.compile(rf"^[a-z][a-z0-9_]{{0,{MAX_TYPE_CHARS - 1}}}$")
_TYPE_SEPARATORS = re.compile(r"[\s\-]+")


def invalid(field: str, message: str) -> ServiceError:
    """The error for one field: ``field: message``, with the field in ``details``."""
    return ServiceError(ErrorCode.INVALID, f"{field}: {message}", details={field: [message]})


def name_key(name: str) -> str:
    """The form names are compared in: case-folded, whitespace runs collapsed to one space."""
    return " ".join(name.split()).casefold()


def _has_control(text: str) -> bool:
    return any(ord(char) < 32 or ord(char) == 127 for char in text)


def clean_name(value: Any, field: str) -> str:
    """A display name: 1-200 characters once trimmed (inner whitespace runs become one space)."""
    if not isinstance(value, str):
        raise invalid(field, "a name is required, as a string.")
    name = " ".join(value.split())
    if not name:
        raise invalid(field, "a name is required.")
    if len(name) > MAX_NAME_CHARS or len(name_key(name)) > MAX_NAME_CHARS:  # "ß" case-folds to "ss"
        raise invalid(field, f"at most {MAX_NAME_CHARS} characters.")
    if _has_control(value.replace("\n", " ").replace("\t", " ").replace("\r", " ")):
        raise invalid(field, "control characters are not allowed.")
    return name


def clean_type(value: Any, field: str) -> str:
    """An entity or relation type: lower-case letters, digits and ``_``, starting with a letter, at most
    64 characters. Spaces and hyphens become ``_`` and capitals become lower case ("Works at" is
    ``works_at``)."""
    if not isinstance(value, str) or not value.strip():
        raise invalid(field, "a type is required, e.g. person, organization, project, concept.")
    slug = _TYPE_SEPARATORS.sub("_", value.strip()).lower()
    if not _TYPE.match(slug):
        raise invalid(
            field,
            f"{value[:80]!r} is not a type: use letters, digits and '_', starting with a letter, "
            f"at most {MAX_TYPE_CHARS} characters (e.g. person, works_at).",
        )
    return slug


def clean_description(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise invalid(field, "must be a string.")
    text = value.strip()
    if len(text) > MAX_DESCRIPTION_CHARS:
        raise invalid(field, f"at most {MAX_DESCRIPTION_CHARS} characters.")
    if "\x00" in text:
        raise invalid(field, "NUL characters are not allowed.")
    return text


def _contains_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_contains_nul(k) or _contains_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_contains_nul(item) for item in value)
    return False


def check_properties(value: Any, field: str) -> dict[str, Any]:
    """A JSON object of at most 50 keys (each 1-100 characters) and 16 KB serialised."""
    if not isinstance(value, dict):
        raise invalid(field, "must be a JSON object.")
    if len(value) > MAX_PROPERTIES:
        raise invalid(field, f"at most {MAX_PROPERTIES} keys; this has {len(value)}.")
    for key in value:
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_PROPERTY_KEY_CHARS:
            raise invalid(field, f"keys are 1-{MAX_PROPERTY_KEY_CHARS} characters.")
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode())
    except ValueError:
        raise invalid(field, "numbers must be finite (no NaN or Infinity).") from None
    if size > MAX_PROPERTIES_BYTES:
        raise invalid(field, f"at most {MAX_PROPERTIES_BYTES} bytes of JSON; this has {size}.")
    if _contains_nul(value):
        raise invalid(field, "NUL characters are not allowed.")
    return value


def clean_aliases(value: Any, field: str) -> list[str]:
    """Up to 20 other names, each like a name; duplicates (compared normalised) are dropped."""
    if not isinstance(value, list):
        raise invalid(field, "must be a list of names.")
    if len(value) > MAX_ALIASES:
        raise invalid(field, f"at most {MAX_ALIASES} aliases; this has {len(value)}.")
    return union_aliases([], [clean_name(item, f"{field}[{index}]") for index, item in enumerate(value)])


def union_aliases(existing: list[str], more: list[str], *, name: str = "") -> list[str]:
    """``existing`` then the new ones of ``more``, without duplicates or the entity's own name."""
    seen = {name_key(name)} if name else set()
    merged: list[str] = []
    for alias in [*existing, *more]:
        key = name_key(alias)
        if key not in seen:
            seen.add(key)
            merged.append(alias)
    return merged


def clean_weight(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise invalid(field, "a number from 0 to 1, or null.")
    if not 0 <= value <= 1:
        raise invalid(field, f"a number from 0 to 1; got {value}.")
    return float(value)


def clean_user_id(value: Any, field: str = "user_id") -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise invalid(field, "must be a string.")
    if len(value) > MAX_USER_ID_CHARS:
        raise invalid(field, f"at most {MAX_USER_ID_CHARS} characters.")
    if _has_control(value):
        raise invalid(field, "control characters are not allowed.")
    return value


@dataclass(frozen=True)
class EntityRef:
    """An entity named by its type and name (the name as written; compared normalised)."""

    entity_type: str
    name: str

    @property
    def key(self) -> tuple[str, str]:
        return self.entity_type, name_key(self.name)

    def __str__(self) -> str:
        return f"{self.entity_type} {self.name!r}"


@dataclass(frozen=True)
class EntityInput:
    """An upsert of one entity: ``None`` leaves a field as it is (on an existing entity)."""

    ref: EntityRef
    description: str | None = None
    properties: dict[str, Any] | None = None
    aliases: list[str] | None = None


@dataclass(frozen=True)
class RelationInput:
    """An upsert of one relation between two named entities."""

    source: EntityRef
    relation_type: str
    target: EntityRef
    properties: dict[str, Any] | None = None
    weight: float | None = None
    weight_given: bool = False


ENTITY_FIELDS = {"type", "name", "description", "properties", "aliases"}
RELATION_FIELDS = {"source", "type", "target", "properties", "weight"}
REF_FIELDS = {"type", "name"}


def _at(prefix: str, name: str) -> str:
    """A field's name in errors: ``entities[3].name`` in a payload, ``name`` at the top of a body."""
    return f"{prefix}.{name}" if prefix else name


def _object(value: Any, prefix: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(prefix or "body", "must be a JSON object.")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise invalid(_at(prefix, unknown[0]), f"unknown field; the fields are {', '.join(sorted(allowed))}.")
    return value


def parse_ref(value: Any, prefix: str) -> EntityRef:
    """``{"type": …, "name": …}``."""
    data = _object(value, prefix, REF_FIELDS)
    return EntityRef(
        clean_type(data.get("type"), _at(prefix, "type")), clean_name(data.get("name"), _at(prefix, "name"))
    )


def parse_entity(value: Any, prefix: str = "", *, extra: frozenset[str] = frozenset()) -> EntityInput:
    """``{"type", "name", "description"?, "properties"?, "aliases"?}`` (and the ``extra`` fields, which
    the caller reads)."""
    data = _object(value, prefix, ENTITY_FIELDS | extra)
    ref = EntityRef(
        clean_type(data.get("type"), _at(prefix, "type")), clean_name(data.get("name"), _at(prefix, "name"))
    )
    description = data.get("description")
    properties = data.get("properties")
    aliases = data.get("aliases")
    return EntityInput(
        ref=ref,
        description=None
        if description is None
        else clean_description(description, _at(prefix, "description")),
        properties=None if properties is None else check_properties(properties, _at(prefix, "properties")),
        aliases=None if aliases is None else clean_aliases(aliases, _at(prefix, "aliases")),
    )


def parse_relation(value: Any, prefix: str = "", *, extra: frozenset[str] = frozenset()) -> RelationInput:
    """``{"source": {type, name}, "type", "target": {type, name}, "properties"?, "weight"?}`` (and the
    ``extra`` fields, which the caller reads)."""
    data = _object(value, prefix, RELATION_FIELDS | extra)
    properties = data.get("properties")
    return RelationInput(
        source=parse_ref(data.get("source"), _at(prefix, "source")),
        relation_type=clean_type(data.get("type"), _at(prefix, "type")),
        target=parse_ref(data.get("target"), _at(prefix, "target")),
        properties=None if properties is None else check_properties(properties, _at(prefix, "properties")),
        weight=clean_weight(data.get("weight"), _at(prefix, "weight")),
        weight_given="weight" in data,
    )


def parse_list(value: Any, field: str, limit: int) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid(field, "must be a list.")
    if len(value) > limit:
        raise invalid(
            field, f"at most {limit} per call; this has {len(value)}. Send the rest in another call."
        )
    return value
