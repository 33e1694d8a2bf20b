"""The credential scrubber applied to every tool output (SPEC A "Runtime, scrubbing, limits", B §7.1).

``Scrubber(values).scrub(text)`` replaces, in this order:

1. the ten patterns of B §7.1, each applied to the output of the previous one, with ``[REDACTED]``;
2. the values registered for this request (tenant credentials, secrets a tool used) with ``[REDACTED]``;
3. the server's own addresses (local interface IPs, their IPv4 decimal and dashed forms, and
   ``settings.TOOLGATE_SERVER_ADDRESSES``) with ``[SERVER_IP]``.

Registered values live on the ``Scrubber`` object, which is built per request (``scrubber_for``):
there is deliberately no process-wide list, so one tenant's secrets can never be matched, or leaked
through timing, in another tenant's output.

Why the code does not simply call ``re.sub`` ten times: five of the patterns start with a
case-insensitive word (``(?i)token|secret|…``, ``(?i)[A-Z_]*KEY…``). Python's ``re`` cannot skip ahead to
candidate positions for such a pattern and runs its matcher at every character, which costs about
300 ms for 1 MiB of code-like output. The patterns are therefore applied exactly as written, but only at
positions where they can start: those are found by scanning the *reversed* text for the separator
(``=``, ``:`` or ``://``) followed by the reversed key word. A pattern that starts with a literal lets
``re`` jump from one occurrence of that character to the next in C, which is what makes the scan fast.
Each candidate is then checked with the original pattern (``pattern.match(text, start)``), in order,
skipping candidates inside a previous match: this is exactly what ``pattern.sub`` does, because every
match of these patterns starts at such a candidate (see ``_CANDIDATES``). ``tests/unit/test_scrubber.py``
checks the result against a plain ``re.sub`` implementation on random mixes of secrets and near-misses.

The patterns are not merged into one alternation: where they overlap, "one after the other" and
"leftmost of all" give different results (``sk-ant-…sk-…`` is one case), and the order is specified.

Scrubbing is idempotent: upstream's single round is not (``token: abKEY=abcdefgh`` becomes
``token: [REDACTED]``, which a second round turns into ``[REDACTED]``), so the round is repeated until
the text stops changing. A round that changed nothing costs one scan; real outputs settle after one.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from django.conf import settings

REDACTED = "[REDACTED]"
SERVER_IP = "[SERVER_IP]"

# Registered values shorter than this are ignored (B §7.1): short values match everywhere.
MIN_VALUE_LENGTH = 6

# A round can only change text by consuming characters that are not part of a placeholder, so the
# loop ends by itself; the cap only guards against a value registered to match across placeholders.
_MAX_ROUNDS = 8

# ASCII: \s and \S mean what they mean in Go's regexp (upstream), and IGNORECASE folds only A-Z.
_A = re.ASCII
_AI = re.ASCII | re.IGNORECASE

# The ten patterns of B §7.1, verbatim except that the (?i) of 5-9 is passed as a flag.
P1_OPENAI = re.compile(r"sk-[a-zA-Z0-9]{20,}", _A)
P2_ANTHROPIC = re.compile(r"sk-ant-[a-zA-Z0-9-]{20,}", _A)
P3_GITHUB = re.compile(r"(?:ghp|gho|ghu|ghs|ghr)_[a-zA-Z0-9]{36}", _A)
P4_AWS = re.compile(r"AKIA[A-Z0-9]{16}", _A)
P5_KEY_VALUE = re.compile(
    r"(api[_-]?key|token|secret|password|bearer|authorization)\s*[:=]\s*[\"']?\S{8,}[\"']?", _AI
)
P6_CONNECTION = re.compile(r"(postgres|postgresql|mysql|mongodb|redis|amqp)://[^\s\"']+", _AI)
P7_ENV_KEY = re.compile(r"[A-Z_]*(KEY|SECRET|CREDENTIAL|PRIVATE)[A-Z_]*\s*=\s*[^\[\s]{8,}", _AI)
P8_ENV_DSN = re.compile(r"(DSN|DATABASE_URL|REDIS_URL|MONGO_URI)\s*=\s*[^\[\s]{8,}", _AI)
P9_ENV_VIRTUAL = re.compile(r"VIRTUAL_[A-Z_]+\s*=\s*[^\[\s]{4,}", _AI)
P10_HEX = re.compile(r"[a-fA-F0-9]{64,}", _A)

PATTERNS: tuple[re.Pattern[str], ...] = (
    P1_OPENAI,
    P2_ANTHROPIC,
    P3_GITHUB,
    P4_AWS,
    P5_KEY_VALUE,
    P6_CONNECTION,
    P7_ENV_KEY,
    P8_ENV_DSN,
    P9_ENV_VIRTUAL,
    P10_HEX,
)


# --- Patterns 1-4: a case-sensitive literal prefix ------------------------------------------------------
# re finds a literal prefix with a fast C scan; checking the anchor with ``in`` first is faster still
# and skips the pass entirely in the usual case where the output holds no such token.


def _literal_stage(pattern: re.Pattern[str], anchors: tuple[str, ...]) -> Callable[[str], str]:
    def stage(text: str) -> str:
        if not any(anchor in text for anchor in anchors):
            return text
        return pattern.sub(REDACTED, text)

    return stage


# --- Patterns 5-9: candidates from the reversed text ---------------------------------------------------
# Every match of these patterns is "word, optional whitespace, separator, value". Read backwards, it
# starts with the separator, a literal, so the reversed scan is fast; each regex below yields, per
# separator, where the forward match would have to start. Why these are the only possible starts:
#   5, 8: the key word is immediately followed by \s*[:=] and no key word is a suffix of another, so a
#         separator has at most one key word ending before its whitespace;
#   6:    the scheme is immediately followed by "://" (same argument);
#   7:    [A-Z_]*KEY[A-Z_]*\s*= must span the whole run of letters and underscores before the
#         separator, so the match starts where that run starts (scanning resumes after a previous
#         match at whitespace or "[", never inside a run);
#   9:    it starts at a "VIRTUAL_" inside that run (every occurrence is a candidate).
# A reversed match starting at i and ending at j covers forward positions n-j .. n-i.

_KEY_WORDS_REVERSED = r"(?:yek[_-]?ipa|nekot|terces|drowssap|reraeb|noitazirohtua)"
_REV_P5 = (
    re.compile(r":\s*" + _KEY_WORDS_REVERSED, _AI),
    re.compile(r"=\s*" + _KEY_WORDS_REVERSED, _AI),  # two regexes: "[:=]" has no fast literal scan
)
_REV_P6 = re.compile(r"//:(?:sergtsop|lqsergtsop|lqsym|bdognom|sider|pqma)", _AI)
_REV_P7 = re.compile(r"=\s*[A-Z_]*?(?:yek|terces|laitnederc|etavirp)[A-Z_]*", _AI)
_REV_P8 = re.compile(r"=\s*(?:nsd|lru_esabatad|lru_sider|iru_ognom)", _AI)
_REV_P9 = re.compile(r"=\s*([A-Z_]*?_lautriv[A-Z_]*)", _AI)


def _starts_of(regexes: tuple[re.Pattern[str], ...]) -> Callable[[str, str], list[int]]:
    """Candidates = the forward position where each reversed match ends."""

    def starts(text: str, reversed_text: str) -> list[int]:
        n = len(text)
        found = [n - m.end() for regex in regexes for m in regex.finditer(reversed_text)]
        found.sort()
        return found

    return starts


def _virtual_starts(text: str, reversed_text: str) -> list[int]:
    n = len(text)
    found: list[int] = []
    for m in _REV_P9.finditer(reversed_text):
        run_start, run_end = n - m.end(1), n - m.start(1)
        run = text[run_start:run_end].lower()
        # "VIRTUAL_" needs at least one more letter before the end of the run ([A-Z_]+).
        at = run.find("virtual_")
        while 0 <= at < len(run) - 8:
            found.append(run_start + at)
            at = run.find("virtual_", at + 1)
    found.sort()
    return found


def _sub_at(pattern: re.Pattern[str], text: str, starts: Iterable[int]) -> str:
    """``pattern.sub(REDACTED, text)``, given every position where a match can start (ascending)."""
    parts: list[str] = []
    resume = 0  # where the next match may start: after the previous one, as re.sub continues
    for start in starts:
        if start < resume:
            continue
        m = pattern.match(text, start)
        if m is None:
            continue
        parts.append(text[resume:start])
        parts.append(REDACTED)
        resume = m.end()
    if not parts:
        return text
    parts.append(text[resume:])
    return "".join(parts)


@dataclass(frozen=True)
class _ReversedStage:
    pattern: re.Pattern[str]
    starts: Callable[[str, str], list[int]]


_REVERSED_STAGES = (
    _ReversedStage(P5_KEY_VALUE, _starts_of(_REV_P5)),
    _ReversedStage(P6_CONNECTION, _starts_of((_REV_P6,))),
    _ReversedStage(P7_ENV_KEY, _starts_of((_REV_P7,))),
    _ReversedStage(P8_ENV_DSN, _starts_of((_REV_P8,))),
    _ReversedStage(P9_ENV_VIRTUAL, _virtual_starts),
)


# --- Pattern 10: hex runs -------------------------------------------------------------------------------
# [a-fA-F0-9]{64,} replaces every maximal run of at least 64 hex digits (the leftmost start of a long
# enough run is its first character, and greedy takes it all). Hex digits are so common in ordinary
# text that re's character-class scan is slow; instead the text becomes one byte per character
# (latin-1, anything else → "?") mapped to "x" for a hex digit and "." otherwise, and bytes.find
# looks for 64 "x" in a row.

_HEX_MAP = bytes(0x78 if chr(i) in "0123456789abcdefABCDEF" else 0x2E for i in range(256))
_HEX_RUN = b"x" * 64


def _hex_stage(text: str) -> str:
    flags = text.encode("latin-1", "replace").translate(_HEX_MAP)
    at = flags.find(_HEX_RUN)
    if at < 0:
        return text
    parts: list[str] = []
    resume = 0
    while at >= 0:
        end = flags.find(b".", at + 64)
        if end < 0:
            end = len(flags)
        parts.append(text[resume:at])
        parts.append(REDACTED)
        resume = end
        at = flags.find(_HEX_RUN, end)
    parts.append(text[resume:])
    return "".join(parts)


def _ten_patterns(text: str) -> str:
    """The ten patterns of B §7.1, in order, each on the previous one's output."""
    for literal_stage in _LITERAL_STAGES:
        text = literal_stage(text)
    reversed_for: str | None = None
    reversed_text = ""
    for stage in _REVERSED_STAGES:
        if reversed_for is not text:  # only rebuilt when the previous stage replaced something
            reversed_text = text[::-1]
            reversed_for = text
        starts = stage.starts(text, reversed_text)
        if starts:
            text = _sub_at(stage.pattern, text, starts)
    return _hex_stage(text)


