"""Classification of shell commands for exec approvals (SPEC Part A "Exec approvals", B §6.2).

:func:`classify` reads a command line with :mod:`apps.toolkit.shell_parse` (chains, pipes,
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

      <binary path> [<subcommand>] [<flag> …] [<NAME>= …] [*] [>]

  - ``<binary path>``: as above, or ``?<name>`` when unresolved;
  - ``<subcommand>``: for programs in :data:`SUBCOMMAND_PROGRAMS` (``git``, ``npm``, ``docker`` …)
    their first argument when it is a plain lower-case word (``git status`` → ``status``);
  - ``<flag>``: every option up to ``--``, sorted and without duplicates: a long option keeps its
    name and drops its value (``--output=x`` → ``--output=``); a cluster of short letters is split
    (``-rf`` → ``-f -r``); a short option with its value attached keeps the letter (``-n10`` →
    ``-n``); a bare number option becomes ``-N`` (``head -5``);
  - ``<NAME>=``: the name of every variable assigned before the program (``TZ=UTC date`` →
    ``TZ=``), sorted, so an approved ``ls`` does not approve ``LD_PRELOAD=x ls``;
  - ``*``: present when the command has at least one positional argument (their values, and the
    values of options given as a separate word, are generalised away);
  - ``>``: present when the command has a redirection that writes.

  ``/usr/bin/git log --oneline -n 5`` has the shape ``/usr/bin/git log --oneline -n *``; ``sort -o f
  x`` (``/usr/bin/sort -o *``) and ``sort x`` (``/usr/bin/sort *``) differ, so a rule for one does not
  approve the other.
* **safe**: whether it is a read-only program of the hardened safe-bin list
  (:data:`apps.policy.safe_bins.SAFE_BINS`: B §6.2's list with everything that writes, executes or
  installs removed, ``git`` included), found where the call's ``PATH`` finds that name (``./ls`` is a
  different binary with the same basename: not safe), used in none of the forms
  :func:`apps.policy.safe_bins.refused_form` refuses (options read as ``getopt_long`` reads them,
  abbreviations included: ``sort --out=f`` is ``sort --output=f``), with no writing redirection and no
  variable assignment outside :data:`apps.policy.safe_bins.HARMLESS_VARIABLES`. ``why_not_safe``
  says which of these failed. A statement made only of assignments (``PATH=.; ls``) changes what the
  rest of the line runs: it is listed as a command of its own (no program, never safe) unless every
  name it sets is harmless. The module docstring of :mod:`apps.policy.safe_bins` has the table of
  every safe program, the forms refused and why.

A command with a NUL byte, nesting deeper than the reader follows, or nothing to run is **invalid**:
callers deny it (fail closed).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

from apps.policy.safe_bins import SAFE_BINS, harmful_assignments, refused_form
from apps.toolkit import shell_parse

# Programs whose first word is a subcommand that changes what they do.
SUBCOMMAND_PROGRAMS = frozenset(
    {
        "git", "npm", "npx", "pnpm", "yarn", "bun", "deno", "pip", "pip3", "go", "cargo", "docker",
        "podman", "kubectl", "helm", "apt", "apt-get", "apk", "brew", "systemctl", "gh", "make",
        "terraform", "poetry", "uv", "conda", "gem", "composer", "dotnet", "mvn", "gradle",
    }
)  # fmt: skip
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9._-]*$")
_SHORT_CLUSTER = re.compile(r"^-[A-Za-z]+$")
_NUMBER_OPTION = re.compile(r"^-[0-9]+$")
# Left in a word after unquoting, these mean the shell would expand it: the program is not known.
_EXPANSION = re.compile(r"[$`*?\[\]{}~\\'\"]")


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
    assignments: tuple[str, ...] = ()  # NAME=value words written before the program
    why_not_safe: str = ""  # for a program of the safe list (or assignments) that is not safe: why


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


def shape_of(
    argv: tuple[str, ...], binary_path: str | None, *, writes: bool, assignments: tuple[str, ...] = ()
) -> str:
    """The normalised shape of one simple command (see the module docstring)."""
    name = os.path.basename(argv[0]) if argv else ""
    parts = [binary_path or f"?{name}"]
    rest = argv[1:]
    if name in SUBCOMMAND_PROGRAMS and rest and _SUBCOMMAND.match(rest[0]):
        parts.append(rest[0])
        rest = rest[1:]
    flags, positional = _flags_and_positionals(rest)
    parts.extend(flags)
    parts.extend(sorted({assignment.split("=", 1)[0] + "=" for assignment in assignments}))
    if positional:
        parts.append("*")
    if writes:
        parts.append(">")
    return " ".join(parts)


def _why_not_safe(simple: shell_parse.SimpleCommand, *, on_path: bool, writes: bool) -> str:
    name = simple.name
    if not simple.argv:
        return "assigns variables that change what the following commands run"
    if name not in SAFE_BINS:
        return "not a read-only program of the safe list"
    if not on_path:
        return f"not the {name} the call's PATH finds"
    if writes:
        return "redirects output to a file"
    harmful = harmful_assignments(simple.assignments)
    if harmful:
        return f"runs with the variable {harmful[0].split('=', 1)[0]} set"
    return refused_form(name, simple.argv[1:], simple.expandable)


def _classify_one(simple: shell_parse.SimpleCommand, *, cwd: str, path_env: str) -> Classified:
    argv = simple.argv
    writes = any(redirect.writes for redirect in simple.redirects)
    name = simple.name
    binary_path = resolve_binary(argv[0], cwd=cwd, path_env=path_env) if argv else None
    on_path = binary_path is not None and resolve_binary(name, cwd=cwd, path_env=path_env) == binary_path
    why_not_safe = _why_not_safe(simple, on_path=on_path, writes=writes)
    return Classified(
        argv=argv,
        text=" ".join((*simple.assignments, *argv)),
        name=name,
        binary_path=binary_path,
        on_path=on_path,
        shape=shape_of(argv, binary_path, writes=writes, assignments=simple.assignments),
        safe=not why_not_safe,
        writes=writes,
        depth=simple.depth,
        assignments=simple.assignments,
        why_not_safe=why_not_safe,
    )


def classify(command: str, *, cwd: str, path_env: str) -> Classification:
    """Every simple command ``command`` would run, classified (see the module docstring).

    All checking variants of the command (look-alike letters folded, ``$IFS`` expanded) are read, so a
    disguised program is classified under the name it imitates as well."""
    try:
        normalised = shell_parse.normalize(command)
    except shell_parse.NulByteError as error:
        return Classification(command=command, invalid=f"{error}")
    found: dict[
        tuple[tuple[str, ...], int, tuple[shell_parse.Redirect, ...], tuple[str, ...]],
        shell_parse.SimpleCommand,
    ] = {}
    for _variant, parsed in shell_parse.iter_all_commands(normalised):
        if parsed.too_deep:
            return Classification(
                command=normalised,
                invalid="command nests wrappers or substitutions deeper than "
                f"{shell_parse.MAX_WRAPPER_DEPTH} levels; it cannot be checked",
            )
        for simple in parsed.commands:
            found.setdefault((simple.argv, simple.depth, simple.redirects, simple.assignments), simple)
    commands = tuple(
        _classify_one(simple, cwd=cwd, path_env=path_env)
        for simple in found.values()
        # A statement of assignments alone matters only when it sets something not harmless.
        if simple.argv or harmful_assignments(simple.assignments)
    )
    if not commands:
        return Classification(command=normalised, invalid="command runs no program")
    return Classification(command=normalised, commands=commands)
