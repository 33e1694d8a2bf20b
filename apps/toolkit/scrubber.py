"""The credential scrubber applied to every tool output (SPEC A "Runtime, scrubbing, limits", B §7.1).

``Scrubber(values).scrub(text)`` replaces, in this order:

1. the values registered for this request (tenant credentials, secrets a tool used) with
   ``[REDACTED]``. Upstream replaces them only after the patterns, so a pattern could take part of a
   secret and leave the rest in the output ("tenant-sk-…-tail" became "tenant-[REDACTED]-tail");
   here they go first, and again after the patterns, as upstream (a no-op unless a value contains a
   bracket and so can occur across a placeholder);
2. Toolgate's patterns 11-13, each applied to the output of the previous one (stricter than upstream,
   which leaks all three):

   11. ``"key": "value"`` with a quoted key (JSON, YAML, Python dicts) whose name is, or ends with,
       ``token``, ``secret``, ``password``, ``passwd``, ``api_key``/``apikey``, ``private_key``,
       ``secret_key``, ``access_key``, ``authorization`` or ``credential(s)`` (any case, any prefix:
       ``client_secret``, ``X-Auth-Token``, ``accessToken``): only the string value is replaced, so
       the JSON stays readable (``"token": "[REDACTED]"``). Pattern 5 needs ``token`` right before
       ``:``, which the closing quote prevents. Names that merely start with one of the words
       (``token_count``, ``token_type``, ``password_policy``) and values that are not non-empty
       strings (numbers, null, objects) are left;
   12. a PEM private key, ``-----BEGIN … PRIVATE KEY-----`` to ``-----END … PRIVATE KEY-----``
       (markers included, also inside a JSON string with ``\\n`` escapes; RSA, EC, OPENSSH, PGP …
       BLOCK), and if the END marker is missing (truncated output) the base64 lines after BEGIN.
       Upstream's pattern 7 takes at most a "KEY=…" line out of its body;
   13. ``bearer <token>`` anywhere (headers, curl -H, HTTP dumps), the token being an RFC 6750
       b64token of 20+ characters (JWTs with dots, base64 with ``+/=``, opaque tokens): only the token
       is replaced, ``Authorization: Bearer [REDACTED]``. Upstream's pattern 5 misses it: "bearer" is
       followed by a space, not ``[:=]``, and as the value of ``Authorization:`` "Bearer" is 6
       characters, not the 8 of ``\\S{8,}``. "the bearer of this letter" and ``f"Bearer {token}"``
       are left;
   14. the credentials after ``Authorization:`` (or ``=``, quoted or not, any case, ``Proxy-`` too)
       and the scheme ``Bearer``, ``Basic`` or ``Token``, **whatever their length**
       (``Authorization: Basic dXNlcjpwYXNz`` → ``Authorization: Basic [REDACTED]``; a short test
       token is still a token). Pattern 5 needs 8 non-space characters after the separator, which
       the scheme and its space break, and 13 needs 20 characters.

   They come before the spec's ten so that no spec pattern can split what they cover (a token
   holding "AKIA…", a key body holding "KEY=…");
3. the ten patterns of B §7.1, each applied to the output of the previous one, with ``[REDACTED]``
   (unchanged: Toolgate keeps every upstream redaction, e.g. ``token = get_token()`` is pattern 5's);
4. the server's own addresses (local interface IPs, their IPv4 decimal and dashed forms, and
   ``settings.TOOLGATE_SERVER_ADDRESSES``) with ``[SERVER_IP]``.

Registered values live on the ``Scrubber`` object, which is built per request (``scrubber_for``):
there is deliberately no process-wide list, so one tenant's secrets can never be matched, or leaked
through timing, in another tenant's output.

Speed. Plain ``re.sub`` calls take about 300 ms for 1 MiB of code-like output, because five of the
patterns start with a case-insensitive word (``(?i)token|secret|…``, ``(?i)[A-Z_]*KEY…``) and Python's
``re`` then runs its matcher at every character. Here every pattern is still applied exactly as written
(``pattern.match``), but only where one of its matches can start (see "Where matches can start"):

* patterns 1-4 start with a case-sensitive literal, found with ``bytes.find``;
* patterns 5-9 and 11 are "word, whitespace, separator, value". Read backwards they start with the
  separator, a literal, so the candidates are found by scanning a reversed, ASCII-lower-cased copy of
  the text (``_Starts``): one scan at each ":" (5, 6, 11), one at each "=" (5, 8), one for 7;
* 9, 12, 13 and 14 start with a literal word, found with ``bytes.find`` in the same copy;
* pattern 10 replaces runs of 64+ hex digits, found with ``bytes.find`` on a translated copy.

The candidates are tried in order, skipping those inside a previous match, which is what ``re.sub``
does. Replacements are collected and cut into the text once per round, not once per pattern (each cut
copies the whole text): a pattern that can consume a placeholder (11, 12 in a key's body, 5, 6) gets
the text with the pending ones cut in first, but only when it has a candidate that could reach one
(``_reaches``), which in ordinary output it has not. ``tests/unit/test_scrubber.py`` compares the result
with plain ``str.replace`` and ``re.sub`` calls on thousands of random mixes of secrets and near-misses.
The patterns are not merged into one alternation: where they overlap (``sk-ant-…sk-…``), "one after
the other" and "leftmost of all" differ, and the order is given.

Idempotence. Upstream's single round is not idempotent: ``token: abKEY=abcdefgh`` becomes
``token: [REDACTED]``, which a second round turns into ``[REDACTED]``. ``scrub`` repeats the round until
nothing changes. The repeat is cheap: in a round's output only patterns 5, 6 and 11 can match again
(their values are the only ones that may contain the ``[`` of a placeholder; any other match would
consist of characters that survived the round, so the round would already have replaced them; 11
never matches its own output, whose value is exactly a placeholder, and 12 always matches at a BEGIN
marker), so the next round retries just those three, at their candidates from before (moved past
the replacements since), and continues only if they replaced something.

Values and addresses are replaced one after the other, longest first (``str.find``/``bytes.find``), not
by one alternation: ``re`` scans for an alternation's first characters (digits, letters) about ten
times more slowly than a substring search, and an absent value then costs one fast scan.
"""

