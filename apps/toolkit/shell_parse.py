"""A conservative reader of POSIX shell commands for the safety checks of the exec tool.

It does not run or fully parse shell: it splits a command line into the simple commands a shell would run
(through ``;``, ``&&``, ``||``, ``|``, ``&``, newlines, subshells, ``$(…)``, backticks and process
substitution), removes quoting the way the shell would (``s'u'do`` is ``sudo``), records redirections,
and looks through wrappers (``env``, ``nohup``, ``timeout``, ``sh -c '…'``, ``eval``, ``xargs``,
``find -exec`` …) up to :data:`MAX_WRAPPER_DEPTH` levels, as SPEC Part A asks ("classification looks at
every command of a chain and through wrappers, up to 3 deep").

Where the reader cannot be sure, it errs towards *seeing more commands* (a here-document's body is read
as commands too; ``\\r`` separates words): the checks built on it deny, so over-reading can only block,
never let something through. Deeper nesting than the limit is reported, and callers fail closed on it.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_WRAPPER_DEPTH = 3
# Command substitutions nest without wrappers ($( $( … ) )); bound the recursion so a crafted command
# cannot exhaust the stack. Beyond it the command is reported as too deep, like wrapper nesting.
_MAX_RECURSION = 12
# How deeply quotes and parentheses may nest inside one substitution while scanning for its end.
_MAX_SCAN_NESTING = 64

# Zero-width and bidirectional controls (format characters, Unicode category Cf: U+200B-U+200F,
# U+202A-U+202E, U+2060-U+2064, U+2066-U+2069, U+FEFF, U+00AD …). They render as nothing, so
# ``su\u200bdo`` would look like ``sudo`` to a reviewer and like a harmless unknown word to a regex.
_INVISIBLE_CATEGORIES = frozenset({"Cf"})

# Letters from other scripts that look like ASCII ones and that NFKC leaves alone (Cyrillic, Greek).
# Used only to build an extra *checking* variant: the command that runs is never rewritten with it.
_CONFUSABLES = str.maketrans(
    # Cyrillic, Greek, Armenian and other letters, as escapes so the source shows what they are.
    (
        "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u04bb\u04cf\u051b\u051d\u0261"
        "\u0578\u057d\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0405\u0406\u0408"
        "\u03b1\u03bf\u03c1\u03bd\u03c4\u03ba\u03b9\u03c5\u03b5\u0391\u0392\u0395\u0397\u0399\u039a\u039c"
        "\u039d\u039f\u03a1\u03a4\u03a7\u03a5\u0396\u0131\u2113"
    ),
    "aeopcyxijsdhlqwgnuABEKMHOPCTXSIJaopvtkiueABEHIKMNOPTXYZil",
)

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox-sh", "fish", "tcsh", "csh"})
# Words that start or shape a command without being the program that runs.
_KEYWORDS = frozenset(
    {"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "case", "esac",
     "in", "function", "select", "coproc", "exec", "command", "builtin", "noglob", "[[", "]]"}
)  # fmt: skip
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_ANSI_C_NUMERIC = re.compile(r"x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{1,4})|U([0-9a-fA-F]{1,8})|([0-7]{1,3})")
_IFS_EXPANSION = re.compile(r"\$\{IFS[^}]*\}|\$IFS(?![A-Za-z0-9_])")


class NulByteError(ValueError):
    """The command contains a NUL byte: no shell can receive it intact, so it is refused outright."""


def normalize(command: str) -> str:
    """The canonical form checked and run: NFKC (fullwidth letters U+FF52 U+FF4D become ``rm``,
    no-break spaces become spaces) with invisible format characters removed. Raises
    :class:`NulByteError` on NUL."""
    if "\x00" in command:
        raise NulByteError("command contains invalid NUL byte")
    text = unicodedata.normalize("NFKC", command)
    return "".join(ch for ch in text if unicodedata.category(ch) not in _INVISIBLE_CATEGORIES)


def fold_confusables(text: str) -> str:
    """``text`` with Cyrillic/Greek look-alike letters replaced by the ASCII letters they imitate."""
    return text.translate(_CONFUSABLES)


def expand_ifs(text: str) -> str:
    """``text`` with ``$IFS`` / ``${IFS…}`` replaced by a space, as word splitting would treat them."""
    return _IFS_EXPANSION.sub(" ", text)


def check_variants(command: str) -> list[str]:
    """The distinct forms of an (already normalised) command that the checks match: itself, with
    look-alike letters folded, and with ``$IFS`` expanded. Denying if any variant matches is stricter
    than checking the form that runs alone, never weaker."""
    variants = [command]
    for candidate in (fold_confusables(command), expand_ifs(command), expand_ifs(fold_confusables(command))):
        if candidate not in variants:
            variants.append(candidate)
    return variants


@dataclass(frozen=True)
class Redirect:
    """One redirection of a simple command: operator (``>``, ``>>``, ``<``, ``<>``, ``&>`` …) and target."""

    op: str
    target: str

    @property
    def writes(self) -> bool:
        return ">" in self.op and not self.op.startswith("<<")


@dataclass(frozen=True)
class SimpleCommand:
    """A program invocation as the shell would run it: unquoted words, redirections, how many
    wrapper levels were looked through to find it (0 = written directly), and the variable
    assignments written before it (``LD_PRELOAD=x ls``; unquoted ``NAME=value`` words).

    A statement made only of assignments (``PATH=.``) has no ``argv`` but keeps its assignments: it
    changes what the following commands of the same shell run.

    ``expandable`` lists the words (as in ``argv``) that hold an unquoted ``*``, ``?``, ``[`` or ``{``:
    the shell replaces them with file names or brace alternatives, so ``sort *`` may become ``sort
    -o x``. A quoted ``'*.py'`` is not in it."""

    argv: tuple[str, ...]
    redirects: tuple[Redirect, ...] = ()
    depth: int = 0
    assignments: tuple[str, ...] = ()
    expandable: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The program's base name (``/usr/bin/sudo`` → ``sudo``), or "" for a bare redirection."""
        return os.path.basename(self.argv[0]) if self.argv else ""


@dataclass
class ParsedCommand:
    """Every simple command found in a command line, nested ones included."""

    commands: list[SimpleCommand] = field(default_factory=list)
    too_deep: bool = False  # nesting beyond MAX_WRAPPER_DEPTH: callers must refuse the command
    segments: list[str] = field(default_factory=list)  # the source text of each top-level simple command


@dataclass
class _RawCommand:
    words: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    expandable: list[str] = field(default_factory=list)  # words with unquoted glob or brace characters
    start: int = 0
    end: int = 0


class _Lexer:
    """Splits shell text into raw simple commands and collects the text of nested substitutions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.commands: list[_RawCommand] = []
        self.substitutions: list[str] = []
        self.current = _RawCommand()
        self.word: list[str] = []
        self.in_word = False
        self.word_expands = False  # the word being read holds an unquoted glob or brace character
        self.pending_redirect: str | None = None
        self.overflow = False  # nesting too deep to scan: the caller refuses the command

    # -- word and command boundaries --------------------------------------------------------------
    def _end_word(self) -> None:
        if not self.in_word:
            return
        word = "".join(self.word)
        self.word = []
        self.in_word = False
        expands, self.word_expands = self.word_expands, False
        if self.pending_redirect is not None:
            op = self.pending_redirect
            self.pending_redirect = None
            # ">&2" / "<&-" duplicate or close descriptors: not files.
            if op in {">&", "<&"} and (word.isdigit() or word == "-"):
                return
            self.current.redirects.append(Redirect(op, word))
            return
        self.current.words.append(word)
        if expands:
            self.current.expandable.append(word)

    def _end_command(self, at: int) -> None:
        self._end_word()
        self.pending_redirect = None
        if self.current.words or self.current.redirects:
            self.current.end = at
            self.commands.append(self.current)
        self.current = _RawCommand(start=at + 1)

    def _append(self, chars: str) -> None:
        if not self.in_word and not self.current.words and not self.current.redirects:
            self.current.start = self.pos
        self.word.append(chars)
        self.in_word = True

    # -- scanning helpers -------------------------------------------------------------------------
    def _matching_paren(self, start: int, nesting: int = 0) -> int:
        """Index just after the ``)`` closing the group opened right before ``start``."""
        if nesting > _MAX_SCAN_NESTING:
            # "$( "$( "$( …: deeper than any real command; stop scanning and refuse the command.
            self.overflow = True
            return len(self.text)
        depth = 1
        i = start
        text = self.text
        while i < len(text):
            ch = text[i]
            if ch == "\\":
                i += 2
                continue
            if ch == "'":
                close = text.find("'", i + 1)
                i = len(text) if close < 0 else close + 1
                continue
            if ch == '"':
                i = self._skip_double_quoted(i + 1, nesting + 1)
                continue
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return len(text)

    def _matching_brace(self, start: int) -> int:
        """Index just after the ``}`` closing a ``${`` opened right before ``start`` (nesting aware)."""
        depth = 1
        i = start
        text = self.text
        while i < len(text):
            if text[i] == "\\":
                i += 2
                continue
            if text.startswith("${", i):
                depth += 1
                i += 2
                continue
            if text[i] == "}":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return len(text)

    def _skip_double_quoted(self, i: int, nesting: int = 0) -> int:
        text = self.text
        while i < len(text):
            if text[i] == "\\":
                i += 2
                continue
            if text[i] == '"':
                return i + 1
            if text.startswith("$(", i):
                i = self._matching_paren(i + 2, nesting + 1)
                continue
            i += 1
        return len(text)

    def _backtick(self, i: int) -> tuple[str, int]:
        """Text inside a backtick substitution starting after the opening backtick, and the end index."""
        text = self.text
        out: list[str] = []
        while i < len(text):
            ch = text[i]
            if ch == "\\" and i + 1 < len(text) and text[i + 1] in "`\\$":
                out.append(text[i + 1])
                i += 2
                continue
            if ch == "`":
                return "".join(out), i + 1
            out.append(ch)
            i += 1
        return "".join(out), len(text)

    def _dollar(self, i: int) -> int:
        """Handle ``$…`` at ``i`` (outside single quotes); return the index after it."""
        text = self.text
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if nxt == "(":
            end = self._matching_paren(i + 2)
            self.substitutions.append(text[i + 2 : end - 1])
            self._append(text[i:end])
            return end
        if nxt == "{":
            end = self._matching_brace(i + 2)
            # "${x:-$(sudo y)}" runs the substitution inside the expansion: read the inside as
            # commands too (bounded by the walker's recursion limit, like any substitution).
            self.substitutions.append(text[i + 2 : end - 1])
            self._append(text[i:end])
            return end
        self._append("$")
        return i + 1

    # -- main loop --------------------------------------------------------------------------------
    def run(self) -> None:
        text = self.text
        while self.pos < len(text):
            i = self.pos
            ch = text[i]
            if ch == "\\":
                # backslash-newline is a line continuation: both vanish
                if i + 1 < len(text) and text[i + 1] != "\n":
                    self._append(text[i + 1])
                self.pos = i + 2
                continue
            if ch == "'":
                close = text.find("'", i + 1)
                end = len(text) if close < 0 else close
                self._append(text[i + 1 : end])
                self.pos = end + 1
                continue
            if ch == '"':
                self.pos = self._double_quoted(i + 1)
                continue
            if ch == "$":
                if text.startswith("$'", i):
                    self.pos = self._ansi_c(i + 2)
                    continue
                if _IFS_EXPANSION.match(text, i):
                    # Unquoted $IFS splits words: "sudo${IFS}ls" is "sudo ls" to the shell.
                    self._end_word()
                    self.pos = _IFS_EXPANSION.match(text, i).end()  # type: ignore[union-attr]
                    continue
                self.pos = self._dollar(i)
                continue
            if ch == "`":
                inner, end = self._backtick(i + 1)
                self.substitutions.append(inner)
                self._append(text[i:end])
                self.pos = end
                continue
            if ch == "#" and not self.in_word:
                newline = text.find("\n", i)
                self.pos = len(text) if newline < 0 else newline
                continue
            if ch in " \t\r\v\f":
                self._end_word()
                self.pos = i + 1
                continue
            if ch in "\n;()":
                self._end_command(i)
                self.pos = i + 1
                continue
            if ch == "|":
                self._end_command(i)
                self.pos = i + 2 if text.startswith(("||", "|&"), i) else i + 1
                continue
            if ch == "&":
                if text.startswith("&>", i):
                    self._end_word()
                    op = "&>>" if text.startswith("&>>", i) else "&>"
                    self.pending_redirect = op
                    self.pos = i + len(op)
                    continue
                self._end_command(i)
                self.pos = i + 2 if text.startswith("&&", i) else i + 1
                continue
            if ch in "<>":
                if text.startswith(("<(", ">("), i):  # process substitution runs a command
                    end = self._matching_paren(i + 2)
                    self.substitutions.append(text[i + 2 : end - 1])
                    self._append(text[i:end])
                    self.pos = end
                    continue
                # A word made only of digits right before the operator is a descriptor ("2>").
                if self.in_word and "".join(self.word).isdigit():
                    self.word = []
                    self.in_word = False
                else:
                    self._end_word()
                match = re.match(r"<<<|<<-|<<|<>|<&|>>|>\||>&|<|>", text[i:])
                op = match.group(0) if match else ch
                self.pending_redirect = op
                self.pos = i + len(op)
                continue
            if ch in "*?[{":
                self.word_expands = True
            self._append(ch)
            self.pos = i + 1
        self._end_command(len(text))

    def _double_quoted(self, i: int) -> int:
        text = self.text
        out: list[str] = []
        while i < len(text):
            ch = text[i]
            if ch == "\\" and i + 1 < len(text) and text[i + 1] in '$`"\\\n':
                if text[i + 1] != "\n":
                    out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                i += 1
                break
            if text.startswith("$(", i):
                end = self._matching_paren(i + 2)
                self.substitutions.append(text[i + 2 : end - 1])
                out.append(text[i:end])
                i = end
                continue
            if ch == "`":
                inner, end = self._backtick(i + 1)
                self.substitutions.append(inner)
                out.append(text[i:end])
                i = end
                continue
            out.append(ch)
            i += 1
        self._append("".join(out))
        if not out:
            self.in_word = True  # "" is an (empty) word
        return i

    def _ansi_c(self, i: int) -> int:
        """Decode bash's ``$'…'`` quoting (``$'\\x73udo'`` is ``sudo``)."""
        text = self.text
        out: list[str] = []
        while i < len(text) and text[i] != "'":
            ch = text[i]
            if ch != "\\" or i + 1 >= len(text):
                out.append(ch)
                i += 1
                continue
            esc = text[i + 1]
            simple = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
                      "e": "\x1b", "E": "\x1b", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip
            if esc in simple:
                out.append(simple[esc])
                i += 2
                continue
            numeric = _ANSI_C_NUMERIC.match(text, i + 1)
            if numeric:
                digits = numeric.group(1) or numeric.group(2) or numeric.group(3)
                value = int(digits, 16) if digits else int(numeric.group(4), 8)
                out.append(chr(value) if value < 0x110000 else "")
                i = numeric.end()
                continue
            out.append(esc)
            i += 2
        self._append("".join(out))
        return i + 1


def _lex(text: str) -> _Lexer:
    lexer = _Lexer(text)
    lexer.run()
    return lexer


# Wrappers: programs that run another program given as their arguments. Options that take a value
# are listed so the value is not mistaken for the wrapped program.
_WRAPPER_OPTIONS_WITH_VALUE: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string", "-a", "--argv0"}),
    "nohup": frozenset(),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "--class", "-n", "--classdata", "-p", "-P", "-u", "-t"}),
    "setsid": frozenset(),
    "chrt": frozenset(),
    "taskset": frozenset(),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "xargs": frozenset({"-I", "-i", "-n", "-P", "-d", "-L", "-l", "-s", "-a", "-E", "-e", "--arg-file",
                        "--delimiter", "--max-args", "--max-procs", "--max-lines", "--max-chars"}),
    "watch": frozenset({"-n", "--interval", "-d"}),
    "flock": frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}),
    "unbuffer": frozenset(),
    "catchsegv": frozenset(),
}  # fmt: skip
# Wrappers whose first positional argument is not the program (timeout DURATION, chrt PRIO, taskset
# MASK, flock FILE): that many positionals are skipped first.
_WRAPPER_LEADING_POSITIONALS = {"timeout": 1, "chrt": 1, "taskset": 1, "flock": 1}


