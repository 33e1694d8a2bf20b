"""The unconditional safeguard (seed 003, "Layer 1"): hard limits no setting, policy or approval lifts.

Two checks:

* :func:`check_shell` for the exec tool: privilege escalation (``sudo``, ``su`` … as the program that
  runs, in every position of a chain and behind wrappers, but not the *word* in ``grep -r sudo``),
  ``rm -rf /`` in all its variants (``--no-preserve-root`` included), ``dd of=/dev/…`` and every other
  write to ``/dev`` except ``/dev/null``, ``/dev/stdout`` and ``/dev/stderr``, disk formatting tools,
  fork bombs, ``rm``/``chmod``/``chown`` on protected system directories, shell writes to the paths
  :func:`check_write` protects, and any mention of Toolgate's own data directory.
* :func:`check_write` for every tool that writes files: the Linux system paths of seed 003, the
  cross-platform credential paths (``.ssh``, ``.gnupg``, ``.aws/credentials``, ``.kube/config``,
  ``.docker/config.json``) and ``settings.DATA_DIR`` (database, secret key, encryption key), checked on
  the path as written *and* with symlinks resolved, so a link cannot point a write somewhere protected.

Both return a message for the LLM, or None. Commands are read with :mod:`apps.toolkit.shell_parse`, which
sees through ``;``, ``&&``, ``||``, pipes, ``&``, newlines, ``$(…)``, backticks, quoting tricks and
wrappers (``env``, ``nohup``, ``timeout``, ``sh -c`` …) up to three levels; deeper nesting is refused
because what it runs cannot be seen.

This is a static check of text. It stops the mistakes and the obvious attacks; what a program does once
running (a script file, a symlink made by the same command) is the sandbox's and the OS user's job.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from apps.toolkit import shell_parse

# Seed 003, Linux. /lib* are listed because on systems without the merged /usr they are real
# directories (with it they are symlinks into /usr, which resolving covers anyway).
PROTECTED_SYSTEM_PATHS: tuple[str, ...] = (
    "/bin",
    "/sbin",
    "/usr",
    "/boot",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/root",
    "/var/lib/dpkg",
    "/var/lib/rpm",
    "/var/lib/apt",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
)
# Seed 003, cross-platform: any path containing one of these component sequences.
SENSITIVE_COMPONENTS: tuple[tuple[str, ...], ...] = (
    (".ssh",),
    (".gnupg",),
    (".aws", "credentials"),
    (".kube", "config"),
    (".docker", "config.json"),
)
# The only /dev targets a command may write to.
DEVICE_WRITE_ALLOWED = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})

_PRIVILEGE_PROGRAMS = frozenset({"sudo", "sudoedit", "su", "doas", "pkexec", "run0"})
_DISK_TOOLS = re.compile(
    r"(mkfs(\..+)?|mke2fs|mkdosfs|mkntfs|mkexfatfs|mkswap|fdisk|gdisk|parted|sfdisk|cfdisk|wipefs|sgdisk"
    r"|partprobe|format|diskpart)"
)
_DISKUTIL_VERBS = re.compile(r"(erasedisk|erasevolume|partitiondisk|secureerase|zerodisk|randomdisk)", re.I)
# Programs that delete or re-permission their operands; on a protected directory they are blocked.
_PATH_MUTATORS = frozenset(
    {"rm", "rmdir", "unlink", "shred", "chmod", "chown", "chgrp", "chattr", "truncate"}
)
# Programs whose operands (all, or only the last) are files they write.
_WRITES_ALL_OPERANDS = frozenset({"tee", "shred", "truncate", "blkdiscard", "touch"})
_WRITES_LAST_OPERAND = frozenset({"cp", "mv", "install", "ln", "rsync"})
# Options that take a value, for the programs above, so the value is not read as an operand.
_OPTIONS_WITH_VALUE = {
    "chmod": frozenset({"--reference"}),
    "chown": frozenset({"--reference", "--from"}),
    "truncate": frozenset({"-s", "--size", "-r", "--reference"}),
    "shred": frozenset({"-n", "--iterations", "-s", "--size", "--random-source"}),
    "cp": frozenset({"-t", "--target-directory", "-S", "--suffix"}),
    "mv": frozenset({"-t", "--target-directory", "-S", "--suffix"}),
    "install": frozenset({"-t", "--target-directory", "-m", "--mode", "-o", "--owner", "-g", "--group"}),
}
_TARGET_DIRECTORY_OPTIONS = frozenset({"-t", "--target-directory"})
_GLOB_CHARS = re.compile(r"[*?[]")

# Fork bombs: a function that calls itself twice per call, in the background or through a pipe
# (``:(){ :|:& };:``, ``bomb(){ bomb | bomb & }; bomb``, ``function f { f & f & }``), and fork loops.
# Definitions are found first and only a bounded window of each body is searched, so a long command
# full of "f(){" cannot make this quadratic.
_FUNCTION_DEFINITION = re.compile(
    r"(?:^|[\s;&|({])(?:function\s+(?P<kw>[A-Za-z_][\w.-]*|:)\s*(?:\(\s*\))?|(?P<n>[A-Za-z_][\w.-]*|:)\s*\(\s*\))"
    r"\s*\{"
)
_BODY_WINDOW = 512
_FORK_LOOPS = (
    re.compile(r"\bfork\s*(?:\(\s*\))?\s*while\s*fork\b"),
    re.compile(r"(?s)\bwhile\b.{0,80}?\bfork\s*\("),
    re.compile(r"\$0\s*[|&]\s*\$0"),
)


def _is_fork_bomb(text: str) -> bool:
    for definition in _FUNCTION_DEFINITION.finditer(text):
        name = definition.group("kw") or definition.group("n")
        body_start = definition.end()
        close = text.find("}", body_start, body_start + _BODY_WINDOW)
        body = text[body_start : close if close >= 0 else body_start + _BODY_WINDOW]
        # The name used as a whole word twice, joined by a pipe or "&": the function spawns itself twice.
        recursion = re.compile(
            r"(?<![\w.:-])" + re.escape(name) + r"\s*(?:\|&?|&)\s*" + re.escape(name) + r"(?![\w.:-])"
        )
        if recursion.search(body):
            return True
    return any(pattern.search(text) for pattern in _FORK_LOOPS)


@dataclass(frozen=True)
class Block:
    """A safeguard refusal: the rule that fired and the message for the LLM."""

    rule: str
    message: str


def _blocked(rule: str, what: str) -> Block:
    return Block(
        rule,
        f"blocked by the safeguard: {what}. This limit is unconditional and cannot be approved or "
        "configured away; do not retry it in another form. Work inside the workspace without "
        "elevated privileges instead.",
    )


# -- paths -------------------------------------------------------------------------------------------


def _data_dir() -> Path:
    return Path(settings.DATA_DIR)


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _path_forms(path: str) -> list[str]:
    """The lexical absolute form of ``path`` and the form with symlinks resolved."""
    lexical = posixpath.normpath(re.sub("/+", "/", os.path.abspath(path)))
    resolved = os.path.realpath(lexical)
    return [lexical] if resolved == lexical else [lexical, resolved]


def _exempt_root(workspace: Path | None) -> str | None:
    """The one place inside the data directory that tools may touch: the call's workspace when the
    caller names it, else the root of all workspaces (``settings.TOOLGATE_WORKSPACE_ROOT``, which
    lives in the data directory by default). Only a directory strictly *inside* the data directory
    qualifies, so a misconfiguration (the data directory itself, or a parent of it) opens nothing."""
    root = workspace if workspace is not None else getattr(settings, "TOOLGATE_WORKSPACE_ROOT", None)
    if root is None:
        return None
    data = os.path.realpath(_data_dir())
    real_root = os.path.realpath(root)
    if _is_within(data, real_root):
        return None
    return real_root


def _workspace_exempts(path_forms: list[str], workspace: Path | None) -> bool:
    """Whether the data-directory rule lets a path pass because it lies in the exempt workspace area.
    Every form must be inside (the resolved one too), so a symlink cannot borrow the exemption."""
    root = _exempt_root(workspace)
    if root is None:
        return False
    return all(_is_within(os.path.realpath(form), root) for form in path_forms)


def _protected_system_path(form: str) -> str | None:
    for root in PROTECTED_SYSTEM_PATHS:
        if _is_within(form, root):
            return root
    return None


def _sensitive_component(form: str) -> str | None:
    parts = form.split("/")
    for sequence in SENSITIVE_COMPONENTS:
        width = len(sequence)
        for start in range(len(parts) - width + 1):
            if tuple(parts[start : start + width]) == sequence:
                return "/".join(sequence)
    return None


def _in_data_dir(forms: list[str]) -> bool:
    data = _data_dir()
    roots = {posixpath.normpath(str(data)), os.path.realpath(data)}
    return any(_is_within(form, root) for form in forms for root in roots)


def check_write_rule(path: Path | str, *, workspace: Path | None = None) -> Block | None:
    """The rule that forbids writing ``path``, or None. Paths in the workspace area (the call's
    ``workspace`` when given, else every workspace) are exempt from the data-directory rule only,
    since workspaces live in the data directory by default; the system and credential rules apply
    everywhere."""
    text = os.fspath(path)
    if "\x00" in text:
        return _blocked("invalid_path", "the path contains a NUL byte")
    forms = _path_forms(text)
    for form in forms:
        root = _protected_system_path(form)
        if root is not None:
            return _blocked("protected_path", f"writing under the protected system path {root} ({form})")
    for form in forms:
        component = _sensitive_component(form)
        if component is not None:
            return _blocked("sensitive_path", f"writing to credential files ({component}) is never allowed")
    if _in_data_dir(forms) and not _workspace_exempts(forms, workspace):
        return _blocked("data_dir", "Toolgate's own data directory (database, keys) is off limits")
    return None


def check_write(path: Path, *, workspace: Path | None = None) -> str | None:
    """Message explaining why writing ``path`` is forbidden, or None when the safeguard allows it."""
    block = check_write_rule(path, workspace=workspace)
    return None if block is None else block.message


# -- shell -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Where:
    """What the shell will see as ``~`` and the current directory, when the caller knows them."""

    cwd: Path | None
    home: Path | None

    def absolute(self, word: str) -> str | None:
        """``word`` as an absolute lexical path, or None when it depends on something unknown."""
        if word.startswith("~"):
            if self.home is None or not (word == "~" or word.startswith("~/")):
                return None
            word = str(self.home) + word[1:]
        if not word.startswith("/"):
            if self.cwd is None:
                return None
            word = os.path.join(self.cwd, word)
        return posixpath.normpath(re.sub("/+", "/", word))


def _name_matches(name: str, names: frozenset[str] | re.Pattern[str]) -> bool:
    """Whether a program name is one of ``names``; a glob (``su?o``) matches if it could expand to one."""
    if isinstance(names, frozenset):
        if _GLOB_CHARS.search(name):
            return any(fnmatch.fnmatchcase(known, name) for known in names)
        return name in names
    return bool(names.fullmatch(name))


def _operands(argv: tuple[str, ...], name: str) -> list[str]:
    """The non-option arguments of ``argv`` (after ``--`` everything is an operand)."""
    with_value = _OPTIONS_WITH_VALUE.get(name, frozenset())
    operands: list[str] = []
    i = 1
    only_operands = False
    while i < len(argv):
        word = argv[i]
        if not only_operands and word == "--":
            only_operands = True
        elif not only_operands and word.startswith("-") and len(word) > 1:
            if word in with_value:
                i += 1
        else:
            operands.append(word)
        i += 1
    return operands


def _written_operands(argv: tuple[str, ...], name: str) -> list[str]:
    """The files a command writes through its arguments (``dd of=``, ``tee F``, ``cp … DEST``)."""
    if name == "dd":
        return [word[3:] for word in argv[1:] if word.startswith("of=")]
    if name in _WRITES_ALL_OPERANDS:
        return _operands(argv, name)
    if name in _WRITES_LAST_OPERAND:
        targets = [argv[i + 1] for i in range(1, len(argv) - 1) if argv[i] in _TARGET_DIRECTORY_OPTIONS]
        targets += [word.split("=", 1)[1] for word in argv if word.startswith("--target-directory=")]
        operands = _operands(argv, name)
        return targets or operands[-1:]
    return []


def _glob_expansions(path: str) -> list[str]:
    """What the shell could expand a glob operand to (bounded), plus its literal directory prefix."""
    if not _GLOB_CHARS.search(path):
        return [path]
    literal = _GLOB_CHARS.split(path, maxsplit=1)[0]
    prefix = literal if literal.endswith("/") else posixpath.dirname(literal) or "/"
    return [prefix.rstrip("/") or "/", *itertools.islice(glob.iglob(path), 1000)]


def _check_device_write(target: str, where: _Where) -> Block | None:
    path = where.absolute(target)
    if path is None or not _is_within(path, "/dev") or path in DEVICE_WRITE_ALLOWED:
        return None
    return _blocked("device_write", f"writing to the device {path}")


def _check_shell_write(target: str, where: _Where) -> Block | None:
    """A file the command writes (redirection or operand): /dev rule first, then the write safeguard."""
    block = _check_device_write(target, where)
    if block is not None:
        return block
    path = where.absolute(target)
    if path is None or path in DEVICE_WRITE_ALLOWED:
        return None
    return check_write_rule(path, workspace=where.home)


def _check_rm_root(argv: tuple[str, ...], where: _Where) -> Block | None:
    if "--no-preserve-root" in argv:
        return _blocked("rm_root", "rm with --no-preserve-root")
    for operand in _operands(argv, "rm"):
        # "/", "//", "/.", "/..", "/*", "/.*": the root itself or everything in it.
        if operand.startswith("/") and re.fullmatch(r"/[/*.?]*", operand):
            return _blocked("rm_root", f"rm on the filesystem root ({operand})")
        if where.absolute(operand) == "/":  # "~/../..", "../../.." from a known directory
            return _blocked("rm_root", f"rm on the filesystem root ({operand})")
    return None


def _check_path_mutation(argv: tuple[str, ...], name: str, where: _Where) -> Block | None:
    """rm/chmod/chown (…) on a protected system directory, as written, globbed or through a symlink."""
    operands = _operands(argv, name)
    if name in {"chmod", "chown", "chgrp"} and operands:
        operands = operands[1:]  # the mode or owner
    for operand in operands:
        path = where.absolute(operand)
        if path is None:
            continue
        for expanded in _glob_expansions(path):
            for form in _path_forms(expanded):
                root = "/" if form == "/" else _protected_system_path(form)
                if root is not None:
                    return _blocked(
                        "protected_path", f"{name} on the protected system path {root} ({operand})"
                    )
    return None


def _check_simple(command: shell_parse.SimpleCommand, where: _Where) -> Block | None:
    argv = command.argv
    name = command.name
    for redirect in command.redirects:
        if redirect.writes:
            block = _check_shell_write(redirect.target, where)
            if block is not None:
                return block
    if not argv:
        return None
    if _name_matches(name, _PRIVILEGE_PROGRAMS):
        return _blocked("privilege_escalation", f"running {name} (privilege escalation)")
    if _name_matches(name, _DISK_TOOLS):
        return _blocked("disk_format", f"running the disk partitioning/formatting tool {name}")
    if name == "diskutil" and any(_DISKUTIL_VERBS.fullmatch(word) for word in argv[1:]):
        return _blocked("disk_format", "diskutil erase/partition")
    if name == "diskutil" and "apfs" in argv and any(w.lower() == "deletecontainer" for w in argv):
        return _blocked("disk_format", "diskutil apfs deleteContainer")
    if name == "rm":
        block = _check_rm_root(argv, where)
        if block is not None:
            return block
    for target in _written_operands(argv, name):
        block = _check_shell_write(target, where)
        if block is not None:
            return block
    if name in _PATH_MUTATORS:
        return _check_path_mutation(argv, name, where)
    return None


def _check_data_dir_mentions(text: str, workspace: Path | None) -> Block | None:
    """Any path in the command text inside ``settings.DATA_DIR`` (outside an exempt workspace)."""
    data = _data_dir()
    for root in {str(data).rstrip("/"), os.path.realpath(data).rstrip("/")}:
        if not root:
            continue
        for match in re.finditer(re.escape(root) + r"""(?=$|[/\s'"`;|&<>()$])[^\s'"`;|&<>()$]*""", text):
            forms = _path_forms(match.group(0))
            if not _workspace_exempts(forms, workspace):
                return _blocked("data_dir", "Toolgate's own data directory (database, keys) is off limits")
    return None


def check_shell_rule(command: str, *, workspace: Path | None = None, cwd: Path | None = None) -> Block | None:
    """The safeguard rule that blocks ``command``, or None.

    ``workspace`` is the call's workspace (the shell's ``$HOME``) and ``cwd`` its working directory;
    with them, ``~`` and relative paths are checked too."""
    try:
        normalised = shell_parse.normalize(command)
    except shell_parse.NulByteError:
        return _blocked("invalid", "the command contains a NUL byte")
    where = _Where(cwd=cwd or workspace, home=workspace)
    for variant, parsed in shell_parse.iter_all_commands(normalised):
        if parsed.too_deep:
            return _blocked(
                "nesting_too_deep",
                f"command nesting too deep (more than {shell_parse.MAX_WRAPPER_DEPTH} shell wrappers), "
                "so what it runs cannot be checked; run the inner command directly",
            )
        if _is_fork_bomb(variant):
            return _blocked("fork_bomb", "a fork bomb")
        block = _check_data_dir_mentions(variant, workspace)
        if block is not None:
            return block
        for simple in parsed.commands:
            block = _check_simple(simple, where)
            if block is not None:
                return block
    return None


def check_shell(command: str, *, workspace: Path | None = None, cwd: Path | None = None) -> str | None:
    """Message explaining why the safeguard refuses ``command``, or None when it may proceed to the
    (configurable) deny groups. Runs before everything else and is never skipped."""
    block = check_shell_rule(command, workspace=workspace, cwd=cwd)
    return None if block is None else block.message
