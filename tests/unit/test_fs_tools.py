"""The fs tools (read_file, write_file, edit, list_files, search, glob) on a real temporary workspace."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from apps.accounts import services
from apps.runtime.tools import fs
from apps.tenants.actors import Actor
from apps.toolkit import registry, vfs
from apps.toolkit.context import CallContext
from apps.toolkit.results import ToolResult
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOP-SECRET-MARKER\n")
    return workspace


@pytest.fixture
def make_ctx(tenant_a, ws):
    agent = services.agent_create(actor=Actor.system(tenant_a), key="fs-agent", name="FS agent")

    def make(tool_settings=None) -> CallContext:
        return factories.call_context(tenant_a, agent, ws, tool_settings=tool_settings)

    return make


@pytest.fixture
def ctx(make_ctx) -> CallContext:
    return make_ctx()


@pytest.fixture
def disk_memory():
    """The disk's own rule for memory/ (the memory interceptor, which serves those paths from the
    database, set aside)."""
    from apps.memory.interceptor import INTERCEPTOR

    vfs.unregister(INTERCEPTOR.name)
    yield
    vfs.register(INTERCEPTOR, order=20)


def call(ctx: CallContext, name: str, **args) -> ToolResult:
    implementation = registry.implementation(name)
    assert implementation is not None, f"{name} is not registered"
    return implementation(ctx, args)


def ok(result: ToolResult) -> str:
    assert not result.is_error, result.for_llm
    return result.for_llm


def err(result: ToolResult) -> str:
    assert result.is_error, result.for_llm
    return result.for_llm


def test_all_six_tools_are_registered():
    assert {"read_file", "write_file", "edit", "list_files", "search", "glob"} <= registry.implemented()


# --- read_file ----------------------------------------------------------------------------------------


def test_read_file_numbers_lines(ctx, ws):
    (ws / "a.txt").write_text("one\ntwo\nthree\n")
    assert ok(call(ctx, "read_file", path="a.txt")) == "     1\tone\n     2\ttwo\n     3\tthree"


def test_read_file_offset_and_limit_tell_how_to_continue(ctx, ws):
    (ws / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    text = ok(call(ctx, "read_file", path="a.txt", offset=3, limit=2))
    assert text.startswith("     3\tline 3\n     4\tline 4\n")
    assert "line 5" not in text
    assert "offset=5" in text
    assert "line 10" in ok(call(ctx, "read_file", path="a.txt", offset=10))


def test_read_file_default_limit_is_2000_lines(ctx, ws):
    (ws / "big.txt").write_text("".join(f"{n}\n" for n in range(1, 2501)))
    result = call(ctx, "read_file", path="big.txt")
    assert result.data["last_line"] == 2000
    assert "offset=2001" in ok(result)
    assert "  2001\t" not in result.for_llm


def test_read_file_truncates_long_lines_at_2000_chars(ctx, ws):
    (ws / "long.txt").write_text("x" * 5000 + "\nshort\n")
    text = ok(call(ctx, "read_file", path="long.txt"))
    first = text.split("\n")[0]
    assert first.count("x") == 2000
    assert "line truncated at 2000 characters" in first
    assert "short" in text


def test_read_file_skips_the_rest_of_a_line_longer_than_the_buffer(ctx, ws):
    (ws / "huge.txt").write_bytes(b"y" * (fs.READ_LINE_BUFFER * 2 + 10) + b"\nnext\n")
    text = ok(call(ctx, "read_file", path="huge.txt"))
    assert "     2\tnext" in text


def test_read_file_caps_total_output(ctx, ws):
    (ws / "wide.txt").write_text(("z" * 1999 + "\n") * 300)  # 600 KB of text
    result = call(ctx, "read_file", path="wide.txt")
    assert len(ok(result)) < fs.READ_MAX_CHARS + 500
    assert result.data["truncated"] is True
    assert f"offset={result.data['last_line'] + 1}" in result.for_llm


@pytest.mark.parametrize("name", ["photo.png", "archive.tar.gz", "Report.PDF", "lib.so"])
def test_read_file_refuses_binary_extensions(ctx, ws, name):
    (ws / name).write_bytes(b"not really binary")
    assert "binary file" in err(call(ctx, "read_file", path=name))


def test_read_file_refuses_binary_content(ctx, ws):
    (ws / "blob.dat").write_bytes(b"abc\x00def")
    assert "binary" in err(call(ctx, "read_file", path="blob.dat"))


def test_read_file_empty_missing_directory_and_past_end(ctx, ws):
    (ws / "empty.txt").write_text("")
    (ws / "d").mkdir()
    (ws / "one.txt").write_text("a\nb\n")
    assert "is empty" in ok(call(ctx, "read_file", path="empty.txt"))
    assert "file not found: nope.txt" in err(call(ctx, "read_file", path="nope.txt"))
    assert "list_files or glob" in err(call(ctx, "read_file", path="nope.txt"))
    assert "is a directory" in err(call(ctx, "read_file", path="d"))
    assert "past the end of one.txt (it has 2 lines)" in err(call(ctx, "read_file", path="one.txt", offset=5))


def test_read_file_refuses_escapes_and_sensitive_paths(ctx, ws, tmp_path):
    os.symlink(tmp_path / "outside", ws / "out")
    (ws / ".ssh").mkdir()
    (ws / ".ssh" / "id_rsa").write_text("KEY")
    for path in ("../outside/secret.txt", "out/secret.txt", str(tmp_path / "outside/secret.txt")):
        message = err(call(ctx, "read_file", path=path))
        assert "outside workspace" in message
        assert "TOP-SECRET" not in message
    assert "sensitive path" in err(call(ctx, "read_file", path=".ssh/id_rsa"))


def test_read_file_refuses_a_hardlink_to_an_outside_file(ctx, ws, tmp_path):
    os.link(tmp_path / "outside" / "secret.txt", ws / "innocent.txt")
    message = err(call(ctx, "read_file", path="innocent.txt"))
    assert "hardlinked" in message
    assert "TOP-SECRET" not in message


def test_read_file_refuses_a_fifo_without_blocking(ctx, ws):
    os.mkfifo(ws / "pipe")
    assert "not a regular file" in err(call(ctx, "read_file", path="pipe"))


def test_read_file_denied_prefixes_default_and_configured(make_ctx, ws, disk_memory):
    (ws / "memory").mkdir()
    (ws / "memory" / "x.md").write_text("m")
    (ws / "private").mkdir()
    (ws / "private" / "p.txt").write_text("p")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref: main")
    plain = make_ctx()
    assert "is restricted" in err(call(plain, "read_file", path="memory/x.md"))
    assert "ref: main" in ok(call(plain, "read_file", path=".git/HEAD"))  # .git is hidden from writes only
    configured = make_ctx({"read_file": {"denied_prefixes": ["private/"]}})
    assert "is restricted" in err(call(configured, "read_file", path="private/p.txt"))
    assert "is restricted" in err(call(configured, "read_file", path="memory/x.md"))  # added, not replaced
    broken = make_ctx({"read_file": {"denied_prefixes": "private/"}})
    assert "misconfigured" in err(call(broken, "read_file", path="private/p.txt"))


def test_read_file_argument_checks(ctx, ws):
    (ws / "a.txt").write_text("a")
    assert "must be an integer" in err(call(ctx, "read_file", path="a.txt", offset=0))
    assert "must be a string" in err(call(ctx, "read_file", path=5))
    assert "NUL byte" in err(call(ctx, "read_file", path="a\x00.txt"))


# --- write_file ---------------------------------------------------------------------------------------


def test_write_file_creates_parents_and_private_files(ctx, ws):
    result = call(ctx, "write_file", path="a/b/c/note.md", content="héllo\n")
    assert ok(result) == "Wrote 7 bytes to a/b/c/note.md."
    assert (ws / "a/b/c/note.md").read_text() == "héllo\n"
    assert stat.S_IMODE((ws / "a/b/c/note.md").stat().st_mode) == 0o600
    assert stat.S_IMODE((ws / "a/b").stat().st_mode) == 0o700


def test_write_file_replaces_and_appends_without_leaving_temporaries(ctx, ws):
    ok(call(ctx, "write_file", path="log.txt", content="first\n"))
    ok(call(ctx, "write_file", path="log.txt", content="second\n"))
    assert (ws / "log.txt").read_text() == "second\n"
    assert "now 13 bytes" in ok(call(ctx, "write_file", path="log.txt", content="third\n", append=True))
    assert (ws / "log.txt").read_text() == "second\nthird\n"
    ok(call(ctx, "write_file", path="fresh.txt", content="new", append=True))
    assert (ws / "fresh.txt").read_text() == "new"
    assert sorted(p.name for p in ws.iterdir()) == ["fresh.txt", "log.txt"]


def test_write_file_keeps_an_existing_files_mode(ctx, ws):
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    ok(call(ctx, "write_file", path="run.sh", content="#!/bin/sh\necho hi\n"))
    assert stat.S_IMODE(script.stat().st_mode) == 0o750


def test_write_file_size_caps(ctx, ws, monkeypatch):
    monkeypatch.setattr(fs, "MAX_FILE_BYTES", 10)
    assert "at most 10 bytes" in err(call(ctx, "write_file", path="big.txt", content="x" * 11))
    assert not (ws / "big.txt").exists()
    ok(call(ctx, "write_file", path="grow.txt", content="x" * 8))
    assert "capped at 10 bytes" in err(call(ctx, "write_file", path="grow.txt", content="yyy", append=True))
    assert (ws / "grow.txt").read_text() == "x" * 8


def test_write_file_refuses_escapes_and_writes_nothing_outside(ctx, ws, tmp_path):
    os.symlink(tmp_path / "outside", ws / "out")
    os.symlink("/nonexistent-toolgate/new", ws / "dangling")
    for path in ("../outside/new.txt", "out/new.txt", str(tmp_path / "outside" / "new.txt"), "dangling"):
        assert "access denied" in err(call(ctx, "write_file", path=path, content="pwned"))
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["secret.txt"]


def test_write_file_refuses_a_hardlink_and_leaves_its_other_name_alone(ctx, ws, tmp_path):
    os.link(tmp_path / "outside" / "secret.txt", ws / "linked.txt")
    for append in (False, True):
        assert "hardlinked" in err(call(ctx, "write_file", path="linked.txt", content="pwned", append=append))
    assert (tmp_path / "outside" / "secret.txt").read_text() == "TOP-SECRET-MARKER\n"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (".git/hooks/pre-commit", "is restricted"),
        (".git/config", "is restricted"),
        ("sub/.git/config", "is restricted"),
        ("sub/dir/.git/hooks/pre-commit", "is restricted"),
        ("./x/.git/hooks/post-checkout", "is restricted"),
        ("memory/notes.md", "is restricted"),
        (".bashrc", "sensitive path"),
        ("project/.ssh/authorized_keys", "sensitive path"),
        (".docker/config.json", "sensitive path"),
    ],
)
def test_write_file_refuses_denied_and_sensitive_paths(ctx, ws, path, message, disk_memory):
    assert message in err(call(ctx, "write_file", path=path, content="x"))
    assert not (ws / path).exists()


def test_write_file_to_a_directory_or_through_a_file(ctx, ws):
    (ws / "d").mkdir()
    (ws / "f.txt").write_text("f")
    assert "is a directory" in err(call(ctx, "write_file", path="d", content="x"))
    assert "is a directory" in err(call(ctx, "write_file", path=".", content="x"))
    assert "not a directory" in err(call(ctx, "write_file", path="f.txt/x", content="x"))


# --- edit ---------------------------------------------------------------------------------------------


def test_edit_replaces_one_exact_match(ctx, ws):
    (ws / "app.py").write_text("a = 1\nb = 2\n")
    assert ok(call(ctx, "edit", path="app.py", old_string="b = 2", new_string="b = 3")) == (
        "Edited app.py: replaced 1 occurrence (first at line 2)."
    )
    assert (ws / "app.py").read_text() == "a = 1\nb = 3\n"


def test_edit_refuses_ambiguous_matches_unless_replace_all(ctx, ws):
    (ws / "x.txt").write_text("foo\nbar\nfoo\nfoo\n")
    message = err(call(ctx, "edit", path="x.txt", old_string="foo", new_string="baz"))
    assert "occurs 3 times" in message
    assert "lines 1, 3, 4" in message
    assert "replace_all=true" in message
    assert (ws / "x.txt").read_text() == "foo\nbar\nfoo\nfoo\n"
    assert "3 occurrences" in ok(
        call(ctx, "edit", path="x.txt", old_string="foo", new_string="baz", replace_all=True)
    )
    assert (ws / "x.txt").read_text() == "baz\nbar\nbaz\nbaz\n"


def test_edit_not_found_gives_a_hint(ctx, ws):
    (ws / "m.py").write_text("def f():\n    return 1\n")
    assert "whitespace or indentation exists at line 1" in err(
        call(ctx, "edit", path="m.py", old_string="def f():\n  return 1", new_string="x")
    )
    assert "line-number prefixes" in err(
        call(ctx, "edit", path="m.py", old_string="     2\t    return 1", new_string="x")
    )
    message = err(call(ctx, "edit", path="m.py", old_string="nothing like it", new_string="x"))
    assert "was not found in m.py" in message
    assert "read_file" in message
    assert (ws / "m.py").read_text() == "def f():\n    return 1\n"


def test_edit_argument_and_file_checks(ctx, ws):
    (ws / "t.txt").write_text("text")
    (ws / "b.bin").write_bytes(b"\x00\x01text")
    (ws / "latin.txt").write_bytes("café".encode("latin-1"))
    assert "old_string is empty" in err(call(ctx, "edit", path="t.txt", old_string="", new_string="x"))
    assert "the same" in err(call(ctx, "edit", path="t.txt", old_string="text", new_string="text"))
    assert "binary" in err(call(ctx, "edit", path="b.bin", old_string="text", new_string="x"))
    assert "not UTF-8" in err(call(ctx, "edit", path="latin.txt", old_string="caf", new_string="x"))
    assert "file not found" in err(call(ctx, "edit", path="none.txt", old_string="a", new_string="b"))


def test_edit_refuses_denied_sensitive_and_linked_files(ctx, ws, tmp_path):
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]")
    os.link(tmp_path / "outside" / "secret.txt", ws / "hl.txt")
    assert "is restricted" in err(call(ctx, "edit", path=".git/config", old_string="core", new_string="x"))
    assert "is restricted" in err(call(ctx, "edit", path="a/.git/config", old_string="core", new_string="x"))
    assert "hardlinked" in err(call(ctx, "edit", path="hl.txt", old_string="TOP", new_string="x"))
    assert "sensitive path" in err(call(ctx, "edit", path=".zshrc", old_string="a", new_string="b"))
    assert (tmp_path / "outside" / "secret.txt").read_text() == "TOP-SECRET-MARKER\n"


# --- list_files ---------------------------------------------------------------------------------------


@pytest.fixture
def project(ws, tmp_path) -> Path:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "mod.py").write_text("import os\n")
    (ws / "src" / "main.py").write_text("print('hi')\n")
    (ws / "README.md").write_text("# readme\n")
    (ws / "node_modules" / "lib").mkdir(parents=True)
    (ws / "node_modules" / "lib" / "index.js").write_text("needle\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("needle\n")
    (ws / ".ssh").mkdir()
    (ws / ".ssh" / "id_rsa").write_text("needle\n")
    (ws / "memory").mkdir()
    (ws / "memory" / "m.md").write_text("needle\n")
    os.symlink(tmp_path / "outside", ws / "escape")
    return ws


def test_list_files_shows_entries_and_hides_denied_and_sensitive_ones(ctx, project):
    text = ok(call(ctx, "list_files"))
    lines = text.split("\n")
    assert lines[0].startswith("./ (")
    assert "README.md  (9 bytes)" in lines
    assert "src/" in lines
    assert "escape@  (symlink; tools do not follow it)" in lines
    for hidden in (".git", ".ssh", "memory"):
        assert hidden not in text


def test_list_files_recursive_does_not_expand_junk_or_follow_links(ctx, project):
    text = ok(call(ctx, "list_files", path=".", recursive=True))
    assert "src/pkg/mod.py  (10 bytes)" in text
    assert "node_modules/  (not expanded)" in text
    assert "index.js" not in text
    assert "secret.txt" not in text
    sub = ok(call(ctx, "list_files", path="src", recursive=True))
    assert "pkg/mod.py  (10 bytes)" in sub.split("\n")


def test_list_files_configured_denied_prefix_is_omitted(make_ctx, project):
    text = ok(call(make_ctx({"list_files": {"denied_prefixes": ["src/pkg"]}}), "list_files", recursive=True))
    assert "src/main.py" in text
    assert "pkg" not in text


def test_list_files_is_bounded(ctx, ws, monkeypatch):
    monkeypatch.setattr(fs, "LIST_MAX_ENTRIES", 5)
    for n in range(12):
        (ws / f"f{n:02}.txt").write_text("x")
    result = call(ctx, "list_files")
    assert len(ok(result).split("\n")) == 1 + 5 + 1
    assert "listing stopped at 5 entries" in result.for_llm
    assert result.data["truncated"] is True


def test_list_files_errors(ctx, project):
    assert "is a file" in err(call(ctx, "list_files", path="README.md"))
    assert "directory not found" in err(call(ctx, "list_files", path="nope"))
    assert "outside workspace" in err(call(ctx, "list_files", path="escape"))
    assert "is restricted" in err(call(ctx, "list_files", path=".git"))
    (project / "empty").mkdir()
    assert "empty is empty" in ok(call(ctx, "list_files", path="src/pkg/../../empty"))


# --- search -------------------------------------------------------------------------------------------


def test_search_finds_lines_and_skips_junk_binaries_and_hidden_files(ctx, project):
    (project / "src" / "data.bin").write_bytes(b"needle\x00")
    (project / "src" / "notes.txt").write_text("first\nthe needle here\n")
    text = ok(call(ctx, "search", pattern="needle"))
    assert text.split("\n")[0] == "src/notes.txt:2: the needle here"
    for never in ("node_modules", ".git", ".ssh", "memory/", "data.bin", "TOP-SECRET"):
        assert never not in text
    assert "1 files skipped" in text


def test_search_case_glob_path_and_limit(ctx, project):
    (project / "src" / "a.py").write_text("Alpha\nalpha\nALPHA\n")
    (project / "src" / "a.txt").write_text("alpha\n")
    assert ok(call(ctx, "search", pattern="alpha", glob="*.py")) == "src/a.py:2: alpha"
    insensitive = ok(call(ctx, "search", pattern="alpha", glob="*.py", case_insensitive=True))
    assert insensitive.count("src/a.py:") == 3
    limited = ok(call(ctx, "search", pattern="alpha", case_insensitive=True, limit=2))
    assert "more than 2 matches" in limited
    assert ok(call(ctx, "search", pattern="^alpha$", path="src/a.txt")) == "src/a.txt:1: alpha"
    assert "No matches" in ok(call(ctx, "search", pattern="zzz", path="src"))
    assert ok(call(ctx, "search", pattern="import", glob="src/**/*.py")) == "src/pkg/mod.py:1: import os"


def test_search_rejects_bad_patterns(ctx, project):
    assert "invalid regular expression" in err(call(ctx, "search", pattern="(unclosed"))
    assert "pattern is empty" in err(call(ctx, "search", pattern=""))
    assert "longer than" in err(call(ctx, "search", pattern="a" * 1001))
    assert "outside workspace" in err(call(ctx, "search", pattern="x", path="escape"))


@pytest.mark.parametrize("pattern", ["(a|aa)+$", "((a|aa)+)+x", "([a-z]|a)+\\d"])
def test_search_times_out_on_catastrophic_backtracking(ctx, ws, monkeypatch, pattern):
    monkeypatch.setattr(fs, "SEARCH_TIMEOUT_SECONDS", 1.0)
    (ws / "evil.txt").write_text("a" * 60 + "!\n")
    started = time.monotonic()
    message = err(call(ctx, "search", pattern=pattern))
    assert "timed out after 1s" in message
    assert "Simplify the pattern" in message
    assert time.monotonic() - started < 3  # stopped by the timeout, not by finishing


def test_search_runs_in_process_and_the_deadline_covers_all_files(ctx, ws, monkeypatch):
    """Many files each cheap to search: the budget is for the whole search, not per line or file."""
    monkeypatch.setattr(fs, "SEARCH_TIMEOUT_SECONDS", 0.0)
    (ws / "one.txt").write_text("needle\n")
    assert "timed out after 0s" in err(call(ctx, "search", pattern="needle"))
    monkeypatch.setattr(fs, "SEARCH_TIMEOUT_SECONDS", 10.0)
    started = time.monotonic()
    assert ok(call(ctx, "search", pattern="need+le")) == "one.txt:1: needle"
    assert time.monotonic() - started < 0.5


def test_search_skips_files_over_the_size_cap(ctx, ws, monkeypatch):
    monkeypatch.setattr(fs, "SEARCH_MAX_FILE_BYTES", 100)
    (ws / "big.txt").write_text("needle\n" * 50)
    (ws / "small.txt").write_text("needle\n")
    text = ok(call(ctx, "search", pattern="needle"))
    assert text.startswith("small.txt:1: needle")
    assert "1 files skipped" in text


# --- glob ---------------------------------------------------------------------------------------------


def test_glob_recurses_with_double_star_and_sorts_newest_first(ctx, project):
    os.utime(project / "src" / "main.py", (1_000_000, 1_000_000))
    os.utime(project / "src" / "pkg" / "mod.py", (2_000_000, 2_000_000))
    assert ok(call(ctx, "glob", pattern="**/*.py")) == "src/pkg/mod.py\nsrc/main.py"
    assert ok(call(ctx, "glob", pattern="*.py", path="src")) == "src/main.py"
    assert ok(call(ctx, "glob", pattern="*.{md,py}")) == "README.md"


def test_glob_skips_junk_dot_dirs_and_denied_entries(ctx, project):
    (project / "vendor").mkdir()
    (project / "vendor" / "v.js").write_text("")
    (project / "__pycache__").mkdir()
    (project / "__pycache__" / "c.js").write_text("")
    (project / ".hidden").mkdir()
    (project / ".hidden" / "h.js").write_text("")
    assert "No files match" in ok(call(ctx, "glob", pattern="**/*.js"))
    assert "memory/m.md" not in ok(call(ctx, "glob", pattern="**/*.md"))
    everything = ok(call(ctx, "glob", pattern="**/*")).split("\n")
    assert sorted(everything) == ["README.md", "src/", "src/main.py", "src/pkg/", "src/pkg/mod.py"]


def test_glob_hints_and_refusals(ctx, project):
    assert "use '**/*.py'" in ok(call(ctx, "glob", pattern="*.py"))
    assert "must be relative" in err(call(ctx, "glob", pattern="../**/*"))
    assert "must be relative" in err(call(ctx, "glob", pattern="/etc/*"))
    assert "outside workspace" in err(call(ctx, "glob", pattern="*", path="escape"))
    assert "is restricted" in err(call(ctx, "glob", pattern="*", path="memory"))


def test_glob_limit(ctx, ws):
    for n in range(5):
        (ws / f"f{n}.txt").write_text("x")
    result = call(ctx, "glob", pattern="*.txt", limit=2)
    assert len(ok(result).split("\n")) == 3
    assert "3 more matches" in result.for_llm


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.py", "a.py", True),
        ("**/*.py", "x/y/a.py", True),
        ("*.py", "x/a.py", False),
        ("src/**", "src/a/b", True),
        ("a?.txt", "ab.txt", True),
        ("a?.txt", "a/.txt", False),
        ("[!a]*.md", "b.md", True),
        ("[!a]*.md", "a.md", False),
        ("*.{js,ts}", "x.ts", True),
        ("file(1).txt", "file(1).txt", True),
    ],
)
def test_glob_regex(pattern, path, matches):
    assert bool(fs.glob_regex(pattern).match(path)) is matches
