"""API key format, generation and verification. Keys are shown once; only a digest is stored."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

PREFIX_LEN = 8
_KEY = re.compile(r"^tgk_([A-Za-z0-9]{8})_([A-Za-z0-9_-]{43})$")
_ALPHABET = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"


@dataclass(frozen=True)
class NewKey:
    raw: str
    prefix: str
    digest: str


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def generate() -> NewKey:
    """A new key ``tgk_<8-char prefix>_<256-bit secret>``; the prefix identifies it in lists and logs."""
    prefix = "".join(secrets.choice(_ALPHABET) for _ in range(PREFIX_LEN))
    raw = f"tgk_{prefix}_{secrets.token_urlsafe(32)}"
    return NewKey(raw=raw, prefix=prefix, digest=digest(raw))


def parse_prefix(raw: str) -> str | None:
    """The prefix of a well-formed key, or None."""
    match = _KEY.match(raw)
    return match.group(1) if match else None


def matches(raw: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(raw), stored_digest)
