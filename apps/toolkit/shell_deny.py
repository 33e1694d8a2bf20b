"""The exec tool's configurable deny groups (SPEC Part B §6.1, GoClaw's ``shell_deny_groups.go``).

Fifteen named groups of regular expressions, every one denied by default. A tenant and an agent can
switch groups off (``{"group_name": false}``; ``true`` = deny). The agent's value wins over the
tenant's. An unknown group name is refused when settings are saved (:func:`validate_overrides`) and,
should one reach a check anyway, it never switches anything off: only a known name mapped to the
literal ``False`` allows a group.

The expressions are the upstream RE2 ones, translated to Python ``re`` with these choices:

* ``re.ASCII``: RE2's ``\\b``, ``\\w``, ``\\d`` and ``\\s`` are ASCII-only. Python's ``\\s`` in ASCII
  mode also matches ``\\v``, which RE2's does not; that only makes a pattern match slightly more.
* RE2's ``$`` without multi-line mode is the very end of the text; Python's also matches before a
  final newline, so ``$`` is written ``\\Z``.
* Everything else (``.`` not crossing newlines, ``^`` at the start, inline ``(?i)``) means the same.

The patterns run against the normalised command (NFKC, invisible characters removed; see
:mod:`apps.toolkit.shell_parse`) and against extra *checking variants* of it: look-alike letters
folded to ASCII, ``$IFS`` expanded to a space, and each simple command of a chain on its own, in its
source form and with its quotes removed. Matching more forms can only deny more; the start-anchored
``env_dump`` patterns thereby also catch ``ls; env``.

This layer is configurable; the unconditional one is :mod:`apps.toolkit.safeguard`, which always runs
first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apps.toolkit import shell_parse

# A download piped into (or substituted into) a program that runs it: shells, and the interpreters that
# run a script read from standard input. Upstream's two patterns miss most spellings: combined short
# flags (``wget -qO- URL | bash``), the URL after ``-O -``, ``| sudo bash``, ``| /bin/sh``, ``| dash``.
# These match any flags, so the pipe into the program is what is denied.
_RUNS_STDIN = r"(?:ba|da|z|k|mk|a|fi|tc|c)?sh|python[0-9.]*|perl|ruby|node|php"
_PIPE_WRAPPERS = r"(?:sudo|doas|env|exec|command|nohup|busybox|time|stdbuf|nice)"
_DOWNLOAD_PIPED_TO_SHELL = (
    r"\b(curl|wget|fetch)\b.*\|&?\s*(?:"
    + _PIPE_WRAPPERS
    + r"\b(?:\s+(?:-|\w+=)[^\s|]*)*\s+)*(?:[^\s|]*/)?(?:"
    + _RUNS_STDIN
    + r")\b"
)
_DOWNLOAD_SUBSTITUTED_INTO_SHELL = (
    r"\b(?:" + _RUNS_STDIN + r")\b.*(?:<\(|\$\(|`)\s*(?:" + _PIPE_WRAPPERS + r"\s+)*(?:curl|wget|fetch)\b"
)

# (group name, patterns), in upstream's DenyGroupNames() order. The raw strings are RE2 syntax that
# Python reads identically, except the ``$`` → ``\Z`` noted in the module docstring. Toolgate's additions
# come after upstream's patterns of their group.
_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "destructive_ops",
        (
            r"\brm\s+-[rf]{1,2}\b",
            r"\brm\s+.*--recursive",
            r"\brm\s+.*--force",
            r"\bdel\s+/[fq]\b",
            r"\brmdir\s+/s\b",
            r"\b(mkfs|diskpart)\b|\bformat\s",
            r"\bdd\s+if=",
            r">\s*/dev/sd[a-z]\b",
            r"\b(shutdown|reboot|poweroff|halt)\b",
            r"\b(init|telinit)\s+[06]\b",
            r"\bsystemctl\s+(suspend|hibernate)\b",
            r":\(\)\s*\{.*\};\s*:",
        ),
    ),
    (
        "data_exfiltration",
        (
            r"\bcurl\b.*\|\s*(ba)?sh\b",
            r"\bcurl\b.*(-d\b|-F\b|--data|--upload|--form|-T\b|(-X|--request)\s*P(UT|OST|ATCH))",
            r"\bwget\b.*-O\s*-\s*\|\s*(ba)?sh\b",
            r"\bwget\b.*(--post-(data|file)|--method=P(UT|OST|ATCH)|--body-data)",
            r"\b(nslookup|dig|host)\b",
            r"/dev/tcp/",
            r"\b(curl|wget)\b.*\blocalhost\b",
            r"\b(curl|wget)\b.*\b127\.0\.0\.1\b",
            r"\b(curl|wget)\b.*\b0\.0\.0\.0\b",
            _DOWNLOAD_PIPED_TO_SHELL,
            _DOWNLOAD_SUBSTITUTED_INTO_SHELL,
        ),
    ),
    (
        "reverse_shell",
        (
            r"\b(nc|ncat|netcat)\b.*(\s+-[a-z]|\s+\d+\.\d+\.\d+\.\d+|\s+localhost\b)",
            r"\bsocat\b",
            r"\bopenssl\b.*s_client",
            r"\btelnet\b.*\d+",
            r"\bpython[23]?\b.*(import|from)\s+(socket|http|urllib|requests|httpx|aiohttp)\b",
            r"\bperl\b.*-e\s*.*\b[Ss]ocket\b",
            r"\bruby\b.*-e\s*.*\b(TCPSocket|Socket)\b",
            r"\bnode\b.*-e\s*.*\b(net\.|http\.|https\.|fetch\(|axios|got\(|undici)\b",
            r"""\bnode\b.*-e\s*.*require\s*\(\s*['"]https?['"]\s*\)""",
            r"\bawk\b.*/inet/",
            r"\bmkfifo\b",
        ),
    ),
    (
        "code_injection",
        (
            r"\beval\s*\$",
            r"\bbase64\s+(-d\w*|--decode)\b.*\|\s*(ba)?sh\b",
        ),
    ),
    (
        "privilege_escalation",
        (
            r"\bsudo\b",
            r"\bsu\b",
            r"\bdoas\b",
            r"\bpkexec\b",
            r"\brunuser\b",
            r"\bnsenter\b",
            r"\bunshare\b",
            r"\b(mount|umount)\b",
            r"\b(capsh|setcap|getcap)\b",
        ),
    ),
    (
        "dangerous_paths",
        (
            r"\bchmod\s+[0-7]{3,4}\s+/",
            r"\bchown\b.*\s+/",
            r"\bchmod\b.*\+x.*/tmp/",
            r"\bchmod\b.*\+x.*/var/tmp/",
            r"\bchmod\b.*\+x.*/dev/shm/",
        ),
    ),
    (
        "env_injection",
        (
            r"\bLD_PRELOAD\s*=",
            r"\bDYLD_INSERT_LIBRARIES\s*=",
            r"\bLD_LIBRARY_PATH\s*=",
            r"/etc/ld\.so\.preload",
            r"\bGIT_EXTERNAL_DIFF\s*=",
            r"\bGIT_DIFF_OPTS\s*=",
            r"\bBASH_ENV\s*=",
            r"\bENV\s*=.*\bsh\b",
            r"\bexport\s+LD_",
            r"\bexport\s+DYLD_",
            r"\bexport\s+BASH_ENV\b",
            r"\bexport\s+ENV\s*=",
            r"\bexport\s+PROMPT_COMMAND\b",
        ),
    ),
    (
        "container_escape",
        (
            r"/var/run/docker\.sock|docker\.(sock|socket)",
            r"/proc/sys/(kernel|fs|net)/",
            r"/sys/(kernel|fs|class|devices)/",
        ),
    ),
    (
        "crypto_mining",
        (
            r"\b(xmrig|cpuminer|minerd|cgminer|bfgminer|ethminer|nbminer|t-rex|phoenixminer|lolminer|gminer|claymore)\b",
            r"stratum\+tcp://|stratum\+ssl://",
        ),
    ),
    (
        "filter_bypass",
        (
            r"""\bsed\b.*['"]/e\b""",
            r"\bsort\b.*--compress-program",
            r"\bgit\b.*(--upload-pack|--receive-pack|--exec)=",
            r"\b(rg|grep)\b.*--pre=",
            r"\bman\b.*--html=",
            r"\bhistory\b.*-[saw]\b",
            r"\$\{[^}]*@[PpEeAaKk]\}",
        ),
    ),
    (
        "network_recon",
        (
            r"\b(nmap|masscan|zmap|rustscan)\b",
            r"\b(ssh|scp|sftp)\b.*@",
            r"\b(chisel|frp|ngrok|cloudflared|bore|localtunnel)\b",
        ),
    ),
    (
        "package_install",
        (
            r"\bpip3?\s+install\b",
            r"\bnpm\s+install\b",
            r"\bnpm\s+i\b",
            r"\bapk\s+(add|del)\b",
            r"\bdoas\s+apk\b",
            r"\byarn\s+(add|global)\b",
            r"\bpnpm\s+(add|install)\b",
            r"\bpip3?\s+uninstall\b",
            r"\bnpm\s+uninstall\b",
            r"\bpython[23]?\b.*-m\s+pip\b",
        ),
    ),
    (
        "persistence",
        (
            r"\bcrontab\b",
            r">\s*~/?\.(bashrc|bash_profile|profile|zshrc)",
            r"\btee\b.*\.(bashrc|bash_profile|profile|zshrc)",
        ),
    ),
    (
        "process_control",
        (
            r"\bkill\s+-9\s",
            r"\b(killall|pkill)\b",
        ),
    ),
    (
        "env_dump",
        (
            r"^\s*env\s*\Z",  # RE2 `^\s*env\s*$`
            r"^\s*env\s*\|",
            r"^\s*env\s*>\s",
            r"\bprintenv\b",
            r"^\s*(set|export\s+-p|declare\s+-x)\s*(\Z|\|)",  # RE2 `…\s*($|\|)`
            r"\bcompgen\s+-e\b",
            r"/proc/[^/]+/environ",
            r"/proc/self/environ",
            r"(?i)\bstrings\b.*/proc/",
            r"(?i)\becho\b.*\$\{?GOCLAW_(GATEWAY_TOKEN|ENCRYPTION_KEY|POSTGRES_DSN)",
            r"(?i)\bprintf\b.*\$\{?GOCLAW_(GATEWAY_TOKEN|ENCRYPTION_KEY|POSTGRES_DSN)",
            r"\bpython[23]?\b.*os\.(environ|getenv).*GOCLAW_",
            r"\bnode\b.*-e.*process\.env\.GOCLAW_",
        ),
    ),
)