from __future__ import annotations

import bisect
import functools
import ipaddress
import re
import socket
from collections.abc import Iterable, Iterator
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

# Toolgate's additions (see the module docstring), applied before the ten. Where a pattern has a group
# named "secret", only that group is replaced and the rest of the match (the key, "Bearer ") is kept.

# The last word of a key whose string value is a secret; the key may have any prefix ("client_secret",
# "X-Auth-Token", "accessToken") but must end with one of these ("token_count", "password_policy" do not).
SECRET_KEY_WORDS = (
    "token",
    "secret",
    "password",
    "passwd",
    "api[_-]?key",
    "private[_-]?key",
    "secret[_-]?key",
    "access[_-]?key",
    "authorization",
    "credentials?",
)
P11_QUOTED_KEY = re.compile(
    r"""(?P<q>["'])[A-Za-z0-9_.-]*?(?:"""
    + "|".join(SECRET_KEY_WORDS)
    + r""")(?P=q)\s*:\s*(?P<v>["'])(?!\[REDACTED\](?P=v))(?P<secret>(?:(?!(?P=v))[^\\\n]|\\.)+)(?P=v)""",
    _AI,
)
# A private key, markers included. The body is searched for at most 32 KiB (an 8192-bit RSA key is about
# 6.5 KiB; the bound caps the work per BEGIN line, however many there are); without an END marker in
# reach (a truncated output), the run of base64, "_", "-", "\" and line breaks after BEGIN goes.
P12_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
    r"(?:[\s\S]{0,32768}?-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|[A-Za-z0-9+/=\r\n\\_-]*)",
    _A,
)
# RFC 6750 b64token (letters, digits, -._~+/, then "="s), 20 characters or more: "bearer of this letter"
# and "Bearer {token}" are left, JWTs, base64 and opaque tokens are not.
P13_BEARER = re.compile(r"bearer[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)", _AI)
# The credentials of an Authorization (or Proxy-Authorization) header, field or key (quoted, or a
# subscript: headers["Authorization"] = …), whatever their length: "Bearer", "Basic" or "Token", then an
# RFC 6750 b64token (RFC 7617's base64 is a subset). The header names the value a credential, so 13's
# length floor is not needed: "Authorization: Bearer abc" loses "abc". "$TOKEN" and "{token}" do not
# start with a b64token character and are left.
P14_AUTHORIZATION = re.compile(
    r"authorization[\"'\]]{0,2}\s*[:=]\s*[\"']?(?:bearer|basic|token)[ \t]+"
    r"(?P<secret>[A-Za-z0-9._~+/-]+=*)",
    _AI,
)

EXTRA_PATTERNS: tuple[re.Pattern[str], ...] = (P11_QUOTED_KEY, P12_PRIVATE_KEY, P13_BEARER, P14_AUTHORIZATION)

Spans = list[tuple[int, int]]


