"""Classification of shell commands for exec approvals (SPEC Part A "Exec approvals", B §6.2).

:func:`classify` reads a command line with :mod:`apps.runtime.shell_parse` (chains, pipes,
substitutions, backticks, and wrappers such as ``sh -c``, ``env``, ``nohup``, ``timeout``, ``xargs``,
``find -exec``, up to three levels deep) and describes **every** simple command it would run, so an
approval decision can never ride on the first word of a chain: ``ls && evil`` is the two commands
``ls`` and ``evil``; ``env sh -c evil`` is ``env sh -c evil``, ``sh -c evil`` and ``evil``. A wrapper
is a command in its own right (``env``, ``timeout``, ``xargs`` …) and is classified too.

For each simple command:

* **binary path**: where the program would be found. A name without ``/`` is looked up with
  :func:`shutil.which` on the call's ``PATH`` (the exec tool's sanitised environment); a name with
  ``/`` is resolved against the call's working directory. Either way symbolic links are resolved
  (:func:`os.path.realpath`), and only an existing executable file counts. A name that cannot be
  resolved (a missing program, a shell function or builtin, a word with ``$``, quotes or globs left in
  it) has no path: it can never match an allow-always rule and is never safe.
* **shape**: a normalised, whitespace-separated form keyed by the binary path, never by the
  basename alone::

      <binary path> [<subcommand>] [<flag> …] [*] [>]

  - ``<binary path>``: as above, or ``?<name>`` when unresolved;
  - ``<subcommand>``: for programs in :data:`SUBCOMMAND_PROGRAMS` (``git``, ``npm``, ``docker`` …)
    their first argument when it is a plain lower-case word (``git status`` → ``status``);
  - ``<flag>``: every option up to ``--``, sorted and without duplicates: a long option keeps its
    name and drops its value (``--output=x`` → ``--output=``); a cluster of short letters is split
    (``-rf`` → ``-f -r``); a short option with its value attached keeps the letter (``-n10`` →
    ``-n``); a bare number option becomes ``-N`` (``head -5``);
  - ``*``: present when the command has at least one positional argument (their values, and the
    values of options given as a separate word, are generalised away);
  - ``>``: present when the command has a redirection that writes.

  ``/usr/bin/git log --oneline -n 5`` has the shape ``/usr/bin/git log --oneline -n *``; ``sort -o f
  x`` (``/usr/bin/sort -o *``) and ``sort x`` (``/usr/bin/sort *``) differ, so a rule for one does not
  approve the other.
* **safe**: whether it is a read-only program of the hardened safe-bin list (:data:`SAFE_BINS`,
  B §6.2's list with everything that writes, executes or installs removed), found where the call's
  ``PATH`` finds that name (``./ls`` is a different binary with the same basename: not safe), used in
  no write form (:func:`_write_form`), and with no writing redirection. Interpreters, package
  managers, build tools, ``tee``, ``xargs``, ``awk`` and ``patch`` are never safe.

A command with a NUL byte, nesting deeper than the reader follows, or nothing to run is **invalid**:
callers deny it (fail closed).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

from apps.runtime import shell_parse

# Read-only programs (B §6.2's safe bins minus everything that can write, execute or install).
SAFE_BINS = frozenset(
    {
        "cat", "echo", "ls", "pwd", "head", "tail", "wc", "sort", "uniq", "grep", "find", "which",
        "whoami", "date", "uname", "hostname", "df", "du", "free", "uptime", "file", "stat", "dirname",
        "basename", "realpath", "jq", "yq", "sed", "tr", "cut", "diff", "git",
    }
)  # fmt: skip
# Programs whose first word is a subcommand that changes what they do.
SUBCOMMAND_PROGRAMS = frozenset(
    {
        "git", "npm", "npx", "pnpm", "yarn", "bun", "deno", "pip", "pip3", "go", "cargo", "docker",
        "podman", "kubectl", "helm", "apt", "apt-get", "apk", "brew", "systemctl", "gh", "make",
        "terraform", "poetry", "uv", "conda", "gem", "composer", "dotnet", "mvn", "gradle",
    }
)  # fmt: skip
# git subcommands that only read (and the options that make even them write or run programs).
GIT_READ_SUBCOMMANDS = frozenset(
    {"status", "log", "diff", "show", "branch", "rev-parse", "ls-files", "blame"}
)
_GIT_WRITE_OPTIONS = ("--output", "--ext-diff", "--textconv", "--exec", "--upload-pack", "--receive-pack")
_GIT_BRANCH_LIST_FLAGS = frozenset({"-a", "-r", "-v", "--all", "--remotes", "--list", "--show-current"})

_FIND_WRITE_ACTIONS = frozenset(
    {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9._-]*$")
_SHORT_CLUSTER = re.compile(r"^-[A-Za-z]+$")
_NUMBER_OPTION = re.compile(r"^-[0-9]+$")
# Left in a word after unquoting, these mean the shell would expand it: the program is not known.
_EXPANSION = re.compile(r"[$`*?\[\]{}~\\'\"]")
# The s/pattern/replacement/ part of a sed script (any delimiter); what is left are its commands and flags.
_SED_SUBSTITUTE = re.compile(r"s(.)(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1")


@dataclass(frozen=True)
class Classified:
    """One simple command of a command line."""

    argv: tuple[str, ...]
    text: str  # the command alone, as its words joined by spaces
    name: str  # the program's basename
    binary_path: str | None
    on_path: bool  # the program the call's PATH finds under its name (not ./name or /elsewhere/name)
    shape: str
    safe: bool
    writes: bool  # a redirection that writes
    depth: int  # wrapper levels looked through to find it


@dataclass(frozen=True)
class Classification:
    """Every simple command of a command line, or why it must be denied."""

    command: str
    commands: tuple[Classified, ...] = ()
    invalid: str = ""  # non-empty: deny the command with this reason


def resolve_binary(word: str, *, cwd: str, path_env: str) -> str | None:
    """The real path of the executable ``word`` names (see the module docstring), or None."""
    if not word or _EXPANSION.search(word):
        return None
    if "/" in word:
        candidate = os.path.join(cwd, word)
    else:
        found = shutil.which(word, path=path_env)
        if found is None:
            return None
        candidate = found
    real = os.path.realpath(candidate)
    if os.path.isfile(real) and os.access(real, os.X_OK):
        return real
    return None


def _flags_and_positionals(words: tuple[str, ...]) -> tuple[list[str], bool]:
    flags: set[str] = set()
    positional = False
    options_done = False
    for word in words:
        if options_done or word == "-" or not word.startswith("-"):
            positional = True
            continue
        if word == "--":
            options_done = True
        elif word.startswith("--"):
            flags.add(word.split("=", 1)[0] + ("=" if "=" in word else ""))
        elif _NUMBER_OPTION.match(word):
            flags.add("-N")
        elif _SHORT_CLUSTER.match(word):
            flags.update(f"-{letter}" for letter in word[1:])
        else:
            flags.add(word[:2])
    return sorted(flags), positional


def shape_of(argv: tuple[str, ...], binary_path: str | None, *, writes: bool) -> str:
    """The normalised shape of one simple command (see the module docstring)."""
    name = os.path.basename(argv[0]) if argv else ""
    parts = [binary_path or f"?{name}"]
    rest = argv[1:]
    if name in SUBCOMMAND_PROGRAMS and rest and _SUBCOMMAND.match(rest[0]):
        parts.append(rest[0])
        rest = rest[1:]
    flags, positional = _flags_and_positionals(rest)
    parts.extend(flags)
    if positional:
        parts.append("*")
    if writes:
        parts.append(">")
    return " ".join(parts)


def _sed_writes(args: tuple[str, ...]) -> bool:
    scripts: list[str] = []
    explicit = False
    i = 0
    while i < len(args):
        word = args[i]
        if word in {"-i", "--in-place"} or word.startswith(("--in-place", "-i")) or word.startswith("-s"):
            return True
        if word in {"-f", "--file"} or word.startswith("--file="):
            return True  # a script file: not readable from here
        if word in {"-e", "--expression"} and i + 1 < len(args):
            scripts.append(args[i + 1])
            explicit = True
            i += 2
            continue
        if word.startswith("--expression="):
            scripts.append(word.split("=", 1)[1])
            explicit = True
        elif word.startswith("--"):
            pass  # --quiet, --regexp-extended, --posix …
        elif word.startswith("-") and len(word) > 1:
            if "i" in word[1:] or "f" in word[1:] or "e" in word[1:]:
                return True  # -ni, -nf FILE, -ne SCRIPT: not worth untangling
        elif not explicit and not scripts:
            scripts.append(word)
        i += 1
    # Commands that write files (w, W), read them (r, R) or run programs (e), here or as an s flag.
    return any(re.search(r"[wWrRe]", _SED_SUBSTITUTE.sub("", script)) for script in scripts)


def _write_form(name: str, args: tuple[str, ...]) -> bool:
    """Whether a safe-bin program is used in a form that writes, executes or reaches further."""
    flags, positional = _flags_and_positionals(args)
    flag_set = set(flags)
    if name == "sort":
        return bool(flag_set & {"-o", "--output=", "--output", "--compress-program=", "--compress-program"})
    if name == "sed":
        return _sed_writes(args)
    if name == "find":
        return any(word in _FIND_WRITE_ACTIONS for word in args)
    if name == "grep":
        return bool(
            flag_set & {"-r", "-R", "--recursive", "--dereference-recursive", "--pre=", "--pre", "--devices="}
        )
    if name == "uniq":
        return sum(1 for word in args if not word.startswith("-") or word == "-") > 1  # uniq IN OUT
    if name == "date":
        return bool(flag_set & {"-s", "--set=", "--set"})
    if name == "hostname":
        return positional or bool(flag_set & {"-F", "--file=", "--file", "-b", "--boot"})
    if name == "yq":
        return bool(flag_set & {"-i", "--inplace"})
    if name == "git":
        return _git_writes(args)
    return False


def _git_writes(args: tuple[str, ...]) -> bool:
    if not args or not _SUBCOMMAND.match(args[0]) or args[0] not in GIT_READ_SUBCOMMANDS:
        return True  # global options before the subcommand (-c, -C, --exec-path=…) or a write subcommand
    rest = args[1:]
    if any(word.startswith(_GIT_WRITE_OPTIONS) for word in rest):
        return True
    if args[0] == "branch":
        flags, positional = _flags_and_positionals(rest)
        return positional or not set(flags) <= _GIT_BRANCH_LIST_FLAGS
    return False


def _classify_one(simple: shell_parse.SimpleCommand, *, cwd: str, path_env: str) -> Classified:
    argv = simple.argv
    writes = any(redirect.writes for redirect in simple.redirects)
    name = simple.name
    binary_path = resolve_binary(argv[0], cwd=cwd, path_env=path_env) if argv else None
    on_path = binary_path is not None and resolve_binary(name, cwd=cwd, path_env=path_env) == binary_path
    safe = on_path and name in SAFE_BINS and not writes and not _write_form(name, argv[1:])
    return Classified(
        argv=argv,
        text=" ".join(argv),
        name=name,
        binary_path=binary_path,
        on_path=on_path,
        shape=shape_of(argv, binary_path, writes=writes),
        safe=safe,
        writes=writes,
        depth=simple.depth,
    )


def classify(command: str, *, cwd: str, path_env: str) -> Classification:
    """Every simple command ``command`` would run, classified (see the module docstring).

    All checking variants of the command (look-alike letters folded, ``$IFS`` expanded) are read, so a
    disguised program is classified under the name it imitates as well."""
    try:
        normalised = shell_parse.normalize(command)
    except shell_parse.NulByteError as error:
        return Classification(command=command, invalid=f"{error}")
    found: dict[tuple[tuple[str, ...], int, tuple[shell_parse.Redirect, ...]], shell_parse.SimpleCommand] = {}
    for _variant, parsed in shell_parse.iter_all_commands(normalised):
        if parsed.too_deep:
            return Classification(
                command=normalised,
                invalid="command nests wrappers or substitutions deeper than "
                f"{shell_parse.MAX_WRAPPER_DEPTH} levels; it cannot be checked",
            )
        for simple in parsed.commands:
            found.setdefault((simple.argv, simple.depth, simple.redirects), simple)
    commands = tuple(
        _classify_one(simple, cwd=cwd, path_env=path_env) for simple in found.values() if simple.argv
    )
    if not commands:
        return Classification(command=normalised, invalid="command runs no program")
    return Classification(command=normalised, commands=commands)
