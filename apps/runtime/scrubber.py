"""The credential scrubber applied to every tool output (SPEC A "Runtime, scrubbing, limits", B §7.1).

``Scrubber(values).scrub(text)`` replaces, in this order:

1. the ten patterns of B §7.1, each applied to the output of the previous one, with ``[REDACTED]``;
2. the values registered for this request (tenant credentials, secrets a tool used) with ``[REDACTED]``;
3. the server's own addresses (local interface IPs, their IPv4 decimal and dashed forms, and
   ``settings.TOOLGATE_SERVER_ADDRESSES``) with ``[SERVER_IP]``.

Registered values live on the ``Scrubber`` object, which is built per request (``scrubber_for``):
there is deliberately no process-wide list, so one tenant's secrets can never be matched, or leaked
through timing, in another tenant's output.

Speed. Ten plain ``re.sub`` calls take about 300 ms for 1 MiB of code-like output, because five of the
patterns start with a case-insensitive word (``(?i)token|secret|…``, ``(?i)[A-Z_]*KEY…``) and Python's
``re`` then runs its matcher at every character. Here every pattern is still applied exactly as written
(``pattern.match``), but only where one of its matches can start:

* patterns 1-4 start with a case-sensitive literal, which ``re`` itself finds with a fast C scan;
* patterns 5-9 are "word, whitespace, separator, value". Read backwards they start with the separator,
  a literal, so the candidates are found by scanning a reversed, ASCII-lower-cased copy of the text
  (``_keyword_patterns``); one copy serves all five patterns (``_transport``);
* pattern 10 replaces runs of 64+ hex digits, found with ``bytes.find`` on a translated copy.

The candidates are tried in order, skipping those inside a previous match, which is what ``re.sub``
does. ``tests/unit/test_scrubber.py`` compares the result with plain ``re.sub`` calls on thousands of
random mixes of secrets and near-misses. The patterns are not merged into one alternation: where they
overlap (``sk-ant-…sk-…``), "one after the other" and "leftmost of all" differ, and the order is given.

Idempotence. Upstream's single round is not idempotent: ``token: abKEY=abcdefgh`` becomes
``token: [REDACTED]``, which a second round turns into ``[REDACTED]``. ``scrub`` repeats the round until
nothing changes. The repeat is cheap: in a round's output only patterns 5 and 6 can match again
(their values are the only ones that may contain the ``[`` of a placeholder; any other match would
consist of characters that survived the round, so the round would already have replaced them), so
the next round retries just those two, at the candidates where they failed before (moved past the
replacements since), and continues only if they replaced something.

Values and addresses are replaced one after the other, longest first (``str.find``), not by one
alternation: ``re`` scans for an alternation's first characters (digits, letters) about ten times
more slowly than a substring search, and an absent value then costs one fast scan.
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

# Each round only consumes characters outside placeholders, so the loop ends by itself; the cap guards
# against registered values built to match across placeholders.
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

Spans = list[tuple[int, int]]


def _rebuild(text: str, spans: Spans, placeholder: str) -> str:
    """``text`` with each of ``spans`` (ascending, disjoint) replaced by ``placeholder``."""
    parts: list[str] = []
    resume = 0
    for start, end in spans:
        parts.append(text[resume:start])
        parts.append(placeholder)
        resume = end
    parts.append(text[resume:])
    return "".join(parts)


def _match_spans(
    pattern: re.Pattern[str], text: str, starts: Iterable[int], pending: Spans | None = None
) -> Spans:
    """The spans ``pattern.sub`` would replace, given every position where a match can start
    (ascending): candidates are tried in order, skipping those inside a previous match.

    ``pending``: spans (ascending) that an earlier pattern replaces but that are not yet cut out of
    ``text``. A match must then stop where the next one begins (``endpos``), exactly as it would stop at
    the placeholder's "[", which none of the patterns used this way (1-4, 7-9) can consume."""
    spans: Spans = []
    resume = 0  # where the next match may start: after the previous one, as re.sub continues
    end_of_text = len(text)
    pending = pending or []
    j, count = 0, len(pending)
    for start in starts:
        if start < resume:
            continue
        while j < count and pending[j][1] <= start:
            j += 1
        if j < count and pending[j][0] <= start:
            continue  # inside a pending replacement: those characters are gone
        m = pattern.match(text, start, pending[j][0] if j < count else end_of_text)
        if m is not None:
            resume = m.end()
            spans.append((start, resume))
    return spans