_BRACE_LIST = re.compile(r"\{([^{}]*,[^{}]*)\}")


def _brace_expand(word: str) -> list[str]:
    """Bash brace expansion of the first ``{a,b}`` group of ``word`` (enough to expose a hidden name)."""
    match = _BRACE_LIST.search(word)
    if match is None:
        return [word]
    head, tail = word[: match.start()], word[match.end() :]
    return [f"{head}{choice}{tail}" for choice in match.group(1).split(",")]


def _strip_prefix(words: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """Drop leading variable assignments and shell keywords: ``FOO=1 if ! sudo x`` runs ``sudo``.
    Returns the words left and the assignments dropped."""
    i = 0
    assignments: list[str] = []
    while i < len(words) and (_ASSIGNMENT.match(words[i]) or words[i] in _KEYWORDS):
        if _ASSIGNMENT.match(words[i]):
            assignments.append(words[i])
        i += 1
    return words[i:], tuple(assignments)


def _shell_script_argument(argv: list[str]) -> str | None:
    """For ``sh [opts] -c SCRIPT …`` the script text; None when the shell runs a file or stdin."""
    i = 1
    wants_script = False
    while i < len(argv):
        word = argv[i]
        if word == "--":
            i += 1
            break
        if word.startswith("-") or word.startswith("+"):
            if word in {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}:
                i += 2
                continue
            if not word.startswith("--") and "c" in word[1:]:
                wants_script = True
            i += 1
            continue
        break
    if wants_script and i < len(argv):
        return argv[i]
    return None


class _Walker:
    """Turns raw commands into :class:`SimpleCommand` s, looking through wrappers and substitutions."""

    def __init__(self) -> None:
        self.result = ParsedCommand()
        # The expandable words of the raw command being visited (wrappers pass their words on).
        self.expandable: tuple[str, ...] = ()

    def parse_text(self, text: str, depth: int, recursion: int, *, top: bool = False) -> None:
        if recursion > _MAX_RECURSION:
            self.result.too_deep = True
            return
        lexer = _lex(text)
        if lexer.overflow:
            self.result.too_deep = True
        for raw in lexer.commands:
            if top:
                self.result.segments.append(text[raw.start : raw.end].strip())
            words, assignments = _strip_prefix(raw.words)
            outer, self.expandable = self.expandable, tuple(raw.expandable)
            self.visit(words, tuple(raw.redirects), depth, recursion, assignments)
            self.expandable = outer
        for inner in lexer.substitutions:
            self.parse_text(inner, depth, recursion + 1)

    def nested(self, text: str, depth: int, recursion: int) -> None:
        """A string that a wrapper hands to a shell: one more wrapper level."""
        if depth + 1 > MAX_WRAPPER_DEPTH:
            self.result.too_deep = True
            return
        self.parse_text(text, depth + 1, recursion + 1)

    def wrapped(self, argv: list[str], depth: int, recursion: int) -> None:
        """The program a wrapper runs: one more wrapper level."""
        if not argv:
            return
        if depth + 1 > MAX_WRAPPER_DEPTH:
            self.result.too_deep = True
            return
        words, assignments = _strip_prefix(argv)
        self.visit(words, (), depth + 1, recursion + 1, assignments)

    def visit(
        self,
        argv: list[str],
        redirects: tuple[Redirect, ...],
        depth: int,
        recursion: int,
        assignments: tuple[str, ...] = (),
    ) -> None:
        if recursion > _MAX_RECURSION:
            self.result.too_deep = True
            return
        if not argv and not redirects and not assignments:
            return
        if argv and _BRACE_LIST.search(argv[0]):
            # "{sudo,ls}" is brace-expanded by bash into the two words "sudo ls".
            argv = [*_brace_expand(argv[0]), *argv[1:]]
        expandable = tuple(word for word in self.expandable if word in argv)
        self.result.commands.append(SimpleCommand(tuple(argv), redirects, depth, assignments, expandable))
        if not argv:
            return
        name = os.path.basename(argv[0])
        if name == "busybox" and len(argv) > 1:  # "busybox sh -c …", "busybox rm -rf /"
            self.visit(argv[1:], (), depth, recursion + 1)
            return
        if name in SHELLS:
            script = _shell_script_argument(argv)
            if script is not None:
                self.nested(script, depth, recursion)
            for redirect in redirects:  # sh <<< "sudo x" feeds a script on stdin
                if redirect.op == "<<<":
                    self.nested(redirect.target, depth, recursion)
            return
        if name == "eval":
            self.nested(" ".join(argv[1:]), depth, recursion)
            return
        if name == "find":
            self._find_exec(argv, depth, recursion)
            return
        if name in {"script"}:  # script -c "cmd"
            for index, word in enumerate(argv[:-1]):
                if word in {"-c", "--command"}:
                    self.nested(argv[index + 1], depth, recursion)
            return
        if name in _WRAPPER_OPTIONS_WITH_VALUE:
            self._wrapper(name, argv, depth, recursion)

    def _wrapper(self, name: str, argv: list[str], depth: int, recursion: int) -> None:
        with_value = _WRAPPER_OPTIONS_WITH_VALUE[name]
        positionals_to_skip = _WRAPPER_LEADING_POSITIONALS.get(name, 0)
        i = 1
        while i < len(argv):
            word = argv[i]
            if word == "--":
                i += 1
                break
            if name == "env" and (word in {"-S", "--split-string"} or word.startswith("--split-string=")):
                # env -S 'sudo x' splits the string into a command line of its own.
                value = word.split("=", 1)[1] if "=" in word else (argv[i + 1] if i + 1 < len(argv) else "")
                self.nested(" ".join([value, *argv[i + 2 :]]), depth, recursion)
                return
            if name == "flock" and word in {"-c", "--command"} and i + 1 < len(argv):
                self.nested(argv[i + 1], depth, recursion)
                return
            if name == "env" and word == "-":  # "env -" is "env -i"
                i += 1
                continue
            if word.startswith("-") and len(word) > 1:
                # "-n 10" takes a value; "-10", "-i", "--signal=KILL" stand alone.
                i += 2 if word in with_value else 1
                continue
            if name == "env" and _ASSIGNMENT.match(word):
                i += 1
                continue
            if positionals_to_skip:
                positionals_to_skip -= 1
                i += 1
                continue
            break
        self.wrapped(argv[i:], depth, recursion)

    def _find_exec(self, argv: list[str], depth: int, recursion: int) -> None:
        """``find … -exec CMD {} ;`` runs CMD (also -execdir, -ok, -okdir)."""
        i = 0
        while i < len(argv):
            if argv[i] in {"-exec", "-execdir", "-ok", "-okdir"}:
                end = i + 1
                while end < len(argv) and argv[end] not in {";", "+"}:
                    end += 1
                self.wrapped(argv[i + 1 : end], depth, recursion)
                i = end
            i += 1


def parse(command: str) -> ParsedCommand:
    """Every simple command that ``command`` would run, looking through chains, substitutions and
    wrappers. The command should already be :func:`normalize` d."""
    walker = _Walker()
    walker.parse_text(command, 0, 0, top=True)
    return walker.result


def iter_all_commands(command: str) -> Iterator[tuple[str, ParsedCommand]]:
    """The parse of every checking variant of a normalised command (see :func:`check_variants`)."""
    for variant in check_variants(command):
        yield variant, parse(variant)
