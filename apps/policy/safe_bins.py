"""The safe bins of exec approvals: read-only programs that run without asking in ``on-miss`` mode
(SPEC Part A "Exec approvals", B §6.2), and the forms of them that are refused.

This is a second layer. The guarantee is the process jail every command runs in; what this module
decides is only whether a human is asked first. When in doubt a form is refused: refusing costs a
question, passing costs a command nobody looked at.

Every program of B §6.2's list was checked against GTFOBins' published capabilities (shell, command,
file write, file read, library load) and against its manual. Programs that can run commands or write
in ordinary use are off the list: interpreters, package managers, build tools, ``tee`` (writes),
``xargs`` and ``awk`` (``system()``), ``patch`` (writes), ``git`` (see below) and ``yq`` (two unrelated
programs share the name, one writes files with ``--split-exp``, so its options cannot be read with
confidence). What stays, and the forms of it that are not safe. For every program with refused forms,
also an argument the shell computes when the command runs (``$(…)``, backticks, ``${…}``, ``$IFS``),
and an unquoted glob or brace word that can expand to a name starting with ``-`` before ``--``
(``sort *`` with a file named ``--compress-program=./x``; ``sort -- *`` is fine):

==========  ==========================================================  =================================
program     refused forms                                               why
==========  ==========================================================  =================================
cat         none                                                        reads its operands only
echo        none                                                        prints its arguments
ls          none                                                        lists
pwd         none                                                        prints the directory
head, tail  none                                                        read their operands only
wc          ``--files0-from``                                           reads names from a file and
                                                                        prints them in errors (file read)
sort        ``-o``/``--output``, ``-T``/``--temporary-directory``,      write; ``--compress-program`` runs
            ``--compress-program``, ``--files0-from``                   a program; ``--files0-from`` reads
uniq        a second operand (``uniq IN OUT``)                          the second operand is written
grep        ``-r``/``-R``/``--recursive``/``--dereference-recursive``,  B §6.2: recursion follows links out
            ``-d recurse``/``--directories=recurse``, ``-D``/           of the workspace; devices block or
            ``--devices``                                               read special files
find        ``-exec``, ``-execdir``, ``-ok``, ``-okdir``, ``-delete``,  run commands (shell), delete or
            ``-fprint``, ``-fprint0``, ``-fprintf``, ``-fls``,          write files; ``-files0-from`` reads
            ``-files0-from``                                            names from a file
which       none                                                        looks names up
whoami      none
date        ``-f``/``--file``, ``-s``/``--set``, an operand not          ``-f`` prints a file's lines in
            starting with ``+``                                         errors (file read); the others set
                                                                        the clock
uname       none
hostname    an operand, ``-F``/``--file``, ``-b``/``--boot``            set the host name
df, free,   none
uptime
du          ``--files0-from``                                           as wc
file        ``-f``/``--files-from``, ``-m``/``--magic-file``,           read names or magic from a file
            ``-C``/``--compile``, ``-p``/``--preserve-date``,           (file read), write ``magic.mgc`` or
            ``-z``/``-Z``, ``-S``/``--no-sandbox``                      access times, run decompressors,
                                                                        drop file's own sandbox
stat        none
dirname,    none
basename,
realpath
jq          ``-f``/``--from-file``, ``-L``, ``--rawfile``,               a program from a file, modules
            ``--slurpfile``, ``import``/``include``, ``env``/``$ENV``   from a directory (library load),
                                                                        option-driven file reads, the
                                                                        environment
sed         ``-i``/``--in-place``, ``-f``/``--file``, the commands      write in place or through ``w``;
            ``e``, ``w``, ``W``, ``r``, ``R``, the ``s`` flags ``e``,   ``e`` runs a shell command; ``r``
            ``w``; a script that cannot be read                         and ``R`` read any file
tr, cut     none                                                        filters
diff        none                                                        reads its operands (``-l`` runs
                                                                        ``pr`` from the system ``PATH``)
env         options, a bare ``env``, any variable not in                runs its arguments (classified on
            :data:`HARMLESS_VARIABLES`                                  their own); prints the environment
==========  ==========================================================  =================================

Reading. GTFOBins lists ``cat``, ``head``, ``tail``, ``grep``, ``diff``, ``jq`` … as able to read files
outside the workspace. Operands are what these programs are for, and a text check cannot tell where
``x`` points (symbolic links, globs, ``$HOME``): confining reads is the jail's job, and reading by
operand stays safe. Reads driven by an option (``date -f``, ``--files0-from``, ``jq --rawfile``) are
refused: they are how a file is read by a program that does not look like it reads one.

``git`` is never safe: a repository's configuration (``core.pager``, ``core.fsmonitor``,
``core.sshCommand``, diff drivers, hooks) runs programs, and such a configuration can always be planted
in the workspace (``sub/.git/config``, then ``cd sub && git log`` or ``git -C sub log``).

Options are read as ``getopt_long`` reads them (:func:`parse_options`): an unambiguous prefix of a long
option is that option (``--out`` is ``--output``, ``--expr`` is ``--expression``), short options
cluster (``-no`` is ``-n -o``), a value may be attached (``-oFILE``, ``--output=FILE``) or be the next
word, options may follow operands, and ``--`` ends them. For a program with refused forms, an unknown
or ambiguous long option or an unknown short one makes the command not safe (the table could be out of
date; a missing entry must not let a form through).

Variable assignments (``NAME=value cmd``, and a statement of assignments alone, which changes what later
commands of the shell run: ``PATH=.; ls``) make a command not safe, except for the names of
:data:`HARMLESS_VARIABLES` with a plain value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

# Read-only programs (B §6.2's safe bins minus everything that can write, execute or install; see the
# module docstring for each and its refused forms).
SAFE_BINS = frozenset(
    {
        "cat", "echo", "ls", "pwd", "head", "tail", "wc", "sort", "uniq", "grep", "find", "which",
        "whoami", "date", "uname", "hostname", "df", "du", "free", "uptime", "file", "stat", "dirname",
        "basename", "realpath", "jq", "sed", "tr", "cut", "diff", "env",
    }
)  # fmt: skip

# Variables that only change how output is formatted: the locale (message language, collation,
# character classes, number and time formats), the time zone, the terminal width and colour. Values
# must be plain words; "/" only in TZ ("Europe/Paris"; a zone file is data that is only parsed), since
# glibc takes a locale name starting with "/" as a directory to load locale files from.
# Deliberately absent: PATH, IFS, HOME, anything LD_*, GIT_*, GCONV_PATH, LOCPATH, TERMINFO, PAGER,
# EDITOR … (they choose programs, libraries or configuration).
HARMLESS_VARIABLES = frozenset(
    {"LANG", "LC_ALL", "LC_COLLATE", "LC_CTYPE", "LC_MESSAGES", "LC_NUMERIC", "LC_TIME", "TZ", "COLUMNS",
     "NO_COLOR"}
)  # fmt: skip
_HARMLESS_VALUE = re.compile(r"[A-Za-z0-9_.,:@+-]*")
_HARMLESS_TZ = re.compile(r"[A-Za-z0-9_.,:@+/-]*")


def harmful_assignments(assignments: Sequence[str]) -> list[str]:
    """The assignments (``NAME=value`` words) that are not a harmless name with a plain value."""
    harmful: list[str] = []
    for assignment in assignments:
        name, _, value = assignment.partition("=")
        plain = (_HARMLESS_TZ if name == "TZ" else _HARMLESS_VALUE).fullmatch(value)
        if name not in HARMLESS_VARIABLES or ".." in value or not plain:
            harmful.append(assignment)
    return harmful


# --- getopt_long ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """A program's options as ``getopt_long`` sees them.

    ``short`` is a getopt option string (``"ab:c::"``: ``a`` alone, ``b`` with a value, ``c`` with an
    optional attached value); ``long`` maps each long name to ``""`` (no value), ``"="`` (a value) or
    ``"?"`` (an optional value, only as ``--name=value``); ``same`` maps a long name to the name it is
    another spelling of (``colour`` → ``color``): getopt_long does not call a prefix of both ambiguous."""

    short: str
    long: dict[str, str]
    same: dict[str, str] = field(default_factory=dict)

    def short_kind(self, letter: str) -> str | None:
        at = self.short.find(letter)
        if at < 0 or letter == ":":
            return None
        if self.short.startswith("::", at + 1):
            return "?"
        return "=" if self.short.startswith(":", at + 1) else ""


@dataclass
class Parsed:
    """The options (``("-o", value)``, ``("--output", value)``; the value None when there is none) and
    operands of one command line, and what ``getopt_long`` would reject (empty when nothing)."""

    options: list[tuple[str, str | None]] = field(default_factory=list)
    operands: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def has(self, *names: str) -> bool:
        return any(name in names for name, _ in self.options)

    def values(self, *names: str) -> list[str | None]:
        return [value for name, value in self.options if name in names]


def expands_to_options(word: str) -> bool:
    """Whether a glob or brace word can expand to a word starting with ``-`` (it starts with one of
    ``*?[{``; ``src/*`` or ``x*`` cannot)."""
    return word[:1] in {"*", "?", "[", "{"}


def resolve_long(name: str, long: dict[str, str], same: dict[str, str] | None = None) -> str | None:
    """The long option ``--name`` stands for: itself, or the one option it is a prefix of (None when it
    is a prefix of none, or of several different ones: getopt_long calls that ambiguous). Spellings of
    one option (``same``) are given as its first name."""
    same = same or {}
    if name in long:
        return same.get(name, name)
    candidates = {same.get(option, option) for option in long if option.startswith(name)}
    return candidates.pop() if len(candidates) == 1 and name else None


def parse_options(args: Sequence[str], options: Options, expandable: Collection[str] = ()) -> Parsed:
    """Read ``args`` (the words after the program name) as ``getopt_long`` would (GNU argument
    permutation: options may follow operands; ``--`` ends the options; ``-`` is an operand).

    ``expandable``: words the shell expands to file names or brace alternatives. Before ``--`` one that
    can expand to a word starting with ``-`` (:func:`expands_to_options`) is a problem: the file names
    in the workspace decide which options the program gets."""
    parsed = Parsed()
    i = 0
    done = False
    while i < len(args):
        word = args[i]
        i += 1
        if not done and word in expandable and expands_to_options(word):
            parsed.problems.append(f"{word} can expand to file names read as options (write -- before it)")
        if done or word == "-" or not word.startswith("-"):
            parsed.operands.append(word)
            continue
        if word == "--":
            done = True
            continue
        if word.startswith("--"):
            name, equals, value = word[2:].partition("=")
            full = resolve_long(name, options.long, options.same)
            if full is None:
                parsed.problems.append(f"unknown or ambiguous option --{name}")
                continue
            kind = options.long[full]
            if equals and not kind:
                parsed.problems.append(f"option --{full} takes no value")
            if not equals and kind == "=":
                value = args[i] if i < len(args) else ""
                i += 1
            parsed.options.append((f"--{full}", value if equals or kind == "=" else None))
            continue
        cluster = word[1:]
        for at, letter in enumerate(cluster):
            short_kind = options.short_kind(letter)
            if short_kind is None:
                parsed.problems.append(f"unknown option -{letter}")
                continue
            if not short_kind:
                parsed.options.append((f"-{letter}", None))
                continue
            rest = cluster[at + 1 :]
            if not rest and short_kind == "=":
                rest = args[i] if i < len(args) else ""
                i += 1
            parsed.options.append((f"-{letter}", rest or None))
            break
    return parsed


def _table(short: str, long: str) -> Options:
    """``long``: space-separated names, ``name=`` with a value, ``name=?`` with an optional one, and
    ``a|b`` for two spellings of one option."""
    entries: dict[str, str] = {}
    same: dict[str, str] = {}
    for entry in long.split():
        names, _, kind = entry.partition("=")
        first, *others = names.split("|")
        for name in (first, *others):
            entries[name] = "?" if kind == "?" else ("=" if entry.endswith("=") else "")
        same.update({other: first for other in others})
    return Options(short, entries, same)


SORT = _table(
    "bcCdfghik:mMno:rRsS:t:T:uVz",
    "ignore-leading-blanks check=? compress-program= debug dictionary-order field-separator= files0-from= "
    "general-numeric-sort human-numeric-sort ignore-case ignore-nonprinting key= merge month-sort "
    "numeric-sort output= parallel= random-sort random-source= reverse sort= stable buffer-size= "
    "temporary-directory= unique version-sort zero-terminated batch-size= help version",
)
UNIQ = _table(
    "cdDf:is:uw:z",
    "all-repeated=? check-chars= count group=? ignore-case repeated skip-chars= skip-fields= unique "
    "zero-terminated help version",
)
GREP = _table(
    "0123456789A:B:C:D:EFGHIPTUVX:abcd:e:f:hiLlm:noqRrsuvwxyZz",
    "after-context= basic-regexp before-context= binary binary-files= byte-offset color|colour=? "
    "context= count dereference-recursive devices= directories= exclude= exclude-dir= exclude-from= "
    "extended-regexp file= files-with-matches files-without-match fixed-strings group-separator= help "
    "ignore-case include= initial-tab invert-match label= line-buffered line-number line-regexp "
    "max-count= no-filename no-group-separator no-ignore-case no-messages null null-data only-matching "
    "perl-regexp quiet|silent recursive regexp= text version with-filename word-regexp",
)
SED = _table(
    "bsnrzuEe:f:l:i::",
    "binary debug expression= file= follow-symlinks help in-place=? line-length= null-data|zero-terminated "
    "posix quiet|silent regexp-extended sandbox separate unbuffered version",
)
DATE = _table(
    "d:f:I::r:Rs:u",
    "date= debug file= iso-8601=? reference= resolution rfc-email|rfc-822|rfc-2822 rfc-3339= set= "
    "utc|universal|uct help version",
)
HOSTNAME = _table(
    "aAbdfF:hiIsVy",
    "alias all-fqdns boot domain file= fqdn|long help ip-address all-ip-addresses short version yp|nis",
)
WC = _table("clLmw", "bytes chars lines files0-from= max-line-length words total= debug help version")
DU = _table(
    "0abd:chHklmst:xB:DLPSX:",
    "all apparent-size block-size= bytes count-links dereference dereference-args max-depth= "
    "files0-from= human-readable inodes no-dereference null one-file-system separate-dirs si summarize "
    "threshold= time=? time-style= total exclude= exclude-from= help version",
)
FILE = _table(
    "bcCde:Ef:F:hiklLm:nNpP:rsSvzZ0",
    "apple brief checking-printout compile debug dereference exclude= exclude-quiet= extension "
    "files-from= help keep-going list magic-file= mime mime-encoding mime-type no-buffer no-dereference "
    "no-pad no-sandbox parameter= preserve-date print0 raw separator= special-files uncompress "
    "uncompress-noreport version",
)

# Why a refused option is refused, by option (short and long forms).
_REFUSED_OPTIONS: dict[str, tuple[Options, dict[str, str]]] = {
    "sort": (
        SORT,
        {
            "-o": "writes its output to a file",
            "--output": "writes its output to a file",
            "-T": "writes temporary files",
            "--temporary-directory": "writes temporary files",
            "--compress-program": "runs a program",
            "--files0-from": "reads file names from a file",
        },
    ),
    "grep": (
        GREP,
        {
            "-r": "searches recursively",
            "-R": "searches recursively",
            "--recursive": "searches recursively",
            "--dereference-recursive": "searches recursively",
            "-D": "reads devices",
            "--devices": "reads devices",
        },
    ),
    "date": (
        DATE,
        {
            "-f": "reads a file (its lines are printed in errors)",
            "--file": "reads a file (its lines are printed in errors)",
            "-s": "sets the clock",
            "--set": "sets the clock",
        },
    ),
    "hostname": (
        HOSTNAME,
        {
            "-F": "sets the host name",
            "--file": "sets the host name",
            "-b": "sets the host name",
            "--boot": "sets the host name",
        },
    ),
    "wc": (WC, {"--files0-from": "reads file names from a file"}),
    "du": (DU, {"--files0-from": "reads file names from a file"}),
    "file": (
        FILE,
        {
            "-f": "reads file names from a file",
            "--files-from": "reads file names from a file",
            "-m": "reads magic from a file",
            "--magic-file": "reads magic from a file",
            "-C": "writes a compiled magic file",
            "--compile": "writes a compiled magic file",
            "-p": "changes access times",
            "--preserve-date": "changes access times",
            "-z": "runs decompressors",
            "--uncompress": "runs decompressors",
            "-Z": "runs decompressors",
            "--uncompress-noreport": "runs decompressors",
            "-S": "turns off its own sandbox",
            "--no-sandbox": "turns off its own sandbox",
        },
    ),
    "uniq": (UNIQ, {}),
    "sed": (SED, {}),
}


# --- per-program rules ---------------------------------------------------------------------------------


def _getopt_rule(name: str, args: Sequence[str], expandable: Collection[str]) -> str:
    options, refused = _REFUSED_OPTIONS[name]
    parsed = parse_options(args, options, expandable)
    if parsed.problems:
        return parsed.problems[0]
    for option, _ in parsed.options:
        if option in refused:
            return f"{option} {refused[option]}"
    if name == "grep":
        for option, value in parsed.options:
            action = resolve_long(value or "", {"read": "", "skip": "", "recurse": ""})
            if option in {"-d", "--directories"} and action in {None, "recurse"}:
                return f"{option} {value} searches recursively"
    if name == "uniq" and (len(parsed.operands) > 1 or any(word in expandable for word in parsed.operands)):
        return "a second operand is the output file uniq writes (a glob can make one)"
    if name == "date" and any(
        not operand.startswith("+") or operand in expandable for operand in parsed.operands
    ):
        return "an operand that is not a +FORMAT sets the clock"
    if name == "hostname" and parsed.operands:
        return "an operand sets the host name"
    if name == "sed":
        return _sed_rule(parsed, expandable)
    return ""


_FIND_REFUSED = {
    "-exec": "runs a command",
    "-execdir": "runs a command",
    "-ok": "runs a command",
    "-okdir": "runs a command",
    "-delete": "deletes files",
    "-fprint": "writes a file",
    "-fprint0": "writes a file",
    "-fprintf": "writes a file",
    "-fls": "writes a file",
    "-files0-from": "reads file names from a file",
}


def _find_rule(args: Sequence[str]) -> str:
    # find's expression words must be spelt out in full (no getopt, no abbreviations).
    for word in args:
        if word in _FIND_REFUSED:
            return f"{word} {_FIND_REFUSED[word]}"
    return ""


_JQ_VALUE_WORDS = {"--indent": 1, "--arg": 2, "--argjson": 2, "--slurpfile": 2, "--rawfile": 2, "-L": 1}
_JQ_REFUSED = {
    "--from-file": "reads its program from a file",
    "-L": "loads modules from a directory",
    "--rawfile": "reads a file",
    "--slurpfile": "reads a file",
    "--run-tests": "reads tests from a file",
}
# Words of a jq program that load modules or read the environment (not ".env", a field of the input).
_JQ_PROGRAM_REFUSED = re.compile(r"(?<![.\w$])(import|include|env)\b|\$ENV\b")


def _jq_rule(args: Sequence[str]) -> str:
    """jq reads its options itself (no getopt): long names in full, short letters anywhere in a word
    of letters (``-rf`` is ``-r -f``). The first operand is the program."""
    program: str | None = None
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word in _JQ_REFUSED:
            return f"{word} {_JQ_REFUSED[word]}"
        if word.startswith("-L"):
            return f"-L {_JQ_REFUSED['-L']}"
        if word in _JQ_VALUE_WORDS:
            i += _JQ_VALUE_WORDS[word]
        elif word.startswith("-") and not word.startswith("--") and "f" in word[1:]:
            return "-f reads its program from a file"
        elif not word.startswith("-") and program is None:
            program = word
    if program is not None and _JQ_PROGRAM_REFUSED.search(program):
        return "the program loads modules or reads the environment"
    return ""


def _env_rule(args: Sequence[str]) -> str:
    """``env NAME=value … program …`` with harmless names only; the program is classified on its own."""
    i = 0
    while i < len(args) and "=" in args[i] and not args[i].startswith("-"):
        i += 1
    if i == len(args):
        return "a bare env prints the environment"
    if args[i].startswith("-"):
        return "env options change the environment or how the program is found"
    harmful = harmful_assignments(args[:i])
    if harmful:
        return f"sets {harmful[0].partition('=')[0]}"
    return ""


_RULES: dict[str, Callable[[Sequence[str]], str]] = {
    "find": _find_rule,
    "jq": _jq_rule,
    "env": _env_rule,
}
# Programs that read their arguments without getopt and have no "--": any word that can expand to an
# option-like name is refused (find . -name *.py, with a file named "-delete.py" or "-fprint").


# Text the shell computes when the command runs: command substitution, ``${…}``, and ``$IFS`` (whose
# newline, inside double quotes, starts a new sed command). The reader cannot know what they become,
# and a safe program's substitution can print anything: ``sed -n "/$(echo -e '\\x2fe id')/p"`` is
# ``//e id`` once run, ``date +%s$(echo ' -f x')`` splits into ``date +%s -f x``.
_RUN_TIME_TEXT = re.compile(r"`|\$[({]|\$IFS")


def refused_form(name: str, args: Sequence[str], expandable: Collection[str] = ()) -> str:
    """Why this use of the safe bin ``name`` is not safe (writes, runs programs, reads through an
    option, or cannot be read), or "" when it is a read-only use. For a program with refused forms, an
    argument computed at run time is refused too (the form it takes cannot be checked), and so is an
    unquoted glob or brace word (``expandable``) where file names would be read as options."""
    if (name in _RULES or name in _REFUSED_OPTIONS) and any(_RUN_TIME_TEXT.search(word) for word in args):
        return "an argument is computed when the command runs ($(…), `…`, ${…}, $IFS)"
    if name in _RULES:
        option_like = [word for word in args if word in expandable and expands_to_options(word)]
        if option_like:
            return f"{option_like[0]} can expand to file names read as options"
        return _RULES[name](args)
    if name in _REFUSED_OPTIONS:
        return _getopt_rule(name, args, expandable)
    return ""


# --- sed -------------------------------------------------------------------------------------------------


def _sed_rule(parsed: Parsed, expandable: Collection[str]) -> str:
    if parsed.has("-i", "--in-place"):
        return "-i edits files in place"
    if parsed.has("-f", "--file"):
        return "-f reads its script from a file, which cannot be checked"
    scripts = [value or "" for value in parsed.values("-e", "--expression")]
    if not scripts:
        if not parsed.operands:
            return ""
        if parsed.operands[0] in expandable:
            return "the script is a glob: file names in the workspace would decide it"
        scripts = [parsed.operands[0]]
    return sed_script_refusal("\n".join(scripts))


_SED_PLAIN_COMMANDS = frozenset("=dDgGhHnNpPxzF")
_SED_LABEL_COMMANDS = frozenset("btT:")


class _SedScript:
    """A reader of GNU sed scripts that stops at anything that writes, reads a file or runs a command."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_blanks(self, newlines: bool = True) -> None:
        while self.peek() and (self.peek() in " \t" or (newlines and self.peek() in "\n;")):
            self.pos += 1

    def to_end_of_line(self) -> None:
        end = self.text.find("\n", self.pos)
        self.pos = len(self.text) if end < 0 else end

    def delimited(self, delimiter: str) -> None:
        """Skip a regex or replacement up to an unescaped ``delimiter``; ValueError if unterminated."""
        if delimiter in {"", "\n", "\\"}:
            raise ValueError("bad delimiter")
        while True:
            char = self.peek()
            if not char:
                raise ValueError("unterminated")
            self.pos += 1
            if char == "\\":
                self.pos += 1
            elif char == delimiter:
                return

    def address(self) -> None:
        char = self.peek()
        if char.isdigit():
            while self.peek().isdigit() or self.peek() == "~":
                self.pos += 1
        elif char == "$":
            self.pos += 1
        elif char in {"/", "\\"}:
            if char == "\\":
                self.pos += 1
            delimiter = self.peek()
            self.pos += 1
            self.delimited(delimiter)
            while self.peek() in {"I", "M"} and self.peek():
                self.pos += 1
        elif char in {"+", "~"}:
            self.pos += 1
            while self.peek().isdigit():
                self.pos += 1

    def text_argument(self) -> None:
        """The text of ``a``, ``i``, ``c``: to the end of the line, with backslash continuations."""
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "\\":
                self.pos += 2
                continue
            if char == "\n":
                return
            self.pos += 1

    def refusal(self) -> str:
        """Why the script is not safe, or "" when it only reads its input and prints."""
        try:
            return self._commands()
        except (ValueError, IndexError):
            return "the sed script cannot be read, so it cannot be checked"

    def _commands(self) -> str:
        while True:
            self.skip_blanks()
            if not self.peek():
                return ""
            if self.peek() == "#":
                self.to_end_of_line()
                continue
            self.address()
            if self.peek() == ",":
                self.pos += 1
                self.skip_blanks(newlines=False)
                self.address()
            self.skip_blanks(newlines=False)
            while self.peek() == "!":
                self.pos += 1
                self.skip_blanks(newlines=False)
            command = self.peek()
            self.pos += 1
            if command in {"e", "w", "W", "r", "R"}:
                what = "runs a shell command" if command == "e" else (
                    "writes a file" if command in {"w", "W"} else "reads a file"
                )  # fmt: skip
                return f"the sed command {command} {what}"
            if command in {"{", "}"} or command in _SED_PLAIN_COMMANDS:
                continue
            if command in _SED_LABEL_COMMANDS:
                while self.peek() and self.peek() not in "\n;":
                    self.pos += 1
                continue
            if command in {"a", "i", "c"}:
                self.text_argument()
                continue
            if command in {"q", "Q", "l", "L"}:
                self.skip_blanks(newlines=False)
                while self.peek().isdigit():
                    self.pos += 1
                continue
            if command == "v":
                while self.peek() and self.peek() not in "\n;}":
                    self.pos += 1
                continue
            if command == "y":
                delimiter = self.peek()
                self.pos += 1
                self.delimited(delimiter)
                self.delimited(delimiter)
                continue
            if command == "s":
                refusal = self._substitute()
                if refusal:
                    return refusal
                continue
            raise ValueError(f"unknown sed command {command!r}")

    def _substitute(self) -> str:
        delimiter = self.peek()
        self.pos += 1
        self.delimited(delimiter)
        self.delimited(delimiter)
        while self.peek() and self.peek() not in "\n;}":
            flag = self.peek()
            self.pos += 1
            if flag == "e":
                return "the s flag e runs the pattern space as a shell command"
            if flag == "w":
                return "the s flag w writes a file"
            if flag not in "gpiImM0123456789 \t":
                raise ValueError(f"unknown s flag {flag!r}")
        return ""


def sed_script_refusal(script: str) -> str:
    """Why a sed script is not safe (``e``, ``w``, ``W``, ``r``, ``R``, the ``s`` flags ``e`` and ``w``,
    or a script that cannot be read), or ""."""
    return _SedScript(script).refusal()