DENY_GROUP_NAMES: tuple[str, ...] = tuple(name for name, _ in _GROUPS)

# The human description each denial carries, so the model knows which kind of action was refused.
_GROUP_LABELS: dict[str, str] = {
    "destructive_ops": "destructive file or system operations",
    "data_exfiltration": "sending data out or piping downloads into a shell",
    "reverse_shell": "network shells and raw sockets",
    "code_injection": "evaluating dynamically built code",
    "privilege_escalation": "privilege escalation",
    "dangerous_paths": "permission changes on system or temporary paths",
    "env_injection": "injecting loader or shell start-up variables",
    "container_escape": "container escape paths",
    "crypto_mining": "crypto mining",
    "filter_bypass": "commands that smuggle execution through options",
    "network_recon": "network scanning, remote logins and tunnels",
    "package_install": "installing or removing packages",
    "persistence": "persistence (cron jobs, shell start-up files)",
    "process_control": "force-killing processes",
    "env_dump": "dumping the environment",
}

# Compiled once at import; a broken pattern fails loudly here rather than at a call.
_COMPILED: dict[str, tuple[re.Pattern[str], ...]] = {
    name: tuple(re.compile(pattern, re.ASCII) for pattern in patterns) for name, patterns in _GROUPS
}

# Upper bound on what is matched. RE2 runs in linear time; Python's backtracking engine does not, so
# patterns shaped ``\bnc\b.*X`` are run by :class:`_LinearPattern` below, and the input is bounded.
MAX_COMMAND_CHARS = 65_536