def _transport(positions: list[int], spans: Spans, width: int) -> list[int]:
    """Positions (ascending) in a text → the same characters' positions once ``spans`` of it were each
    replaced by a ``width``-character placeholder. Positions inside a replaced span are dropped."""
    if not spans:
        return positions
    moved: list[int] = []
    shift = 0
    i, count = 0, len(spans)
    for position in positions:
        while i < count and spans[i][1] <= position:
            shift += width - (spans[i][1] - spans[i][0])
            i += 1
        if i < count and spans[i][0] <= position:
            continue
        moved.append(position + shift)
    return moved


def _find_all(text: str, needle: str) -> list[int]:
    found: list[int] = []
    at = text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


class _Pass:
    """A text being scrubbed, with every replacement made so far, so that candidate positions found
    earlier can be moved to where those characters are now (``moved``).

    Cutting placeholders into 1 MiB of text costs about 0.3 ms each time, so patterns whose matches
    cannot run into a placeholder (1-4, 7-9) collect their replacements as pending and cut them in
    together (``commit``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._edits: list[tuple[Spans, int]] = []
        self._pending: Spans = []

    @property
    def mark(self) -> int:
        """Names the current state of the text for ``moved``."""
        return len(self._edits)

    def moved(self, positions: list[int], mark: int) -> list[int]:
        for spans, width in self._edits[mark:]:
            positions = _transport(positions, spans, width)
        return positions

    def replace(self, spans: Spans, placeholder: str = REDACTED) -> None:
        if spans:
            self.text = _rebuild(self.text, spans, placeholder)
            self._edits.append((spans, len(placeholder)))

    def apply(self, pattern: re.Pattern[str], starts: list[int], mark: int, *, pending: bool = False) -> None:
        """Apply ``pattern`` at ``starts``, positions found in the text as it was at ``mark``;
        ``pending``: collect the replacements for ``commit``."""
        spans = _match_spans(pattern, self.text, self.moved(starts, mark), self._pending)
        if pending:
            if spans:
                self._pending = sorted(self._pending + spans)
        else:
            self.commit()
            self.replace(spans)

    def commit(self) -> None:
        spans, self._pending = self._pending, []
        self.replace(spans)


# --- Patterns 1-4 ---------------------------------------------------------------------------------------
# A case-sensitive literal prefix: every match of 1 and 2 starts at an "sk-", of 3 at "gh[pousr]_", of
# 4 at "AKIA", found with str.find (a C substring search, faster than re's prefix scan) or re.


_GITHUB_PREFIX = re.compile(r"gh[pousr]_")


def _literal_patterns(scrubbing: _Pass) -> None:
    # Replacements never create one of these prefixes, so candidates found up front stay valid.
    mark = scrubbing.mark
    text = scrubbing.text
    sk = _find_all(text, "sk-")
    github = [m.start() for m in _GITHUB_PREFIX.finditer(text)]
    aws = _find_all(text, "AKIA")
    scrubbing.apply(P1_OPENAI, sk, mark, pending=True)
    scrubbing.apply(P2_ANTHROPIC, sk, mark, pending=True)
    scrubbing.apply(P3_GITHUB, github, mark, pending=True)
    scrubbing.apply(P4_AWS, aws, mark, pending=True)
    scrubbing.commit()


# --- Patterns 5-9 ---------------------------------------------------------------------------------------
# The view: the text encoded one byte per character (latin-1; anything else becomes "?", which is
# neither a letter, whitespace nor a separator for these patterns, just as the original character is
# not under re.ASCII), lower-cased (bytes.lower() folds A-Z only, as IGNORECASE with ASCII does) and
# reversed. A reversed match ending at j is a forward candidate starting at n - j.
#
# Why these are all the places where a match can start:
#   5, 8: the key word is immediately followed by \s*[:=]; no key word is a suffix of another, so
#         each separator has at most one key word ending just before its whitespace;
#   6:    the scheme is immediately followed by "://" (same argument);
#   7:    [A-Z_]*KEY[A-Z_]*\s*= spans the whole run of letters and underscores before the separator,
#         so a match starts where that run starts (re.sub never resumes inside such a run: every match
#         of 5-9 ends at whitespace, a quote, "[" or the end);
#   9:    it starts at some "VIRTUAL_": every occurrence is a candidate.
# Replacements by 5-8 never create a candidate for a later pattern (they end before whitespace, a
# quote or "[", so no run of letters can newly start after a placeholder), hence the candidates of
# all five come from the one view of the text as pattern 5 sees it, moved past later replacements.

_KEY_WORDS = rb"(?:yek[_-]?ipa|nekot|terces|drowssap|reraeb|noitazirohtua)"
# Two scans for 5: "[:=]" is a character class, which re scans for far more slowly than a literal.
_REV_P5 = (re.compile(rb":\s*" + _KEY_WORDS), re.compile(rb"=\s*" + _KEY_WORDS))
_REV_P6 = (re.compile(rb"//:(?:sergtsop|lqsergtsop|lqsym|bdognom|sider|pqma)"),)
_REV_P7 = (re.compile(rb"=\s*[a-z_]*?(?:yek|terces|laitnederc|etavirp)[a-z_]*"),)
_REV_P8 = (re.compile(rb"=\s*(?:nsd|lru_esabatad|lru_sider|iru_ognom)"),)
_VIRTUAL_REVERSED = b"_lautriv"


def _scan(regexes: tuple[re.Pattern[bytes], ...]) -> Callable[[bytes], list[int]]:
    def starts(view: bytes) -> list[int]:
        n = len(view)
        found = [n - m.end() for regex in regexes for m in regex.finditer(view)]
        found.sort()
        return found

    return starts


def _virtual_starts(view: bytes) -> list[int]:
    # Few outputs contain "virtual_" at all: a substring search beats a regex over every "=".
    n = len(view)
    found: list[int] = []
    at = view.find(_VIRTUAL_REVERSED)
    while at >= 0:
        found.append(n - at - len(_VIRTUAL_REVERSED))
        at = view.find(_VIRTUAL_REVERSED, at + 1)
    found.reverse()
    return found


@dataclass(frozen=True)
class _KeywordStage:
    pattern: re.Pattern[str]
    starts: Callable[[bytes], list[int]]


P5_STAGE = _KeywordStage(P5_KEY_VALUE, _scan(_REV_P5))
P6_STAGE = _KeywordStage(P6_CONNECTION, _scan(_REV_P6))
P7_STAGE = _KeywordStage(P7_ENV_KEY, _scan(_REV_P7))
P8_STAGE = _KeywordStage(P8_ENV_DSN, _scan(_REV_P8))
P9_STAGE = _KeywordStage(P9_ENV_VIRTUAL, _virtual_starts)
_KEYWORD_STAGES = (P5_STAGE, P6_STAGE, P7_STAGE, P8_STAGE, P9_STAGE)


def _view(text: str) -> bytes:
    return text.encode("latin-1", "replace").lower()[::-1]


def _keyword_patterns(scrubbing: _Pass, stages: tuple[_KeywordStage, ...]) -> dict[_KeywordStage, list[int]]:
    """Apply ``stages`` in order, all from one view of the text; returns each stage's candidates, in
    the coordinates of the text as it was before the first (``moved(…, mark)`` brings them up to date:
    the matched ones drop out, the ones that failed remain and may be retried in the next round)."""
    mark = scrubbing.mark
    view = _view(scrubbing.text)
    candidates: dict[_KeywordStage, list[int]] = {}
    for stage in stages:
        candidates[stage] = starts = stage.starts(view)
        # 5 and 6 can consume a placeholder ("token=[REDACTED]"), so their replacements must be in the
        # text before the next pattern looks at it; 7-9 cannot.
        scrubbing.apply(stage.pattern, starts, mark, pending=stage not in (P5_STAGE, P6_STAGE))
    scrubbing.commit()
    return candidates


# --- Pattern 10 -----------------------------------------------------------------------------------------
# [a-fA-F0-9]{64,} replaces every maximal run of 64+ hex digits (the leftmost start of a long enough
# run is its first character, and greedy takes it all). Hex digits are so common that re's scan for a
# character class is slow; instead each character becomes one byte ("x" for a hex digit, "." for
# anything else) and bytes.find looks for 64 "x" in a row.

_HEX_MAP = bytes(0x78 if chr(i) in "0123456789abcdefABCDEF" else 0x2E for i in range(256))
_HEX_RUN = b"x" * 64


def _hex_runs(text: str) -> Spans:
    flags = text.encode("latin-1", "replace").translate(_HEX_MAP)
    spans: Spans = []
    at = flags.find(_HEX_RUN)
    while at >= 0:
        end = flags.find(b".", at + len(_HEX_RUN))
        if end < 0:
            end = len(flags)
        spans.append((at, end))
        at = flags.find(_HEX_RUN, end)
    return spans


# --- Registered values and server addresses ---------------------------------------------------------------
# One value after the other, longest first, rather than one alternation: re scans for an alternation's
# first characters (digits, letters) about ten times more slowly than str.find does, and a value that
# does not occur costs only that one C scan.


def _replace_values(scrubbing: _Pass, values: tuple[str, ...]) -> None:
    """Secrets: replaced wherever they occur, no word boundary (a secret is hidden even inside a word),
    left to right without overlaps like str.replace."""
    for value in values:
        text = scrubbing.text
        spans: Spans = []
        at = text.find(value)
        while at >= 0:
            spans.append((at, at + len(value)))
            at = text.find(value, at + len(value))
        scrubbing.replace(spans)


def _replace_addresses(scrubbing: _Pass, addresses: tuple[str, ...]) -> None:
    """Server addresses: only where not part of a longer number or word ("110.0.0.5" is not 10.0.0.5,
    and the decimal form would otherwise garble unrelated numbers): the regex
    (?<![0-9A-Za-z])ADDRESS(?![0-9A-Za-z]), with str.find, which is faster than re's scan."""
    for address in addresses:
        text = scrubbing.text
        spans: Spans = []
        at = text.find(address)
        while at >= 0:
            end = at + len(address)
            before = text[at - 1 : at]
            after = text[end : end + 1]
            if (before.isascii() and before.isalnum()) or (after.isascii() and after.isalnum()):
                at = text.find(address, at + 1)
                continue
            spans.append((at, end))
            at = text.find(address, end)
        scrubbing.replace(spans, SERVER_IP)


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
    """Local interface addresses, read once per process (they do not change at run time).

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
    """Interface addresses plus the configured ones (the public IP, host names), with derived forms,
    longest first (so that a longer form is replaced before a shorter one inside it).

    The public IP is not looked up on the internet (upstream asks api.ipify.org at start-up): a server
    behind NAT states it in TOOLGATE_SERVER_ADDRESSES. Keyed by the setting so that a changed setting
    (tests) takes effect; the interfaces themselves are read once per process."""
    seen: dict[str, None] = {}
    for address in (*_interface_addresses(), *configured):
        for form in _address_forms(address):
            if not _inside_placeholder(form):
                seen.setdefault(form, None)
    return tuple(sorted(seen, key=len, reverse=True))


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
        self._ordered: tuple[str, ...] | None = ()  # longest first; None: recompute
        for value in values:
            self.register(value)

    def register(self, value: str) -> None:
        """Scrub ``value`` from every later output of this scrubber. Values shorter than 6 characters
        are ignored (they would match ordinary text); registering a value twice is harmless."""
        if len(value) < MIN_VALUE_LENGTH or _inside_placeholder(value) or value in self._values:
            return
        self._values[value] = None
        self._ordered = None

    @property
    def values(self) -> tuple[str, ...]:
        """The registered values, in registration order (for tests; never log them)."""
        return tuple(self._values)

    def scrub(self, text: str) -> str:
        """``text`` with credentials replaced by ``[REDACTED]`` and server addresses by
        ``[SERVER_IP]``; ``scrub(scrub(t)) == scrub(t)``."""
        if not text:
            return text
        if self._ordered is None:
            self._ordered = tuple(sorted(self._values, key=len, reverse=True))
        values, addresses = self._ordered, server_addresses()
        # A value or address containing a bracket could match across a placeholder: then any pattern
        # may match again after a round, and only full rounds are safe.
        full_rounds = any("[" in v or "]" in v for v in (*values, *addresses))
        retry: dict[_KeywordStage, list[int]] | None = None
        for _ in range(_MAX_ROUNDS):
            scrubbing = _Pass(text)
            if retry is None or full_rounds:
                _literal_patterns(scrubbing)
                stages: tuple[_KeywordStage, ...] = _KEYWORD_STAGES
            else:
                # A round's output: only 5 and 6 can match, and only at candidates that failed before.
                mark = scrubbing.mark
                scrubbing.apply(P5_STAGE.pattern, retry[P5_STAGE], mark)
                scrubbing.apply(P6_STAGE.pattern, retry[P6_STAGE], mark)
                if scrubbing.mark == mark:
                    break
                stages = (P7_STAGE, P8_STAGE, P9_STAGE)
                retry = {stage: scrubbing.moved(retry[stage], mark) for stage in (P5_STAGE, P6_STAGE)}
            mark = scrubbing.mark
            found = _keyword_patterns(scrubbing, stages)
            scrubbing.replace(_hex_runs(scrubbing.text))
            # Secrets before addresses: an address overlapping a secret must not leave part of it behind.
            _replace_values(scrubbing, values)
            _replace_addresses(scrubbing, addresses)
            if scrubbing.mark == 0:
                break
            if retry is None or full_rounds:
                retry = {stage: scrubbing.moved(found[stage], mark) for stage in (P5_STAGE, P6_STAGE)}
            else:
                retry = {stage: scrubbing.moved(retry[stage], mark) for stage in (P5_STAGE, P6_STAGE)}
            text = scrubbing.text
        return text


def scrubber_for(tenant_values: Iterable[str] = ()) -> Scrubber:
    """A fresh scrubber for one request, seeded with the tenant's known secret values."""
    return Scrubber(tenant_values)
