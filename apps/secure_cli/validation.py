"""Validation of what an administrator registers for a credentialed CLI. Each function returns a
message for one field, or "" when the value is acceptable. Everything is bounded: an agent's every
``exec`` call runs these patterns, and their environment reaches a process."""

from __future__ import annotations

import os
import re
from typing import Any

import regex

from apps.toolkit import shell_parse
from apps.toolkit.processes import ENV_STRIP_NAMES, ENV_STRIP_PREFIXES

BINARY_NAME_RE = re.compile(r"\A[a-z0-9][a-z0-9._+-]{0,63}\Z")
ENV_NAME_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
MAX_PATTERNS = 50
MAX_PATTERN_CHARS = 500
MAX_ENV_VARS = 50
MAX_ENV_VALUE_CHARS = 16 * 1024
MAX_TIPS_CHARS = 4000
MAX_DESCRIPTION_CHARS = 2000
MAX_PATH_CHARS = 1024
MIN_TIMEOUT, MAX_TIMEOUT = 1, 3600
MAX_USER_ID = 255

# Names that are never a credentialed CLI: shells and the wrappers the gate looks through would hand
# their arguments to a shell or another program, and the runtime's own variables are not credentials.
RESERVED_BINARIES = frozenset(
    {
        *shell_parse.SHELLS, "env", "nohup", "stdbuf", "timeout", "nice", "ionice", "xargs", "eval",
        "exec", "command", "builtin", "busybox", "sudo", "doas", "su", "script", "flock", "setsid",
        "chroot", "unshare", "nsenter", "time", "watch", "strace", "ltrace", "find",
    }
)  # fmt: skip
RESERVED_ENV_NAMES = frozenset({"PATH", "HOME", "USER", "LANG", "LC_ALL", "SHELL", "PWD", "TMPDIR"})


def binary_name_error(value: Any) -> str:
    if not isinstance(value, str) or not BINARY_NAME_RE.match(value):
        return (
            "1 to 64 characters: lower-case letters, digits and . _ + - (not first); the program's "
            "base name, as agents type it (gh, aws, kubectl)."
        )
    if value in RESERVED_BINARIES:
        return f"{value!r} is a shell or a wrapper that runs other programs; it cannot be a credentialed CLI."
    return ""


def binary_path_error(value: Any, binary_name: str) -> str:
    """An empty path (found on the safe PATH), or an absolute path to an executable file whose base
    name is the binary's name (B §5.3 path verification, checked again at every run)."""
    if not isinstance(value, str):
        return "a string: an absolute path, or empty to find the binary on the PATH."
    if value == "":
        return ""
    if len(value) > MAX_PATH_CHARS or "\x00" in value:
        return f"at most {MAX_PATH_CHARS} characters, no NUL."
    if not os.path.isabs(value):
        return "an absolute path (/usr/bin/gh), or empty to find the binary on the PATH."
    if os.path.basename(value).lower() != binary_name:
        return f"the file's base name must be the binary's name {binary_name!r}."
    if not (os.path.isfile(value) and os.access(value, os.X_OK)):
        return "no executable file at this path on the server."
    return ""


def pattern_list_error(value: Any, *, nullable: bool = False) -> str:
    if value is None and nullable:
        return ""
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        return "a list of regular expressions (strings)" + (", or null." if nullable else ".")
    if len(value) > MAX_PATTERNS:
        return f"at most {MAX_PATTERNS} patterns."
    for pattern in value:
        if not pattern or len(pattern) > MAX_PATTERN_CHARS:
            return f"each pattern 1 to {MAX_PATTERN_CHARS} characters."
        try:
            regex.compile(pattern)  # the engine the patterns run with (apps.secure_cli.execution)
        except regex.error as exc:
            return f"{pattern!r} is not a valid regular expression: {exc}."
    return ""


def env_error(value: Any) -> str:
    """Names to string values: credentials only, never a variable that changes how programs load or
    where they look (LD_*, PATH, HOME …)."""
    if not isinstance(value, dict):
        return "an object of variable names to string values."
    if len(value) > MAX_ENV_VARS:
        return f"at most {MAX_ENV_VARS} variables."
    for name, item in value.items():
        if not ENV_NAME_RE.match(name):
            return f"{name[:64]!r} is not a variable name (letters, digits, _; not starting with a digit)."
        if name in ENV_STRIP_NAMES or name.startswith(ENV_STRIP_PREFIXES) or name in RESERVED_ENV_NAMES:
            return f"{name} cannot be set: it changes how programs are loaded or run, not a credential."
        if not isinstance(item, str):
            return f"{name}: the value must be a string."
        if len(item) > MAX_ENV_VALUE_CHARS or "\x00" in item:
            return f"{name}: at most {MAX_ENV_VALUE_CHARS} characters, no NUL."
    return ""


def timeout_error(value: Any, *, nullable: bool = False) -> str:
    if value is None and nullable:
        return ""
    if not isinstance(value, int) or isinstance(value, bool) or not MIN_TIMEOUT <= value <= MAX_TIMEOUT:
        return f"whole seconds from {MIN_TIMEOUT} to {MAX_TIMEOUT}" + (", or null." if nullable else ".")
    return ""


def text_error(value: Any, limit: int, *, nullable: bool = False) -> str:
    if value is None and nullable:
        return ""
    if not isinstance(value, str) or len(value) > limit:
        return f"text of at most {limit} characters" + (", or null." if nullable else ".")
    return ""


def flag_error(value: Any) -> str:
    return "" if isinstance(value, bool) else "true or false."


def user_id_error(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_USER_ID:
        return f"1 to {MAX_USER_ID} characters."
    if value == "system":
        return "'system' is no user: calls without a user never use per-user credentials."
    return ""