def _split_top_level_dotstar(source: str) -> tuple[int, list[str]]:
    """``(flags, parts)`` of a pattern ``P0.*P1.*…`` cut at its top-level ``.*``; one part when the
    pattern has a top-level alternation or no top-level ``.*`` (it is then run as it is)."""
    flags = 0
    if source.startswith("(?i)"):
        flags, source = re.IGNORECASE, source[4:]
    parts: list[str] = []
    depth, in_class, start, i = 0, False, 0, 0
    while i < len(source):
        ch = source[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if source.startswith(("[]", "[^]"), i):  # a literal "]" first in a class
                i += 2 if source[i + 1] == "]" else 3
                continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return flags, [source]
        elif source.startswith(".*", i) and depth == 0 and source[i + 2 : i + 3] not in {"?", "+"}:
            parts.append(source[start:i])
            start = i + 2
            i += 2
            continue
        i += 1
    parts.append(source[start:])
    return flags, parts


_PARAMETER_TRANSFORM = r"\$\{[^}]*@[PpEeAaKk]\}"
_TRANSFORM_OPERATORS = frozenset("PpEeAaKk")


def _parameter_transform_search(text: str) -> bool:
    r"""``re.search(r"\$\{[^}]*@[PpEeAaKk]\}", text)`` in linear time.

    ``[^}]*`` stops at the first ``}``, so a match is a ``${`` and the first ``}`` after it with
    ``@`` plus an operator letter right before that ``}``. Between two ``}`` only the first ``${``
    matters; checking each ``}``-delimited stretch once avoids rescanning from every ``${``."""
    previous = -1
    while True:
        close = text.find("}", previous + 1)
        if close < 0:
            return False
        opening = text.find("${", previous + 1, close)
        # The "@" must come after the "${" (at least two characters in: "${@P}" has it at +2).
        if (
            opening >= 0
            and close - opening >= 4
            and text[close - 2] == "@"
            and text[close - 1] in _TRANSFORM_OPERATORS
        ):
            return True
        previous = close


class _LinearPattern:
    """``pattern.search(text)`` for ``P0.*P1.*…Pn`` without the backtracking blow-up.

    A plain backtracking search tries every occurrence of ``P0`` and, from each, every end of ``.*``:
    quadratic (or worse) on a long line repeating ``P0``. But ``.`` never crosses a newline, so from a
    match of a part ending at ``e`` the next part may start anywhere in ``[e, end of e's line]``; an
    earlier end on the same line covers every later one. Trying only the first end per line and part
    gives the same answer as the full search (tests check this against plain ``re`` on the corpora and
    on random input) in near-linear time. The intermediate parts of the deny patterns end either at a
    fixed place or after whitespace that the following part cannot start with, which is what makes
    "first end" (greedy end) the dominating one."""

    def __init__(self, source: str) -> None:
        flags, parts = _split_top_level_dotstar(source)
        self.source = source
        self.parts = [re.compile(part, re.ASCII | flags) for part in parts]
        self.whole = re.compile(source, re.ASCII)

    def search(self, text: str) -> bool:
        if self.source == _PARAMETER_TRANSFORM:
            return _parameter_transform_search(text)
        if len(self.parts) == 1:
            return self.whole.search(text) is not None
        cache: dict[int, tuple[int, re.Match[str] | None]] = {}
        return self._from(text, 0, 0, len(text), cache)

    def _leftmost(
        self, index: int, text: str, lo: int, cache: dict[int, tuple[int, re.Match[str] | None]]
    ) -> re.Match[str] | None:
        """Leftmost match of part ``index`` starting at or after ``lo``; reuses the previous answer
        when it still applies (positions only grow), which keeps the whole search near-linear."""
        cached = cache.get(index)
        if cached is not None:
            cached_lo, match = cached
            if cached_lo <= lo and (match is None or match.start() >= lo):
                return match
        match = self.parts[index].search(text, lo)
        cache[index] = (lo, match)
        return match

    def _from(
        self, text: str, index: int, lo: int, hi: int, cache: dict[int, tuple[int, re.Match[str] | None]]
    ) -> bool:
        """Whether parts ``index…`` match with part ``index`` starting in ``[lo, hi]``."""
        last = index == len(self.parts) - 1
        tried_lines: set[int] = set()
        position = lo
        while position <= hi:
            match = self._leftmost(index, text, position, cache)
            if match is None or match.start() > hi:
                return False
            if last:
                return True
            end = match.end()
            line_end = text.find("\n", end)
            line_end = len(text) if line_end < 0 else line_end
            if line_end not in tried_lines:
                tried_lines.add(line_end)
                if self._from(text, index + 1, end, line_end, cache):
                    return True
            position = match.start() + 1
        return False


_LINEAR: dict[str, tuple[_LinearPattern, ...]] = {
    name: tuple(_LinearPattern(pattern) for pattern in patterns) for name, patterns in _GROUPS
}


@dataclass(frozen=True)
class Denial:
    """Why a command was refused: the deny group, the pattern that matched, and a message for the LLM."""

    group: str
    pattern: str
    message: str


def patterns_for(group: str) -> tuple[str, ...]:
    """The source patterns of a group (for documentation and tests)."""
    return tuple(p.pattern for p in _COMPILED[group])


def validate_overrides(overrides: object) -> dict[str, bool]:
    """Check a settings value ``{"group_name": bool}`` before it is saved.

    Returns the cleaned mapping; raises :class:`ValueError` naming every problem (unknown group names,
    non-boolean values, a value that is not an object)."""
    if not isinstance(overrides, Mapping):
        raise ValueError("deny_groups must be an object mapping group names to true (deny) or false (allow).")
    problems: list[str] = []
    cleaned: dict[str, bool] = {}
    for name, value in overrides.items():
        if name not in _COMPILED:
            problems.append(f"unknown deny group {name!r} (known: {', '.join(DENY_GROUP_NAMES)})")
        elif not isinstance(value, bool):
            problems.append(f"deny group {name!r} must be true or false, not {value!r}")
        else:
            cleaned[name] = value
    if problems:
        raise ValueError("; ".join(problems))
    return cleaned


def merge_overrides(tenant: Mapping[str, Any] | None, agent: Mapping[str, Any] | None) -> dict[str, Any]:
    """The effective overrides: the tenant's, with each of the agent's keys taking precedence."""
    return {**dict(tenant or {}), **dict(agent or {})}


def is_group_denied(group: str, overrides: Mapping[str, Any]) -> bool:
    """Whether ``group`` is denied. Denied unless it is a known group explicitly set to ``False``:
    unknown names, missing keys and non-boolean values all fail closed."""
    if group not in _COMPILED:
        return True
    return overrides.get(group, True) is not False


def _texts_to_match(command: str) -> list[str]:
    """The normalised command, its checking variants, and each simple command of the chain alone
    (source form and unquoted form), without duplicates and in a stable order."""
    seen: dict[str, None] = {}
    for variant, parsed in shell_parse.iter_all_commands(command):
        seen.setdefault(variant, None)
        for segment in parsed.segments:
            seen.setdefault(segment, None)
        for simple in parsed.commands:
            if simple.argv:
                seen.setdefault(" ".join(simple.argv), None)
    return list(seen)


def _message(group: str, pattern: str) -> str:
    return (
        f"command denied by safety policy: matches pattern {pattern} (deny group {group}: "
        f"{_GROUP_LABELS[group]}). Do not retry it in another form; use a different approach, or ask "
        f"an admin to allow the {group} group for this agent if the task really needs it."
    )


def check_command(command: str, overrides: Mapping[str, Any]) -> Denial | None:
    """The first denied group whose pattern matches ``command``, or None when the command may run.

    ``overrides`` is the effective ``{"group_name": bool}`` setting (agent over tenant); see
    :func:`is_group_denied` for how odd values are treated. A command with a NUL byte or one longer
    than :data:`MAX_COMMAND_CHARS` is refused as a whole (reported under the group ``invalid``)."""
    try:
        normalised = shell_parse.normalize(command)
    except shell_parse.NulByteError as error:
        return Denial("invalid", "", f"{error}.")
    if len(normalised) > MAX_COMMAND_CHARS:
        return Denial(
            "invalid",
            "",
            f"command is too long ({len(normalised)} characters; at most {MAX_COMMAND_CHARS}). "
            "Write long scripts to a file in the workspace and run the file.",
        )
    active = [name for name in DENY_GROUP_NAMES if is_group_denied(name, overrides)]
    if not active:
        return None
    texts = _texts_to_match(normalised)
    for name in active:
        for pattern in _LINEAR[name]:
            if any(pattern.search(text) for text in texts):
                return Denial(name, pattern.source, _message(name, pattern.source))
    return None


def denied_groups(command: str, overrides: Mapping[str, Any] | None = None) -> list[str]:
    """Every group (in order) with a pattern matching ``command``, for tests and diagnostics."""
    overrides = overrides or {}
    texts = _texts_to_match(shell_parse.normalize(command))
    return [
        name
        for name in DENY_GROUP_NAMES
        if is_group_denied(name, overrides) and any(p.search(t) for p in _LINEAR[name] for t in texts)
    ]