def _rebuild(text: str, spans: Spans, placeholder: str | list[str]) -> str:
    """``text`` with each of ``spans`` (ascending, disjoint) replaced by ``placeholder`` (or by the
    placeholder at the same index)."""
    parts: list[str] = []
    resume = 0
    if isinstance(placeholder, str):
        for start, end in spans:
            parts.append(text[resume:start])
            parts.append(placeholder)
            resume = end
    else:
        for (start, end), each in zip(spans, placeholder, strict=True):
            parts.append(text[resume:start])
            parts.append(each)
            resume = end
    parts.append(text[resume:])
    return "".join(parts)


def _match_spans(
    pattern: re.Pattern[str], text: str, starts: Iterable[int], pending: Spans | None = None
) -> Spans:
    """The spans ``pattern.sub`` would replace, given every position where a match can start
    (ascending): candidates are tried in order, skipping those inside a previous match. Where the
    pattern has a "secret" group, that group's span is the one replaced (the scan still resumes after
    the whole match, as re.sub does).

    ``pending``: spans (ascending) that an earlier pattern replaces but that are not yet cut out of
    ``text``. A match must then stop where the next one begins (``endpos``), exactly as it would stop at
    the placeholder's "[", which none of the patterns used this way can consume: 1-4, 7-9, 13 and 14 never
    can, 5 and 6 are used so only when no pending span is in their reach (``_reaches``), 12 only when
    nothing is pending."""
    spans: Spans = []
    resume = 0  # where the next match may start: after the previous one, as re.sub continues
    end_of_text = len(text)
    pending = pending or []
    j, count = 0, len(pending)
    keep = "secret" in pattern.groupindex
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
            spans.append(m.span("secret") if keep else (start, resume))
    return spans


def _transport(positions: list[int], spans: Spans, width: int | list[int]) -> list[int]:
    """Positions (ascending) in a text → the same characters' positions once ``spans`` of it were each
    replaced by a ``width``-character placeholder (or the width at the same index). Positions inside a
    replaced span are dropped."""
    if not spans:
        return positions
    widths = [width] * len(spans) if isinstance(width, int) else width
    moved: list[int] = []
    shift = 0
    i, count = 0, len(spans)
    for position in positions:
        while i < count and spans[i][1] <= position:
            shift += widths[i] - (spans[i][1] - spans[i][0])
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


def _finder(text: str, encoded: bytes | None, needle: str) -> tuple[str | bytes, str | bytes]:
    """Where to look for ``needle`` and as what: in ``encoded`` (``text`` one byte per character, the
    same positions, about 15% faster to search than a text holding non-Latin-1 characters) when the
    needle is Latin-1 without "?" (the byte that stands for every other character), else in ``text``."""
    if encoded is not None and "?" not in needle:
        try:
            return encoded, needle.encode("latin-1")
        except UnicodeEncodeError:
            pass
    return text, needle


