"""Ranking skills for ``skill_search``: BM25 over the English stems of a skill's name (weighted up),
description, triggers and body.

BM25+ (``rank_bm25.BM25Plus``) rather than Okapi: a tenant's catalog is often a handful of skills, and
Okapi's inverse document frequency turns negative for a word that more than half of the documents
share, which would rank the skill that says it most often last. The constant BM25+ adds for every query
word is taken off again, so a skill sharing no word with the query scores 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import snowballstemmer
from rank_bm25 import BM25Plus

from apps.skills import parsing
from apps.skills.models import Skill

NAME_WEIGHT = 3  # a name's words count as often as this
TRIGGER_WEIGHT = 2
_WORD = re.compile(r"[a-z0-9]+")
_STEMMER = snowballstemmer.stemmer("english")
# Words too common to say what a skill is about: a query's "to" or "a" must not match every skill.
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "so",
        "that",
        "the",
        "this",
        "to",
        "use",
        "using",
        "want",
        "we",
        "what",
        "when",
        "which",
        "with",
        "you",
        "your",
    ]
)


def words(text: str) -> list[str]:
    """Lower-case words without :data:`STOP_WORDS`, reduced to their English stems ("deploying" and
    "deployment" meet)."""
    return list(_STEMMER.stemWords([w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]))


def _document(skill: Skill) -> list[str]:
    name = words(skill.name.replace("-", " "))
    triggers = words(" ".join(str(t) for t in skill.triggers))
    return (
        name * NAME_WEIGHT
        + words(skill.description)
        + triggers * TRIGGER_WEIGHT
        + words(parsing.body_of(skill.content))
    )


def rank(query: str, skills: Sequence[Skill], limit: int) -> list[tuple[Skill, float]]:
    """The ``skills`` that match ``query`` best, best first (then by name); only those sharing at least
    one word with the query."""
    wanted = words(query)
    if not wanted or not skills:
        return []
    documents = [_document(skill) for skill in skills]
    bm25 = BM25Plus(documents)
    baseline = sum((bm25.idf.get(word) or 0.0) * bm25.delta for word in wanted)
    scores = bm25.get_scores(wanted)
    wanted_set = set(wanted)
    ranked = sorted(
        (
            (skill, float(score) - baseline)
            for skill, score, document in zip(skills, scores, documents, strict=True)
            if wanted_set & set(document)
        ),
        key=lambda item: (-item[1], item[0].name),
    )
    return ranked[:limit]