_LITERAL_STAGES = (
    _literal_stage(P1_OPENAI, ("sk-",)),
    _literal_stage(P2_ANTHROPIC, ("sk-ant-",)),
    _literal_stage(P3_GITHUB, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    _literal_stage(P4_AWS, ("AKIA",)),
)


# --- Registered values and server addresses --------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _alternation(values: tuple[str, ...], bounded: bool) -> re.Pattern[str]:
    """One regex for all values, longest first so that a value beats its own prefix at a position.

    ``bounded``: the value must not continue an alphanumeric run on its right (the left side is checked
    by ``_replace_values``; a leading look-behind would stop re from skipping to the values' first
    characters)."""
    body = "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True))
    return re.compile(f"(?:{body})(?![0-9A-Za-z])" if bounded else f"(?:{body})")


def _replace_values(text: str, values: tuple[str, ...], placeholder: str, *, bounded: bool) -> str:
    # ``in`` (a C substring search) rules out absent values far faster than any regex scan; in most
    # outputs none is present and the regex never runs.
    present = tuple(v for v in values if v in text)
    if not present:
        return text
    regex = _alternation(present, bounded)
    if not bounded:
        return regex.sub(placeholder, text)
    parts: list[str] = []
    resume = 0
    m = regex.search(text)
    while m is not None:
        start = m.start()
        if start > 0 and text[start - 1].isascii() and text[start - 1].isalnum():
            # Inside a longer number or word ("110.0.0.5" is not 10.0.0.5): look again one further on,
            # exactly as a leading (?<![0-9A-Za-z]) would.
            m = regex.search(text, start + 1)
            continue
        parts.append(text[resume:start])
        parts.append(placeholder)
        resume = m.end()
        m = regex.search(text, resume)
    if not parts:
        return text
    parts.append(text[resume:])
    return "".join(parts)


def _inside_placeholder(value: str) -> bool:
    # Such a value would match inside our own placeholders: scrubbing would never settle.
    return value in REDACTED or value in SERVER_IP


def _address_forms(address: str) -> Iterator[str]:
    """An address as tools print it, plus for IPv4 its decimal (``3221225986``) and dashed
    (``192-0-2-2``, as in cloud host names) forms. A host name is returned as is."""
    address = address.strip()
    if not address:
        return
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # "fe80::1%eth0": scope id dropped
    except ValueError:
        yield address
        return
    yield str(ip)
    if isinstance(ip, ipaddress.IPv4Address):
        yield str(int(ip))
        yield str(ip).replace(".", "-")


@functools.cache
def _interface_addresses() -> tuple[str, ...]:
    """Local interface addresses, computed once per process (they do not change at run time).

    Loopback and link-local addresses are left out: they are the same on every machine and reveal
    nothing, while replacing them would garble ordinary output ("127.0.0.1:8000")."""
    import psutil

    found: list[str] = []
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            try:
                ip = ipaddress.ip_address(address.address.split("%", 1)[0])
            except ValueError:
                continue
            if ip.is_loopback or ip.is_link_local or ip.is_unspecified:
                continue
            found.append(str(ip))
    return tuple(found)


@functools.lru_cache(maxsize=8)
def _server_addresses(configured: tuple[str, ...]) -> tuple[str, ...]:
    """Interface addresses plus the configured ones (the public IP, host names), with derived forms.

    The public IP is not looked up on the internet (upstream asks api.ipify.org at start-up): a server
    behind NAT states it in TOOLGATE_SERVER_ADDRESSES. Keyed by the setting so that a changed setting
    (tests) takes effect; the interfaces themselves are read once per process."""
    seen: dict[str, None] = {}
    for address in (*_interface_addresses(), *configured):
        for form in _address_forms(address):
            if form and not _inside_placeholder(form):
                seen.setdefault(form, None)
    return tuple(seen)


def server_addresses() -> tuple[str, ...]:
    """Every string this process replaces with ``[SERVER_IP]``."""
    configured = getattr(settings, "TOOLGATE_SERVER_ADDRESSES", ())
    return _server_addresses(tuple(configured))


# --- The scrubber ------------------------------------------------------------------------------------


class Scrubber:
    """Scrubs one request's tool output. Build one per request (``scrubber_for``); never share one
    between tenants, because the values registered on it are that tenant's secrets."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: dict[str, None] = {}  # insertion-ordered set
        for value in values:
            self.register(value)

    def register(self, value: str) -> None:
        """Scrub ``value`` from every later output of this scrubber. Values shorter than 6 characters
        are ignored (they would match ordinary text); registering a value twice is harmless."""
        if len(value) < MIN_VALUE_LENGTH or _inside_placeholder(value):
            return
        self._values.setdefault(value, None)

    @property
    def values(self) -> tuple[str, ...]:
        """The registered values (for inspection and tests; never log them)."""
        return tuple(self._values)

    def scrub(self, text: str) -> str:
        """``text`` with credentials replaced by ``[REDACTED]`` and server addresses by
        ``[SERVER_IP]``. ``scrub(scrub(t)) == scrub(t)``."""
        if not text:
            return text
        values = tuple(self._values)
        addresses = server_addresses()
        for _ in range(_MAX_ROUNDS):
            scrubbed = self._round(text, values, addresses)
            if scrubbed == text:
                break
            text = scrubbed
        return text

    @staticmethod
    def _round(text: str, values: tuple[str, ...], addresses: tuple[str, ...]) -> str:
        text = _ten_patterns(text)
        if values:
            # No word boundary for secrets: a secret is hidden wherever it appears.
            text = _replace_values(text, values, REDACTED, bounded=False)
        if addresses:
            # Secrets first: an address overlapping a secret must not leave part of the secret behind.
            text = _replace_values(text, addresses, SERVER_IP, bounded=True)
        return text


def scrubber_for(tenant_values: Iterable[str] = ()) -> Scrubber:
    """A fresh scrubber for one request, seeded with the tenant's known secret values."""
    return Scrubber(tenant_values)