class _Pass:
    """A text being scrubbed, with every replacement made so far, so that candidate positions found
    earlier can be moved to where those characters are now (``moved``).

    Cutting placeholders into 1 MiB of text costs about 0.3-1.5 ms each time, so replacements are
    collected as pending and cut in together (``commit``), up to a pattern that could consume a
    placeholder where one is pending (see ``_full_round``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._edits: list[tuple[Spans, int | list[int]]] = []
        self._pending: Spans = []
        self._server_ips: set[int] = set()  # starts of the pending spans that become [SERVER_IP]

    @property
    def mark(self) -> int:
        """Names the current state of the text for ``moved``."""
        return len(self._edits)

    @property
    def pending(self) -> Spans:
        return self._pending

    def moved(self, positions: list[int], mark: int) -> list[int]:
        for spans, width in self._edits[mark:]:
            positions = _transport(positions, spans, width)
        return positions

    def cut_ends(self, mark: int) -> list[int]:
        """Where, in the current text, the replacements since ``mark``, cut in or pending, end: there
        the character after a placeholder begins (unordered)."""
        ends = [end for _, end in self._pending]
        for index in range(mark, len(self._edits)):
            spans, width = self._edits[index]
            widths = [width] * len(spans) if isinstance(width, int) else width
            shift = 0
            fresh: list[int] = []
            for (start, end), each in zip(spans, widths, strict=True):
                fresh.append(start + shift + each)
                shift += each - (end - start)
            ends.extend(self.moved(fresh, index + 1))
        return ends

    def replace(self, spans: Spans, placeholder: str = REDACTED) -> None:
        if spans:
            self.text = _rebuild(self.text, spans, placeholder)
            self._edits.append((spans, len(placeholder)))

    def add_pending(self, spans: Spans, *, server_ip: bool = False) -> None:
        """Collect ``spans`` (ascending, disjoint from those collected) for ``commit``."""
        if spans:
            self._pending = sorted(self._pending + spans)
            if server_ip:
                self._server_ips.update(start for start, _ in spans)

    def apply(self, pattern: re.Pattern[str], starts: list[int], mark: int, *, pending: bool = False) -> None:
        """Apply ``pattern`` at ``starts``, positions found in the text as it was at ``mark``;
        ``pending``: collect the replacements for ``commit``, else cut everything in first (the pattern
        may consume placeholders: it must see them)."""
        if pending:
            self.add_pending(_match_spans(pattern, self.text, self.moved(starts, mark), self._pending))
        else:
            self.commit()
            self.replace(_match_spans(pattern, self.text, self.moved(starts, mark)))

    def commit(self) -> None:
        spans, self._pending = self._pending, []
        server_ips, self._server_ips = self._server_ips, set()
        if not server_ips:
            self.replace(spans)
        elif spans:
            placeholders = [SERVER_IP if start in server_ips else REDACTED for start, _ in spans]
            self.text = _rebuild(self.text, spans, placeholders)
            self._edits.append((spans, [len(each) for each in placeholders]))


def _reaches(reach: re.Pattern[str], text: str, starts: list[int], pending: Spans) -> bool:
    """Whether, from one of ``starts`` (ascending), ``reach`` gets to the beginning of a pending span
    (or stops just before it, looking at its first character).

    ``reach`` is a pattern's key part followed by the whole run its value can take (5: key\\s*[:=]\\s*
    and the run of non-whitespace; 6: scheme:// and the run of [^\\s"']): everything the pattern looks
    at. If no pending span begins there, the pattern matches exactly as it would once they are cut in.
    Only the nearest start before each span is tried: a start inside an earlier one's reach lies in its
    value's run, and its own reach goes at least as far (that run continues it)."""
    for begin, _ in pending:
        nearest = bisect.bisect_left(starts, begin) - 1
        if nearest >= 0:
            m = reach.match(text, starts[nearest])
            if m is not None and m.end() >= begin:
                return True
    return False


# --- Where matches can start ------------------------------------------------------------------------------
# Patterns 1-4 start with a case-sensitive literal: every match of 1 and 2 starts at an "sk-", of 3 at
# "gh[pousr]_", of 4 at "AKIA", found with bytes.find (a C substring search, faster than re's prefix
# scan) or re in the text encoded one byte per character (latin-1; anything else becomes "?", which is
# neither a letter, whitespace, a quote nor a separator for any pattern, just as the original
# character is not under re.ASCII).
#
# The others are found in the view: that encoding lower-cased (bytes.lower() folds A-Z only, as
# IGNORECASE with ASCII does) and reversed. A reversed match ending at j is a forward candidate starting
# at n - j.
#
# Why these are all the places where a match can start:
#   5, 8: the key word is immediately followed by \s*[:=]; no key word is a suffix of another (of
#         5 or 8), so each separator has at most one key word ending just before its whitespace;
#   6:    the scheme is immediately followed by "://" (same argument, and no scheme ends with a key
#         word of 5 or a quote, so 5, 6 and 11 never share a ":");
#   7:    [A-Z_]*KEY[A-Z_]*\s*= spans the whole run of letters and underscores before the separator,
#         so a match starts where that run starts (re.sub never resumes inside such a run: every match
#         of 5-9 ends at whitespace, a quote, "[" or the end), or, if a placeholder was cut into that
#         run since the view was taken (a registered value, the end of an "sk-…" followed by "_KEY"),
#         just after that placeholder (``cut_ends``: cut in or pending);
#   9:    it starts at some "VIRTUAL_": every occurrence is a candidate;
#   11:   the key is the whole run of [A-Za-z0-9_.-] between two quotes, and its closing quote is
#         followed by \s*: — read backwards, ":", whitespace, a quote, the key word, the rest of the run
#         and a quote; found by the same scan as 5's ":" (a match holds only one ":");
#   12, 13, 14: "-----BEGIN", "bearer" and "authorization": every occurrence (bytes.find) is a candidate.
# Replacements never create a candidate: every candidate is a run of characters none of which is "["
# or "]", and a placeholder's characters cannot be part of it (7 aside, handled as said). Hence all
# candidates come from one view of the text taken at the start of the round, moved past later
# replacements.

_GITHUB_PREFIX = re.compile(rb"gh[pousr]_")

