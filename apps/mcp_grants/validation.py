"""Validation of an MCP server's registration (B §3.3, SPEC Part A "MCP").

stdio servers: the command is one of a short list of interpreters and package runners (a bare name, or
an absolute path ending in one); command and args hold no shell metacharacters, no ``..`` and no line
breaks, and no argument makes the interpreter run code given inline (``-e``, ``--eval``, ``-c`` …);
``env:NAME`` values may only reference a few harmless variables of Toolgate's own environment, and no env
name may be one that makes the loader, a shell or an interpreter load or run code of its choosing
(``LD_PRELOAD``, ``NODE_OPTIONS``, ``PYTHONPATH``, ``BASH_FUNC_*``, ``GIT_CONFIG_*`` …:
:func:`env_name_refusal`).
sse / streamable-http servers: the URL passes the SSRF guard (http/https, public addresses, no
metadata hosts; a name is resolved and every answer checked, and again on every connection).
Every field is bounded.

:func:`check_server` returns ``{field: [messages]}`` (empty when valid), so a caller can report every
problem at once.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from typing import Any

import httpx

from apps.toolkit.processes import ENV_STRIP_NAMES, ENV_STRIP_PREFIXES
from apps.toolkit.ssrf import AddressPolicy, SSRFBlocked

ALLOWED_COMMANDS = frozenset(
    {
        "node",
        "npx",
        "npm",
        "python",
        "python2",
        "python3",
        "ruby",
        "go",
        "cargo",
        "java",
        "dotnet",
        "php",
        "uvx",
        "uv",
        "pipx",
        "deno",
        "bun",
    }
)
METACHARACTERS = re.compile(r"[;|&$`(){}\[\]<>]")
LINE_BREAKS = re.compile(r"[\r\n\x00\u2028\u2029\x85]")
DANGEROUS_FLAGS = frozenset({"--eval", "-e", "-c", "--require", "-r", "--import"})
DANGEROUS_FRAGMENTS = ("exec(", "eval(", "__import__", "child_process", "subprocess")
ENV_REFERENCES = frozenset(
    {
        "HOME",
        "USER",
        "PATH",
        "SHELL",
        "LANG",
        "LC_ALL",
        "TZ",
        "TERM",
        "NODE_ENV",
        "ENVIRONMENT",
        "LOG_LEVEL",
        "DEBUG",
    }
)
ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]{0,127}\Z")

# Env names a stdio server may not be given, with why: each makes the dynamic loader, a shell, an
# interpreter or a tool the server starts load or run code (or read a configuration) of the
# registrant's choosing, whatever the command and its arguments say. Matched without regard to case.
# The exec tool's strip list (apps.runtime.tools.exec) is refused too; names it has that no family
# below claims get the generic reason.
LOADER = "makes the dynamic loader load a library of its choosing into the server's processes"
SHELL = "changes what a shell started by the server runs"
INTERPRETER = "makes an interpreter load or run code of its choosing (options, start-up files, module paths)"
GIT = "makes git run programs or read a configuration of its choosing"
BUILD = "makes a package runner or compiler run a program of its choosing"
RESOLVER = "redirects the server's host name lookups"
REFUSED_ENV_PREFIXES: tuple[tuple[str, str], ...] = (
    *((prefix, LOADER) for prefix in ENV_STRIP_PREFIXES if prefix != "BASH_FUNC_"),
    ("BASH_FUNC_", SHELL),
    ("GIT_CONFIG", GIT),
    ("NPM_CONFIG_", BUILD),
    ("CORECLR_", INTERPRETER),
    ("COR_", INTERPRETER),
)
REFUSED_ENV_NAMES: dict[str, str] = {
    **{name: "is an interpreter or loader injection variable" for name in ENV_STRIP_NAMES},
    **dict.fromkeys(
        ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "GCONV_PATH", "GETCONF_DIR"),
        LOADER,
    ),
    **dict.fromkeys(
        ("BASH_ENV", "ENV", "IFS", "CDPATH", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE", "PS4"),
        SHELL,
    ),
    **dict.fromkeys(("ZDOTDIR",), SHELL),
    **dict.fromkeys(
        (
            "NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE", "PYTHONPATH", "PYTHONSTARTUP",
            "PYTHONHOME", "PYTHONINSPECT", "PYTHONUSERBASE", "PYTHONEXECUTABLE", "PYTHONBREAKPOINT",
            "PYTHONWARNINGS", "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB",
            "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "PHPRC",
            "PHP_INI_SCAN_DIR", "DOTNET_STARTUP_HOOKS", "DOTNET_ADDITIONAL_DEPS", "BUN_OPTIONS",
        ),
        INTERPRETER,
    ),
    **dict.fromkeys(
        (
            "GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_PROXY_COMMAND",
            "GIT_EXTERNAL_DIFF", "GIT_TEMPLATE_DIR", "GIT_DIR", "GIT_WORK_TREE",
        ),
        GIT,
    ),
    **dict.fromkeys(
        (
            "GOFLAGS", "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "CARGO_BUILD_RUSTC",
            "CARGO_BUILD_RUSTC_WRAPPER", "UV_PYTHON", "PIPX_DEFAULT_PYTHON",
        ),
        BUILD,
    ),
    **dict.fromkeys(("HOSTALIASES", "RESOLV_HOST_CONF", "LOCALDOMAIN"), RESOLVER),
}  # fmt: skip


def env_name_refusal(name: str, value: Any = None) -> str | None:
    """Why ``name`` may not be set in a stdio server's env, or None when it may. ``PATH`` may only
    reference Toolgate's own (``env:PATH``): any other value decides which program runs as the
    command."""
    upper = name.upper()
    if upper == "PATH":
        if value == "env:PATH":
            return None
        return "decides which program runs for the command (only env:PATH, Toolgate's own, is allowed)"
    if upper in REFUSED_ENV_NAMES:
        return REFUSED_ENV_NAMES[upper]
    for prefix, reason in REFUSED_ENV_PREFIXES:
        if upper.startswith(prefix):
            return reason
    return None


HEADER_NAME = re.compile(r"\A[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}\Z")
TOOL_PREFIX = re.compile(r"\A[a-z0-9]+(?:_[a-z0-9]+)*\Z")

MAX_COMMAND = 1024
MAX_ARGS = 64
MAX_ARG = 4096
MAX_ENTRIES = 64
MAX_VALUE = 8192
MAX_URL = 2048
MAX_API_KEY = 8192
MAX_DISPLAY_NAME = 255
MAX_TOOL_PREFIX = 50
MAX_TIMEOUT = 600
MAX_SETTINGS_BYTES = 16384

Errors = dict[str, list[str]]


def command_error(command: Any) -> str | None:
    if not isinstance(command, str) or not command:
        return "a stdio server needs a command."
    if len(command) > MAX_COMMAND:
        return f"at most {MAX_COMMAND} characters."
    if LINE_BREAKS.search(command):
        return "line breaks are not allowed."
    if METACHARACTERS.search(command):
        return "shell metacharacters ;|&$`(){}[]<> are not allowed."
    if ".." in command:
        return "'..' is not allowed."
    if any(c.isspace() for c in command):
        return "the command is one program; put its arguments in args."
    if "/" in command and not command.startswith("/"):
        return "a bare program name or an absolute path."
    base = posixpath.basename(command)
    if base not in ALLOWED_COMMANDS:
        allowed = ", ".join(sorted(ALLOWED_COMMANDS))
        return f"{base!r} is not an allowed command (allowed: {allowed})."
    return None


def arg_error(arg: Any) -> str | None:
    if not isinstance(arg, str):
        return "every argument is a string."
    if len(arg) > MAX_ARG:
        return f"an argument has at most {MAX_ARG} characters."
    if LINE_BREAKS.search(arg):
        return "line breaks are not allowed."
    if METACHARACTERS.search(arg):
        return "shell metacharacters ;|&$`(){}[]<> are not allowed."
    if ".." in arg:
        return "'..' is not allowed."
    flag = arg.split("=", 1)[0]
    if flag in DANGEROUS_FLAGS:
        return f"{flag!r} runs inline code and is not allowed."
    lowered = arg.lower()
    for fragment in DANGEROUS_FRAGMENTS:
        if fragment in lowered:
            return f"{fragment!r} is not allowed in an argument."
    return None


def args_errors(args: Any) -> list[str]:
    if not isinstance(args, list):
        return ["a list of strings."]
    if len(args) > MAX_ARGS:
        return [f"at most {MAX_ARGS} arguments."]
    errors = []
    for i, arg in enumerate(args):
        error = arg_error(arg)
        if error:
            errors.append(f"[{i}]: {error}")
    return errors


def env_errors(env: Any) -> list[str]:
    if not isinstance(env, Mapping):
        return ["an object of variable names to string values."]
    if len(env) > MAX_ENTRIES:
        return [f"at most {MAX_ENTRIES} variables."]
    errors = []
    for name, value in env.items():
        if not isinstance(name, str) or not ENV_NAME.match(name):
            errors.append(
                f"{str(name)[:64]!r}: a variable name is letters, digits and '_', not starting with a digit."
            )
            continue
        refusal = env_name_refusal(name, value)
        if refusal is not None:
            errors.append(f"{name} is not allowed: it {refusal}.")
            continue
        if not isinstance(value, str):
            errors.append(f"{name}: the value is a string.")
        elif len(value) > MAX_VALUE:
            errors.append(f"{name}: at most {MAX_VALUE} characters.")
        elif "\x00" in value:
            errors.append(f"{name}: NUL characters are not allowed.")
        elif value.startswith("env:") and value[4:] not in ENV_REFERENCES:
            allowed = ", ".join(sorted(ENV_REFERENCES))
            errors.append(f"{name}: env:{value[4:64]} may not be referenced (allowed: {allowed}).")
    return errors


def headers_errors(headers: Any) -> list[str]:
    if not isinstance(headers, Mapping):
        return ["an object of header names to string values."]
    if len(headers) > MAX_ENTRIES:
        return [f"at most {MAX_ENTRIES} headers."]
    errors = []
    for name, value in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.match(name):
            errors.append(f"{str(name)[:64]!r}: not a valid header name.")
        elif not isinstance(value, str):
            errors.append(f"{name}: the value is a string.")
        elif len(value) > MAX_VALUE:
            errors.append(f"{name}: at most {MAX_VALUE} characters.")
        elif LINE_BREAKS.search(value):
            errors.append(f"{name}: line breaks are not allowed.")
    return errors


def url_error(url: Any, policy: AddressPolicy | None = None) -> str | None:
    if not isinstance(url, str) or not url:
        return "an sse or streamable-http server needs a URL."
    if len(url) > MAX_URL:
        return f"at most {MAX_URL} characters."
    if LINE_BREAKS.search(url) or any(c.isspace() for c in url):
        return "whitespace and line breaks are not allowed."
    policy = policy or AddressPolicy.from_settings()
    try:
        parsed = policy.check_url(url)
        # A name is resolved now too, for a clear answer at registration; a name that does not resolve
        # yet is accepted (every connection resolves and checks it again).
        policy.resolve(parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80))
    except SSRFBlocked as exc:
        return str(exc)
    except httpx.ConnectError:
        return None
    return None


def check_server(fields: Mapping[str, Any], *, policy: AddressPolicy | None = None) -> Errors:
    """Problems of a complete registration (the fields of ``MCPServer`` after an update is applied),
    keyed by field."""
    errors: Errors = {}

    def add(field: str, message: str | None) -> None:
        if message:
            errors.setdefault(field, []).append(message)

    transport = fields.get("transport")
    if transport not in ("stdio", "sse", "streamable-http"):
        add("transport", "one of stdio, sse, streamable-http.")
    elif transport == "stdio":
        add("command", command_error(fields.get("command")))
        for message in args_errors(fields.get("args", [])):
            add("args", message)
        for message in env_errors(fields.get("env", {})):
            add("env", message)
        if fields.get("url"):
            add("url", "a stdio server has no URL.")
    else:
        add("url", url_error(fields.get("url"), policy))
        if fields.get("command"):
            add("command", f"a {transport} server has no command.")
        if fields.get("args"):
            add("args", f"a {transport} server has no args.")
        if fields.get("env"):
            add("env", f"a {transport} server has no env.")
    for message in headers_errors(fields.get("headers", {})):
        add("headers", message)
    display_name = fields.get("display_name", "")
    if not isinstance(display_name, str) or len(display_name) > MAX_DISPLAY_NAME:
        add("display_name", f"a string of at most {MAX_DISPLAY_NAME} characters.")
    prefix = fields.get("tool_prefix", "")
    if not isinstance(prefix, str) or (
        prefix and (len(prefix) > MAX_TOOL_PREFIX or not TOOL_PREFIX.match(prefix))
    ):
        add(
            "tool_prefix",
            f"at most {MAX_TOOL_PREFIX} characters: lower-case letters and digits joined by single '_'.",
        )
    api_key = fields.get("api_key", "")
    if not isinstance(api_key, str) or len(api_key) > MAX_API_KEY or LINE_BREAKS.search(api_key):
        add("api_key", f"a single-line string of at most {MAX_API_KEY} characters.")
    timeout = fields.get("timeout_sec", 60)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= MAX_TIMEOUT:
        add("timeout_sec", f"a whole number of seconds from 1 to {MAX_TIMEOUT}.")
    settings = fields.get("settings", {})
    if not isinstance(settings, dict):
        add("settings", "an object.")
    elif len(json.dumps(settings)) > MAX_SETTINGS_BYTES:
        add("settings", f"at most {MAX_SETTINGS_BYTES} bytes of JSON.")
    if not isinstance(fields.get("enabled", True), bool):
        add("enabled", "true or false.")
    return errors


MAX_TOOL_LIST = 1000
MAX_TOOL_NAME = 255


def tool_list_error(value: Any, *, nullable: bool) -> str | None:
    """A grant's ``tool_allow`` (null: every tool) or ``tool_deny``: original tool names."""
    if value is None:
        return None if nullable else "a list of tool names."
    if not isinstance(value, list):
        return "a list of tool names" + (" or null (every tool)." if nullable else ".")
    if len(value) > MAX_TOOL_LIST:
        return f"at most {MAX_TOOL_LIST} tool names."
    for item in value:
        if not isinstance(item, str) or not item or len(item) > MAX_TOOL_NAME or LINE_BREAKS.search(item):
            return f"every tool name is a single-line string of 1 to {MAX_TOOL_NAME} characters."
    return None