_KEY_WORDS = rb"(?:yek[_-]?ipa|nekot|terces|drowssap|reraeb|noitazirohtua)"
_QUOTED_KEY_WORDS = (
    rb"(?:nekot|terces|drowssap|dwssap|yek[_-]?ipa|yek[_-]?etavirp|yek[_-]?terces|yek[_-]?ssecca"
    rb"|noitazirohtua|s?laitnederc)"
)
# Two scans find the candidates of 5, 6, 8 and 11: one at each ":" (6's scheme, 5's key word or 11's
# quoted key: at most one of them ends at a given ":"), one at each "=" (5's key word or 8's: no key
# word of one is a suffix of the other's). "[:=]" would be a character class, which re scans for far
# more slowly than a literal. 7 needs a scan of its own: a "=" can be a candidate of both 5 and 7.
_REV_COLON = re.compile(
    rb":(?:(?<=//:)(?:sergtsop|lqsergtsop|lqsym|bdognom|sider|pqma)()|\s*(?:("
    + _KEY_WORDS
    + rb")|[\"']"
    + _QUOTED_KEY_WORDS
    + rb"[a-z0-9_.-]*[\"']))"
)
_REV_EQUALS = re.compile(rb"=\s*(?:(" + _KEY_WORDS + rb")|(?:nsd|lru_esabatad|lru_sider|iru_ognom))")
# Pattern 7's value is [^\[\s]{8,} after \s*=\s*. In the view the characters before a "=" are the ones
# after it: when the first of them is not whitespace, the value must be those 8. A replacement never
# lengthens that run (a placeholder starts with "[", where the value stops), so a "=" followed by a
# shorter run is no candidate in this round or any later one.
_REV_P7 = re.compile(rb"=(?:(?<=[^\[\s]{8}=)|(?<=\s=))\s*[a-z_]*?(?:yek|terces|laitnederc|etavirp)[a-z_]*")


def _find_all_bytes(data: bytes, needle: bytes) -> list[int]:
    found: list[int] = []
    at = data.find(needle)
    while at >= 0:
        found.append(at)
        at = data.find(needle, at + 1)
    return found


def _scan(regex: re.Pattern[bytes], view: bytes) -> list[int]:
    n = len(view)
    found = [n - m.end() for m in regex.finditer(view)]
    found.reverse()
    return found


def _occurrences(view: bytes, needle: bytes) -> list[int]:
    """Forward positions of ``needle``'s reversed, lower-cased form. A substring search beats a regex."""
    needle = needle.lower()[::-1]
    n, width = len(view), len(needle)
    found: list[int] = []
    at = view.find(needle)
    while at >= 0:
        found.append(n - at - width)
        at = view.find(needle, at + 1)
    found.reverse()
    return found


@dataclass
class _Starts:
    """Candidates for every pattern but 10, in the coordinates of the text the view was taken of."""

    encoded: bytes  # the text, one byte per character (for 10)
    view: bytes
    quoted: list[int]
    p5: list[int]
    p6: list[int]
    p8: list[int]

    @classmethod
    def of(cls, text: str) -> _Starts:
        encoded = text.encode("latin-1", "replace")
        view = encoded.lower()[::-1]
        n = len(view)
        quoted: list[int] = []
        p5: list[int] = []
        p6: list[int] = []
        p8: list[int] = []
        for m in _REV_COLON.finditer(view):
            (p6 if m.start(1) >= 0 else p5 if m.start(2) >= 0 else quoted).append(n - m.end())
        for m in _REV_EQUALS.finditer(view):
            (p5 if m.start(1) >= 0 else p8).append(n - m.end())
        p5.sort()
        for found in (quoted, p6, p8):
            found.reverse()
        return cls(encoded, view, quoted, p5, p6, p8)

    def private_key(self) -> list[int]:
        return _occurrences(self.view, b"-----BEGIN")

    def bearer(self) -> list[int]:
        return _occurrences(self.view, b"bearer")

    def authorization(self) -> list[int]:
        return _occurrences(self.view, b"authorization")

    def p7(self) -> list[int]:
        return _scan(_REV_P7, self.view)

    def p9(self) -> list[int]:
        return _occurrences(self.view, b"VIRTUAL_")


# What the reach of 5 and 6 is (``_reaches``).
_P5_REACH = re.compile(r"(?:api[_-]?key|token|secret|password|bearer|authorization)\s*[:=]\s*\S*", _AI)
_P6_REACH = re.compile(r"(?:postgres|postgresql|mysql|mongodb|redis|amqp)://[^\s\"']*", _AI)
# [A-Z_] under IGNORECASE and ASCII: the characters of 7's key run.
_RUN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


# --- Rounds -------------------------------------------------------------------------------------------------
# The patterns that can match again in a round's output, at candidates where they failed before (or, for
# 11, succeeded: its key stays); ``_Retry`` holds those candidates in the output's coordinates.


@dataclass
class _Retry:
    quoted: list[int]
    p5: list[int]
    p6: list[int]

    def moved(self, scrubbing: _Pass, mark: int) -> _Retry:
        return _Retry(*(scrubbing.moved(positions, mark) for positions in (self.quoted, self.p5, self.p6)))


def _full_round(scrubbing: _Pass, values: tuple[str, ...], addresses: tuple[str, ...], exact: bool) -> _Retry:
    """Every stage, in order, normally with one cut at the end. ``exact``: some value or address contains
    "[" or "]" and could match across a placeholder, so values and addresses are cut in one after the
    other, and values are replaced after the patterns as well (only such a value can occur there)."""
    mark = scrubbing.mark
    text = scrubbing.text
    starts = _Starts.of(text)
    encoded = starts.encoded
    sk = _find_all_bytes(encoded, b"sk-")
    github = [m.start() for m in _GITHUB_PREFIX.finditer(encoded)]
    aws = _find_all_bytes(encoded, b"AKIA")
    if exact:
        _replace_values(scrubbing, values)
    else:
        scrubbing.add_pending(_value_spans(text, encoded, values))
    # 11 and 12 may consume placeholders (a value inside a quoted value or a key's body): cut in what is
    # pending first, but only then (most outputs have neither). 13, 14 and 1-4 cannot run into one.
    quoted, private_key = starts.quoted, starts.private_key()
    if quoted:
        scrubbing.apply(P11_QUOTED_KEY, quoted, mark)
    if private_key:
        scrubbing.commit()
        scrubbing.apply(P12_PRIVATE_KEY, private_key, mark, pending=True)
    scrubbing.apply(P13_BEARER, starts.bearer(), mark, pending=True)
    scrubbing.apply(P14_AUTHORIZATION, starts.authorization(), mark, pending=True)
    scrubbing.apply(P1_OPENAI, sk, mark, pending=True)
    scrubbing.apply(P2_ANTHROPIC, sk, mark, pending=True)
    scrubbing.apply(P3_GITHUB, github, mark, pending=True)
    scrubbing.apply(P4_AWS, aws, mark, pending=True)
    # 5 can consume a placeholder ("token=[REDACTED]") and 6 one of 5's ("redis://token=…"): what is
    # pending is cut in first if they could reach it, which is rare. 7-10 cannot run into one.
    if _reaches(_P5_REACH, scrubbing.text, scrubbing.moved(starts.p5, mark), scrubbing.pending):
        scrubbing.commit()
    scrubbing.apply(P5_KEY_VALUE, starts.p5, mark, pending=True)
    p6 = starts.p6
    if _reaches(_P6_REACH, scrubbing.text, scrubbing.moved(p6, mark), scrubbing.pending):
        scrubbing.commit()
    scrubbing.apply(P6_CONNECTION, p6, mark, pending=True)
    now = scrubbing.text
    p7 = scrubbing.moved(starts.p7(), mark)
    extra = [end for end in scrubbing.cut_ends(mark) if end < len(now) and now[end] in _RUN_CHARS]
    if extra:
        p7 = sorted(p7 + extra)
    scrubbing.apply(P7_ENV_KEY, p7, scrubbing.mark, pending=True)
    scrubbing.apply(P8_ENV_DSN, starts.p8, mark, pending=True)
    scrubbing.apply(P9_ENV_VIRTUAL, starts.p9(), mark, pending=True)
    if scrubbing.mark != mark:
        encoded = now.encode("latin-1", "replace")
    scrubbing.add_pending(_hex_runs(encoded, scrubbing.pending))
    if exact:
        scrubbing.commit()
        _replace_values(scrubbing, values)
        # Secrets before addresses: an address overlapping a secret must not leave part of it behind.
        _replace_addresses(scrubbing, addresses)
    else:
        _add_addresses(scrubbing, encoded, addresses)
        scrubbing.commit()
    return _Retry(starts.quoted, starts.p5, p6).moved(scrubbing, mark)


def _retry_round(scrubbing: _Pass, retry: _Retry, addresses: tuple[str, ...]) -> _Retry | None:
    """A round on the previous round's output: only 11, 5 and 6 can match there (see the module
    docstring), at ``retry``; None if they replace nothing (the text is final)."""
    mark = scrubbing.mark
    scrubbing.apply(P11_QUOTED_KEY, retry.quoted, mark)
    scrubbing.apply(P5_KEY_VALUE, retry.p5, mark)
    scrubbing.apply(P6_CONNECTION, retry.p6, mark)
    if scrubbing.mark == mark:
        return None
    retry = retry.moved(scrubbing, mark)
    mark = scrubbing.mark
    # What 5 and 6 consumed may let 7-9 match (a run of letters now starting after a placeholder…):
    # fresh candidates, from a view of the text as it is now.
    starts = _Starts.of(scrubbing.text)
    scrubbing.apply(P7_ENV_KEY, starts.p7(), mark, pending=True)
    scrubbing.apply(P8_ENV_DSN, starts.p8, mark, pending=True)
    scrubbing.apply(P9_ENV_VIRTUAL, starts.p9(), mark, pending=True)
    scrubbing.add_pending(_hex_runs(starts.encoded, scrubbing.pending))  # nothing cut in since the view
    _add_addresses(scrubbing, starts.encoded, addresses)
    scrubbing.commit()
    return retry.moved(scrubbing, mark)


# --- Pattern 10 -----------------------------------------------------------------------------------------
# [a-fA-F0-9]{64,} replaces every maximal run of 64+ hex digits (the leftmost start of a long enough
# run is its first character, and greedy takes it all). Hex digits are so common that re's scan for a
# character class is slow; instead each character becomes one byte ("x" for a hex digit, "." for
# anything else) and bytes.find looks for 64 "x" in a row.

_HEX_MAP = bytes(0x78 if chr(i) in "0123456789abcdefABCDEF" else 0x2E for i in range(256))
_HEX_RUN = b"x" * 64


def _hex_runs(encoded: bytes, pending: Spans) -> Spans:
    """The runs of 64+ hex digits in a text (``encoded`` one byte per character) once ``pending``
    (ascending) is cut in: a placeholder begins and ends with a bracket, so a run stops where a pending
    span begins and starts again after it (inside "[REDACTED]" the longest run is "EDAC")."""
    flags = encoded.translate(_HEX_MAP)
    spans: Spans = []
    j, count = 0, len(pending)
    at = flags.find(_HEX_RUN)
    while at >= 0:
        end = flags.find(b".", at + len(_HEX_RUN))
        if end < 0:
            end = len(flags)
        while j < count and pending[j][1] <= at:
            j += 1
        piece, k = at, j
        while k < count and pending[k][0] < end:
            if pending[k][0] - piece >= len(_HEX_RUN):
                spans.append((piece, pending[k][0]))
            piece = max(piece, pending[k][1])
            k += 1
        if end - piece >= len(_HEX_RUN):
            spans.append((piece, end))
        at = flags.find(_HEX_RUN, end)
    return spans


# --- Registered values and server addresses ---------------------------------------------------------------
# One value after the other, longest first, rather than one alternation: re scans for an alternation's
# first characters (digits, letters) about ten times more slowly than str.find does, and a value that
# does not occur costs only that one C scan.


def _replace_values(scrubbing: _Pass, values: tuple[str, ...]) -> None:
    """Secrets: replaced wherever they occur, no word boundary (a secret is hidden even inside a word),
    left to right without overlaps like str.replace, one value after the other."""
    for value in values:
        text = scrubbing.text
        spans: Spans = []
        at = text.find(value)
        while at >= 0:
            spans.append((at, at + len(value)))
            at = text.find(value, at + len(value))
        scrubbing.replace(spans)


def _value_spans(text: str, encoded: bytes, values: tuple[str, ...]) -> Spans:
    """What ``_replace_values`` replaces, as spans of ``text`` (ascending; ``encoded``: ``text`` one byte
    per character), provided that no value contains a bracket: then an occurrence of a value in the
    text once earlier values are replaced is exactly one in ``text`` that overlaps none of their spans
    (it cannot include a placeholder's characters)."""
    taken: Spans = []
    for value in values:
        haystack, needle = _finder(text, encoded, value)
        begins = [start for start, _ in taken]
        found: Spans = []
        at = haystack.find(needle)  # type: ignore[arg-type]  # str in str or bytes in bytes
        while at >= 0:
            end = at + len(value)
            before = bisect.bisect_left(begins, end) - 1
            if before >= 0 and taken[before][1] > at:
                at = haystack.find(needle, at + 1)  # type: ignore[arg-type]  # overlaps a longer value's
                continue
            found.append((at, end))
            at = haystack.find(needle, end)  # type: ignore[arg-type]
        if found:
            taken = sorted(taken + found)
    return taken


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


def _add_addresses(scrubbing: _Pass, encoded: bytes, addresses: tuple[str, ...]) -> None:
    """``_replace_addresses`` with the replacements pending (``encoded``: the text one byte per
    character), provided that no address contains a bracket: an occurrence overlapping a pending span is
    not in the text any more, and a character in a pending span next to an occurrence is a
    placeholder's bracket (neither a letter nor a digit)."""
    text = scrubbing.text
    index: tuple[Spans, list[int], set[int], set[int]] | None = None  # built at the first occurrence
    for address in addresses:
        haystack, needle = _finder(text, encoded, address)
        spans: Spans = []
        at = haystack.find(needle)  # type: ignore[arg-type]  # str in str or bytes in bytes
        while at >= 0:
            if index is None:
                pending = scrubbing.pending
                begins = [start for start, _ in pending]
                index = (pending, begins, set(begins), {end for _, end in pending})
            pending, begins, begin_set, end_set = index
            end = at + len(address)
            before = bisect.bisect_left(begins, end) - 1
            left = "" if at in end_set else text[at - 1 : at]
            right = "" if end in begin_set else text[end : end + 1]
            if (
                (before >= 0 and pending[before][1] > at)
                or (left.isascii() and left.isalnum())
                or (right.isascii() and right.isalnum())
            ):
                at = haystack.find(needle, at + 1)  # type: ignore[arg-type]
                continue
            spans.append((at, end))
            at = haystack.find(needle, end)  # type: ignore[arg-type]
        if spans:
            scrubbing.add_pending(spans, server_ip=True)
            index = None


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


# What one scrubber remembers of the texts it scrubbed (``Scrubber.scrub``): short texts, a few per call.
_REMEMBERED_CHARS = 4096
_REMEMBERED_TEXTS = 32


class Scrubber:
    """Scrubs one request's tool output. Build one per request (``scrubber_for``); never share one
    between tenants, because the values registered on it are that tenant's secrets."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: dict[str, None] = {}  # insertion-ordered set
        self._ordered: tuple[str, ...] | None = ()  # longest first; None: recompute
        # A call scrubs the same short text several times (the model's output, the user's, the result's
        # text block, an argument echoed back): each is scrubbed once. Keyed by the text; emptied when a
        # value is registered or the server addresses change, the only other inputs of ``scrub``.
        self._done: dict[str, str] = {}
        self._done_addresses: tuple[str, ...] | None = None
        for value in values:
            self.register(value)

    def register(self, value: str) -> None:
        """Scrub ``value`` from every later output of this scrubber. Values shorter than 6 characters
        are ignored (they would match ordinary text); registering a value twice is harmless."""
        if len(value) < MIN_VALUE_LENGTH or _inside_placeholder(value) or value in self._values:
            return
        self._values[value] = None
        self._ordered = None
        self._done = {}  # a new one: a scrub under way (another thread) stores into the old one

    @property
    def values(self) -> tuple[str, ...]:
        """The registered values, in registration order (for tests; never log them)."""
        return tuple(self._values)

    def scrub(self, text: str) -> str:
        """``text`` with credentials replaced by ``[REDACTED]`` and server addresses by
        ``[SERVER_IP]``; ``scrub(scrub(t)) == scrub(t)``."""
        if not text:
            return text
        # Taken first: a value registered from here on (another thread) replaces it, so what is scrubbed
        # without that value is never remembered where a later call would find it.
        memory = self._done
        if self._ordered is None:
            self._ordered = tuple(sorted(self._values, key=len, reverse=True))
        values, addresses = self._ordered, server_addresses()
        if self._done_addresses is None:
            self._done_addresses = addresses
        elif addresses is not self._done_addresses:  # other settings (tests): forget; remember from the next
            self._done, self._done_addresses = {}, addresses
            memory = {}
        remembered = len(text) <= _REMEMBERED_CHARS
        if remembered:
            done = memory.get(text)
            if done is not None:
                return done
        scrubbed = self._scrub(text, values, addresses)
        if remembered and len(memory) < _REMEMBERED_TEXTS:
            memory[text] = scrubbed
        return scrubbed

    @staticmethod
    def _scrub(text: str, values: tuple[str, ...], addresses: tuple[str, ...]) -> str:
        # A value or address containing a bracket could match across a placeholder: then any pattern
        # may match again after a round, and only full rounds are safe.
        full_rounds = any("[" in v or "]" in v for v in (*values, *addresses))
        retry: _Retry | None = None
        for _ in range(_MAX_ROUNDS):
            scrubbing = _Pass(text)
            if retry is None or full_rounds:
                retry = _full_round(scrubbing, values, addresses, exact=full_rounds)
                if scrubbing.mark == 0:
                    break
            else:
                retry = _retry_round(scrubbing, retry, addresses)
                if retry is None:
                    break
            text = scrubbing.text
        return text


def scrubber_for(tenant_values: Iterable[str] = ()) -> Scrubber:
    """A fresh scrubber for one request, seeded with the tenant's known secret values."""
    return Scrubber(tenant_values)
