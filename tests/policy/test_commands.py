"""Command classification (apps.policy.commands) and the decision table of B §6.2 (apps.policy.approvals)."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import replace

import pytest

from apps.accounts import services
from apps.policy import approvals, engine
from apps.policy.approval_models import ApprovalRule
from apps.policy.commands import classify
from apps.policy.engine import CallScope
from apps.policy.safe_bins import SAFE_BINS
from apps.tenants.actors import Actor
from apps.toolkit.processes import SAFE_PATH

LS = os.path.realpath(shutil.which("ls", path=SAFE_PATH) or "")
GIT = shutil.which("git", path=SAFE_PATH)


@pytest.fixture
def cwd(tmp_path):
    """A workspace holding an executable called ``ls`` (another binary with ls's basename)."""
    fake = tmp_path / "ls"
    fake.write_text("#!/bin/sh\necho evil\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return str(tmp_path)


def commands(command, cwd="/"):
    result = classify(command, cwd=cwd, path_env=SAFE_PATH)
    assert not result.invalid, result.invalid
    return result.commands


def by_name(command, cwd="/"):
    return {c.text: c for c in commands(command, cwd)}


# --- paths and shapes -----------------------------------------------------------------------------------


def test_a_program_is_resolved_on_the_path_and_shaped_by_its_real_path():
    (ls,) = commands("ls -la /tmp")
    assert ls.binary_path == LS
    assert ls.on_path
    assert ls.shape == f"{LS} -a -l *"
    assert ls.safe


def test_a_path_with_a_slash_is_resolved_against_the_working_directory(cwd):
    (fake,) = commands("./ls -la", cwd)
    assert fake.binary_path == os.path.join(os.path.realpath(cwd), "ls")
    assert fake.binary_path != LS
    assert not fake.on_path
    assert not fake.safe  # same basename, different binary
    assert fake.shape.startswith(fake.binary_path + " ")


def test_an_unknown_program_has_no_path_and_a_marked_shape():
    (evil,) = commands("evil --flag x")
    assert evil.binary_path is None
    assert evil.shape == "?evil --flag *"
    assert not evil.safe


@pytest.mark.parametrize(
    ("command", "shape_tail"),
    [
        ("sort notes.txt", "*"),
        ("sort -o out notes.txt", "-o *"),
        ("sort --output=out notes.txt", "--output= *"),
        ("head -5 file", "-N *"),
        ("head -n10 file", "-n *"),
        ("ls", ""),
        ("ls > listing", ">"),
        ("grep -rn x .", "-n -r *"),
        ("grep -- -r file", "*"),
    ],
)
def test_shapes_keep_flags_and_generalise_arguments(command, shape_tail):
    (first, *_rest) = commands(command)
    expected = f"{first.binary_path} {shape_tail}".rstrip()
    assert first.shape == expected


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_a_subcommand_is_part_of_the_shape():
    (log,) = commands("git log --oneline -n 5")
    assert log.shape == f"{os.path.realpath(GIT or '')} log --oneline -n *"
    (push,) = commands("git push origin main")
    assert push.shape.endswith(" push *")


def test_the_same_command_with_other_arguments_has_the_same_shape():
    assert commands("cat a.txt")[0].shape == commands("cat /etc/hostname other")[0].shape


# --- every command of a chain, through wrappers ---------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "ls && evil",
        "ls; evil",
        "ls | evil",
        "ls || evil",
        "env sh -c evil",
        "env sh -c 'ls; evil'",
        "timeout 5 evil",
        "nohup evil",
        "xargs evil",
        "find . -exec evil {} ;",
        "echo $(evil)",
        "echo `evil`",
        "cat <(evil)",
        "bash -c 'sh -c evil'",
    ],
)
def test_a_hidden_command_is_classified_on_its_own(command):
    found = by_name(command)
    assert any(c.argv[0] == "evil" for c in found.values()), found
    assert not all(c.safe for c in found.values())


@pytest.mark.parametrize(
    "command",
    [
        "sort -o f x",
        "sort --output=f x",
        "sed -i s/a/b/ f",
        "sed --in-place s/a/b/ f",
        "sed 's/a/b/w out' f",
        "sed -n 1e f",
        "find . -delete",
        "find . -exec rm {} ;",
        "find . -fprint out",
        "grep -R secret /",
        "grep -r x .",
        "tee out",
        "xargs ls",
        "uniq in out",
        "date -s 2020-01-01",
        "hostname evil",
        "ls > out",
        "cat a >> b",
        "awk '{print}' f",
        "python3 -c 'print(1)'",
        "pip install requests",
        "npm install left-pad",
        "make",
        "patch -p1",
    ],
)
def test_write_forms_interpreters_and_package_managers_are_never_safe(command):
    first = commands(command)[0]
    assert not first.safe, first


@pytest.mark.parametrize(
    "command",
    ["ls -la", "cat a b", "grep -n x file", "sort -r f", "sed -n 1,5p f", "sed s/a/b/g f", "head -5 f",
     "wc -l f", "find . -name '*.py'", "uniq f", "date", "echo hi", "jq .a f", "cut -d, -f1 f", "diff a b"],
)  # fmt: skip
def test_read_only_uses_of_safe_bins_are_safe(command):
    classified = commands(command)
    assert all(c.safe for c in classified), classified


# --- every safe program, table-driven: the forms that write, run programs or read through an option ---
# Each row: a command line and a fragment of the reason it is not safe. Abbreviated long options are read
# as getopt_long reads them (an unambiguous prefix is the option).

HOSTILE_FORMS: dict[str, list[tuple[str, str]]] = {
    "sort": [
        ("sort -o out f", "-o writes"),
        ("sort -oout f", "-o writes"),
        ("sort -ro out f", "-o writes"),
        ("sort f -o out", "-o writes"),  # options after operands (GNU permutation)
        ("sort --output=out f", "--output writes"),
        ("sort --output out f", "--output writes"),
        ("sort --out=out f", "--output writes"),
        ("sort --o=out f", "--output writes"),
        ("sort --compress-program=sh f", "--compress-program runs"),
        ("sort --compress-prog=sh f", "--compress-program runs"),
        ("sort --comp sh f", "--compress-program runs"),
        ("sort --c=sh f", "ambiguous"),  # --check or --compress-program: getopt refuses, so do we
        ("sort --files0-from=list", "--files0-from reads"),
        ("sort --files0=list", "--files0-from reads"),
        ("sort -T /tmp/x f", "-T writes"),
        ("sort --temp=/tmp/x f", "--temporary-directory writes"),
        ("sort --no-such-option f", "unknown"),
        # an unquoted glob or brace word: the workspace's file names become options ("-o", "--compress…")
        ("sort *", "can expand to file names read as options"),
        ("sort -n *.txt", "can expand to file names read as options"),
        ("sort {-o,out} f", "can expand to file names read as options"),
    ],
    "uniq": [
        ("uniq in out", "second operand"),
        ("uniq -c in out", "second operand"),
        ("uniq in -c out", "second operand"),
        ("uniq --skip-f=1 in out", "second operand"),
        ("uniq x*", "second operand"),  # two matches make an output file
    ],
    "grep": [
        ("grep -r x .", "-r searches"),
        ("grep -R x .", "-R searches"),
        ("grep -nri x .", "-r searches"),
        ("grep --recursive x .", "--recursive searches"),
        ("grep --rec x .", "--recursive searches"),
        ("grep --dereference-recursive x .", "--dereference-recursive searches"),
        ("grep --deref x .", "--dereference-recursive searches"),
        ("grep -d recurse x .", "searches recursively"),
        ("grep -drecurse x .", "searches recursively"),
        ("grep --directories=recurse x .", "searches recursively"),
        ("grep --dir=rec x .", "searches recursively"),
        ("grep -D read x /dev/zero", "-D reads devices"),
        ("grep --devices=read x f", "--devices reads devices"),
        ("grep --pre=sh x f", "unknown"),  # ripgrep's preprocessor option: not GNU grep's
        ("grep foo *", "can expand to file names read as options"),  # a file named "-r"
        ("grep foo ?.py", "can expand to file names read as options"),
    ],
    "find": [
        ("find . -exec sh -c id ;", "-exec runs"),
        ("find . -execdir id ;", "-execdir runs"),
        ("find . -ok id ;", "-ok runs"),
        ("find . -okdir id ;", "-okdir runs"),
        ("find . -delete", "-delete deletes"),
        ("find . -fprint out", "-fprint writes"),
        ("find . -fprint0 out", "-fprint0 writes"),
        ("find . -fprintf out %p", "-fprintf writes"),
        ("find . -fls out", "-fls writes"),
        ("find -files0-from list", "-files0-from reads"),
        ("find . $(echo -delete)", "computed when the command runs"),
        ("find . -name *.py", "can expand to file names read as options"),  # unquoted: "-delete.py"…
        ("find * -print", "can expand to file names read as options"),
    ],
    "sed": [
        ("sed -i s/a/b/ f", "-i edits"),
        ("sed -i.bak s/a/b/ f", "-i edits"),
        ("sed -ni s/a/b/ f", "-i edits"),
        ("sed --in-place s/a/b/ f", "-i edits"),
        ("sed --in-place=.bak s/a/b/ f", "-i edits"),
        ("sed --in s/a/b/ f", "-i edits"),
        ("sed --i s/a/b/ f", "-i edits"),
        ("sed s/a/b/ -i f", "-i edits"),
        ("sed -f script.sed f", "-f reads its script"),
        ("sed --file=script.sed f", "-f reads its script"),
        ("sed --fi=script.sed f", "-f reads its script"),
        ("sed 1e f", "command e runs"),
        ("sed -n '1e id' f", "command e runs"),
        ("sed -e p -e 'e id' f", "command e runs"),
        ("sed --expression='e id' f", "command e runs"),
        ("sed --expr='e id' f", "command e runs"),
        ("sed --exp 'e id' f", "command e runs"),
        ("sed 's/.*/id/e' f", "flag e runs"),
        ("sed 's|x|id|ge' f", "flag e runs"),
        ("sed --expr=s/a/b/e f", "flag e runs"),
        ("sed 's/a/b/w out' f", "flag w writes"),
        ("sed 's/a/b/gw out' f", "flag w writes"),
        ("sed 'w out' f", "command w writes"),
        ("sed '1,5w out' f", "command w writes"),
        ("sed '/x/W out' f", "command W writes"),
        ("sed '1r /etc/passwd' f", "command r reads"),
        ("sed 'R /etc/passwd' f", "command R reads"),
        ("sed '$!{N;w out\n}' f", "command w writes"),
        ("sed -n '/a/!e id' f", "command e runs"),
        ("sed 's/a/b' f", "cannot be read"),
        # text the shell computes at run time: a safe echo can print "//e id"
        ("sed -n \"/$(echo -e '\\x2fe id')/p\" f", "computed when the command runs"),
        ('sed -n "/`echo x`/p" f', "computed when the command runs"),
        ("sed \"a foo$IFS\"'e id' f", "computed when the command runs"),
        ('sed "${x:-1e id}" f', "computed when the command runs"),
        ("sed -n p *.txt", "can expand to file names read as options"),  # a file named "-i"
        ("sed -- *", "the script is a glob"),
        ("sed 'k' f", "cannot be read"),
    ],
    "date": [
        ("date -f /etc/passwd", "-f reads"),
        ("date --file=/etc/passwd", "--file reads"),
        ("date --fi=/etc/passwd", "--file reads"),
        ("date -s 2020-01-01", "-s sets"),
        ("date --set=2020-01-01", "--set sets"),
        ("date --se 2020-01-01", "--set sets"),
        ("date 010100002020", "sets the clock"),
        ("date +%s$(echo ' -f /etc/passwd')", "computed when the command runs"),
    ],
    "hostname": [
        ("hostname evil", "operand sets"),
        ("hostname -F name.txt", "-F sets"),
        ("hostname --fi=name.txt", "--file sets"),
        ("hostname -b", "-b sets"),
        ("hostname --boot", "--boot sets"),
    ],
    "wc": [
        ("wc --files0-from=list", "--files0-from reads"),
        ("wc --files0-from list", "--files0-from reads"),
        ("wc --files=list", "--files0-from reads"),
        ("wc --f list", "--files0-from reads"),
    ],
    "du": [
        ("du --files0-from=list", "--files0-from reads"),
        ("du --files0=list", "--files0-from reads"),
    ],
    "file": [
        ("file -f list", "-f reads"),
        ("file --files-from list", "--files-from reads"),
        ("file --files=list", "--files-from reads"),
        ("file -m /etc/passwd x", "-m reads"),
        ("file --magic=/etc/passwd x", "--magic-file reads"),
        ("file -C -m magic", "-C writes"),
        ("file --comp -m magic", "--compile writes"),
        ("file -p x", "-p changes"),
        ("file -z x.gz", "-z runs"),
        ("file -Z x.gz", "-Z runs"),
        ("file --uncompress x.gz", "--uncompress runs"),
        ("file -S x", "-S turns off"),
        ("file --no-sandbox x", "--no-sandbox turns off"),
    ],
    "jq": [
        ("jq -f prog.jq data.json", "-f reads its program"),
        ("jq -nrf prog.jq", "-f reads its program"),
        ("jq --from-file prog.jq data.json", "--from-file reads"),
        ("jq -L lib 'import \"m\" as m; m::f' data.json", "-L loads"),
        ("jq -Llib . data.json", "-L loads"),
        ("jq --rawfile x /etc/passwd -n $x", "--rawfile reads"),
        ("jq --slurpfile x /etc/passwd -n $x", "--slurpfile reads"),
        ("jq --run-tests tests.txt", "--run-tests reads"),
        ("jq -n env", "environment"),
        ("jq -n $ENV.HOME", "environment"),
        ('jq -n \'"m" as $x | include "m"; .\'', "loads modules"),
        ("jq . *.json", "can expand to file names read as options"),  # a file named "-Lx"
    ],
    "env": [
        ("env", "prints the environment"),
        ("env FOO=1", "prints the environment"),
        ("env -i ls", "options"),
        ("env -u HOME ls", "options"),
        ("env -S 'ls -l'", "options"),
        ("env LD_PRELOAD=/tmp/x.so ls", "sets LD_PRELOAD"),
        ("env PATH=. ls", "sets PATH"),
        ("env GIT_CONFIG_COUNT=1 ls", "sets GIT_CONFIG_COUNT"),
        ("env LC_ALL=C BASH_ENV=x ls", "sets BASH_ENV"),
        ("env * ls", "can expand to file names read as options"),
    ],
}


@pytest.mark.parametrize(
    ("command", "why"),
    [row for rows in HOSTILE_FORMS.values() for row in rows],
    ids=[f"{name}: {row[0]}"[:70] for name, rows in HOSTILE_FORMS.items() for row in rows],
)
def test_hostile_forms_of_safe_programs_are_not_safe(command, why):
    first = commands(command)[0]
    assert first.name in SAFE_BINS  # the program itself is on the list; the form is what is refused
    assert not first.safe, first
    assert why in first.why_not_safe, first.why_not_safe


def test_every_program_of_the_safe_list_was_looked_at():
    # The module docstring's table covers every program of the list; the programs with refused forms
    # have rows above. The others (cat, echo, ls, pwd, head, tail, which, whoami, uname, df, free,
    # uptime, stat, dirname, basename, realpath, tr, cut, diff) have no form that writes, runs a
    # program or reads through an option.
    without_refused_forms = {
        "cat", "echo", "ls", "pwd", "head", "tail", "which", "whoami", "uname", "df", "free", "uptime",
        "stat", "dirname", "basename", "realpath", "tr", "cut", "diff",
    }  # fmt: skip
    assert set(HOSTILE_FORMS) | without_refused_forms == SAFE_BINS
    # and every one has a row in the module docstring's table (first column)
    from apps.policy import safe_bins

    lines = (safe_bins.__doc__ or "").split("\n")
    rules = [i for i, line in enumerate(lines) if line.startswith("==========  ")]
    rows = lines[rules[1] + 1 : rules[2]]  # between the rule under the header and the closing one
    in_table = {name.strip() for row in rows for name in row[:12].split(",") if name.strip()}
    assert not SAFE_BINS - in_table


@pytest.mark.parametrize(
    "program", ["git", "yq", "tee", "xargs", "awk", "patch", "less", "more", "xxd", "python3", "perl"]
)
def test_programs_that_write_or_run_programs_are_off_the_list(program):
    assert program not in SAFE_BINS


@pytest.mark.parametrize(
    "command",
    [
        # ordinary reads stay safe, options of every spelling included
        "ls", "ls -la", "ls --all", "ls -R src", "cat x", "cat -n a b", "head -5 f", "head -n 5 f",
        "head --lines=5 f", "tail -f log", "tail -n +2 f", "wc -l f", "wc --lines f", "wc -c < f",
        "sort f", "sort -rn f", "sort -k2,2 -t, f", "sort --key=2 --reverse f", "sort -u f",
        "sort --check f", "sort --rev f", "sort -S 10M f", "uniq f", "uniq -c f", "uniq -f 1 f",
        "uniq --skip-fields=1 f", "grep foo f", "grep -n x file", "grep -in -e x -e y f", "grep -c x f",
        "grep -E 'a|b' f", "grep --color=never x f", "grep --col x f", "grep -A2 -B 3 x f",
        "grep -d skip x f", "grep --include='*.py' x f", "grep -l x a b",
        "find . -name '*.py'", "find . -type f -newer x -print", "find src -maxdepth 2 -print0",
        "date", "date +%s", "date -u", "date -d yesterday +%F", "date --date='1 day ago'",
        "date -I", "date --iso-8601=seconds", "date -r f", "hostname", "hostname -f", "hostname --short",
        "du -sh .", "du -h --max-depth=1 .", "df -h", "df --output=source,size", "file x", "file -b x",
        "file --mime-type x", "stat x", "realpath .", "basename /a/b", "dirname /a/b", "which ls",
        "whoami", "uname -a", "uptime", "free -m", "echo hi", "pwd", "tr a-z A-Z", "cut -d, -f1 f",
        "diff a b", "diff -u a b", "diff -r a b",
        "jq . f", "jq -r .name f", "jq -n '1+1'", "jq .env f", "jq '.a | keys' f",
        "jq --arg x 1 -n '$x'", "jq -c --tab . f",
        "sed -n 1,5p f", "sed s/a/b/g f", "sed -E 's/(a|b)+/x/' f", "sed -n '/error/p' f",
        "sed '/^#/d' f", "sed -e 's/a/b/' -e '/x/d' f", "sed --expression=s/a/b/ f",
        "sed --quiet --regexp-extended 's/a/b/p' f", "sed '$!N;s/\\n/ /;P;D' f",
        "sed 'y/abc/xyz/' f", "sed '1i header' f", "sed '/x/a text with w r and e' f",
        "sed ':a;N;$!ba;s/\\n/ /g' f", "sed -s -n '$p' a b", "sed 5q f", "sed -n l f",
        # globs where they cannot become options (quoted, after --, not at the start), or for programs
        # without refused forms
        "ls *", "cat *.txt", "head -5 *.md", "wc -l -- *.py", "grep foo -- *.py", "grep -n foo src/*.py",
        "sort -- *.txt", "sed -n 1p -- *.txt", "find src/* -name x",
        "env LC_ALL=C sort f", "env TZ=UTC date",
    ],
)  # fmt: skip
def test_ordinary_reads_stay_safe(command):
    classified = commands(command)
    assert all(c.safe for c in classified), [(c.text, c.why_not_safe) for c in classified]


# --- variable assignments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "LD_PRELOAD=/tmp/x.so ls",
        "LD_LIBRARY_PATH=. cat f",
        "PATH=. ls",
        "PATH=.:$PATH ls",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='sh -c id' cat f",
        "BASH_ENV=x sort f",
        "IFS=/ ls",
        "HOME=. ls",
        "FOO=bar ls",
        "LC_ALL=C PATH=. ls",
        "LANG=../../tmp/x ls",  # a harmless name with a value that is not plain
        "LC_ALL=/tmp/locale ls",  # a locale name starting with "/" is a directory glibc loads from
        "TZ=$(id) date",
        "ls && PAGER=x head f",
        "echo hi | LD_PRELOAD=x wc -l",
    ],
)
def test_assignments_before_a_program_make_it_not_safe(command):
    classified = commands(command)
    assert not all(c.safe for c in classified)
    assigned = [c for c in classified if c.assignments]
    assert assigned
    assert any("variable" in c.why_not_safe for c in assigned), assigned


@pytest.mark.parametrize(
    "command",
    [
        "PATH=.; ls",
        "PATH=. && ls",
        "IFS=x; ls",
        "export PATH=.; ls",
        "LD_PRELOAD=x.so; export LD_PRELOAD; ls",
    ],
)
def test_a_statement_of_assignments_makes_the_line_not_safe(command):
    # "PATH=.; ls" runs ./ls: the assignment changes what the rest of the line runs.
    classified = commands(command)
    assert not all(c.safe for c in classified), classified


@pytest.mark.parametrize(
    "command", ["LC_ALL=C sort f", "LANG=en_US.UTF-8 ls", "TZ=UTC date", "TZ=:Europe/Paris date",
                "COLUMNS=120 ls", "NO_COLOR=1 ls", "LC_ALL=C; sort f"]
)  # fmt: skip
def test_harmless_assignments_keep_a_read_safe(command):
    classified = commands(command)
    assert all(c.safe for c in classified), [(c.text, c.why_not_safe) for c in classified]


def test_assignments_are_part_of_the_shape_and_the_text():
    (plain,) = commands("ls -l")
    (loaded,) = commands("LD_PRELOAD=x.so ls -l")
    assert loaded.shape == f"{plain.shape} LD_PRELOAD="
    assert loaded.text == "LD_PRELOAD=x.so ls -l"
    assert loaded.assignments == ("LD_PRELOAD=x.so",)


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git log --oneline",
        "git diff HEAD~1",
        "git branch",
        "git show HEAD",
        "git -C sub log",
        "git --git-dir=sub/.git log",
        "git -c core.pager=evil log",
        "git commit -m x",
        "git push",
    ],
)
def test_git_is_never_safe(command):
    # A repository's config (core.pager, core.fsmonitor, diff drivers, hooks) runs programs, and one
    # can always be planted in the workspace: `cd sub && git log` with sub/.git/config.
    first = commands(command)[0]
    assert not first.safe
    assert first.why_not_safe == "not a read-only program of the safe list"


def test_nul_bytes_and_too_deep_nesting_are_invalid():
    assert classify("ls\x00rm", cwd="/", path_env=SAFE_PATH).invalid
    deep = 'sh -c "sh -c \'sh -c \\"sh -c evil\\"\'"'
    assert "deeper" in classify(deep, cwd="/", path_env=SAFE_PATH).invalid


# --- the decision table (B §6.2), every cell ------------------------------------------------------------


@pytest.fixture
def agent(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def decide(tenant, agent, command, *, security, ask, allowlist=(), origin="user", groups=None, cwd="/"):
    policy = replace(
        engine.build(tenant, agent, CallScope()),
        exec_security=security,
        exec_ask=ask,
        exec_allowlist=tuple(allowlist),
        shell_deny_groups=groups or {},
    )
    return approvals.check(policy, tenant, agent, command, cwd, origin, path_env=SAFE_PATH)


TABLE = [
    # security, ask, allowlisted?, safe bin?, expected
    ("deny", "off", True, True, "deny"),
    ("deny", "on-miss", True, True, "deny"),
    ("deny", "always", True, True, "deny"),
    ("allowlist", "off", True, False, "allow"),
    ("allowlist", "on-miss", True, False, "allow"),
    ("allowlist", "always", True, False, "ask"),
    ("allowlist", "off", False, False, "deny"),
    ("allowlist", "on-miss", False, False, "ask"),
    ("allowlist", "always", False, False, "ask"),
    ("full", "off", False, False, "allow"),
    ("full", "on-miss", True, False, "allow"),
    ("full", "on-miss", False, True, "allow"),
    ("full", "on-miss", False, False, "ask"),
    ("full", "always", True, True, "ask"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("security", "ask", "listed", "safe", "expected"), TABLE)
def test_every_cell_of_the_table(tenant_a, agent, security, ask, listed, safe, expected):
    command = "ls -la" if safe else "touch x"
    allowlist = ["ls", "touch"] if listed else []
    verdict = decide(tenant_a, agent, command, security=security, ask=ask, allowlist=allowlist)
    assert verdict.decision == expected, verdict


@pytest.mark.django_db
@pytest.mark.parametrize(
    "command", ["ls && touch evil", "env sh -c 'touch evil'", "ls $(touch evil)", "ls `touch evil`"]
)
def test_an_allowlisted_first_token_does_not_carry_the_chain(tenant_a, agent, command):
    verdict = decide(tenant_a, agent, command, security="allowlist", ask="off", allowlist=["ls"])
    assert verdict.decision == "deny"
    verdict = decide(tenant_a, agent, command, security="full", ask="on-miss")
    assert verdict.decision == "ask"
    assert "touch evil" in verdict.reason


@pytest.mark.django_db
def test_the_basename_glob_does_not_cover_another_binary_with_that_name(tenant_a, agent, cwd):
    assert decide(
        tenant_a, agent, "ls", security="allowlist", ask="off", allowlist=["ls"], cwd=cwd
    ).decision == ("allow")
    verdict = decide(tenant_a, agent, "./ls", security="allowlist", ask="off", allowlist=["ls"], cwd=cwd)
    assert verdict.decision == "deny"


@pytest.mark.django_db
def test_globs_match_the_resolved_path_or_the_command_text(tenant_a, agent):
    by_path = decide(tenant_a, agent, "ls -la", security="allowlist", ask="off", allowlist=[LS])
    by_text = decide(
        tenant_a, agent, "touch notes.txt", security="allowlist", ask="off", allowlist=["touch *"]
    )
    assert (by_path.decision, by_text.decision) == ("allow", "allow")


@pytest.mark.django_db
def test_a_rule_matches_by_agent_path_and_shape(tenant_a, agent):
    (touch,) = commands("touch a.txt")
    ApprovalRule.objects.create(
        tenant=tenant_a, agent=agent, binary_path=touch.binary_path, shape=touch.shape,
        created_by_kind="system", created_by_id="system",
    )  # fmt: skip
    assert decide(tenant_a, agent, "touch b.txt", security="full", ask="on-miss").decision == "allow"
    assert (
        decide(tenant_a, agent, "touch -d yesterday b.txt", security="full", ask="on-miss").decision == "ask"
    )
    other = services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    assert decide(tenant_a, other, "touch b.txt", security="full", ask="on-miss").decision == "ask"


@pytest.mark.django_db
def test_package_installs_ask_even_with_security_full_and_ask_off(tenant_a, agent):
    verdict = decide(tenant_a, agent, "pip install requests", security="full", ask="off")
    assert verdict.decision == "ask"
    assert verdict.package_install
    assert verdict.approved_groups == {"package_install"}
    # turned off for the agent: an ordinary command
    off = decide(
        tenant_a, agent, "pip install requests", security="full", ask="off", groups={"package_install": False}
    )
    assert (off.decision, off.package_install) == ("allow", False)


@pytest.mark.django_db
def test_a_package_install_with_another_denied_group_is_denied(tenant_a, agent):
    verdict = decide(tenant_a, agent, "pip install x && sudo reboot", security="full", ask="off")
    assert verdict.decision == "deny"
    assert "deny group" in verdict.reason


@pytest.mark.django_db
def test_the_system_origin_never_asks_but_security_deny_still_denies(tenant_a, agent):
    asked = decide(tenant_a, agent, "touch x", security="full", ask="always", origin="system")
    assert asked.decision == "allow"
    install = decide(tenant_a, agent, "pip install x", security="full", ask="off", origin="system")
    assert (install.decision, install.approved_groups) == ("allow", {"package_install"})
    assert decide(tenant_a, agent, "ls", security="deny", ask="off", origin="system").decision == "deny"


@pytest.mark.django_db
def test_unclassifiable_commands_are_denied(tenant_a, agent):
    assert decide(tenant_a, agent, "ls\x00", security="full", ask="off").decision == "deny"


# --- through the decision: hostile forms ask in on-miss mode ------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "command",
    [
        "sort --out=x f",
        "sed --expr='e id' f",
        "LD_PRELOAD=x.so ls",
        "PATH=. ls",
        "PATH=.; ls",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=id git log",
        "cd sub && git log",
        "env LD_PRELOAD=x.so cat f",
        "find . -fprint out",
        "uniq in out",
    ],
)
def test_hostile_forms_ask_in_on_miss_mode(tenant_a, agent, command):
    verdict = decide(tenant_a, agent, command, security="full", ask="on-miss")
    assert verdict.decision == "ask", verdict


@pytest.mark.django_db
@pytest.mark.parametrize("command", ["ls -la", "LC_ALL=C sort f", "grep -n x f | head -5", "env TZ=UTC date"])
def test_reads_run_without_asking_in_on_miss_mode(tenant_a, agent, command):
    assert decide(tenant_a, agent, command, security="full", ask="on-miss").decision == "allow"


@pytest.mark.django_db
@pytest.mark.parametrize("command", ["LD_PRELOAD=x.so ls", "PATH=. ls", f"LD_PRELOAD=x.so {LS}"])
def test_an_allowlisted_program_does_not_carry_an_assignment(tenant_a, agent, command):
    verdict = decide(tenant_a, agent, command, security="allowlist", ask="off", allowlist=["ls", LS])
    assert verdict.decision == "deny"
    # harmless names, or the whole text on the allowlist, still match
    assert decide(
        tenant_a, agent, "LC_ALL=C ls", security="allowlist", ask="off", allowlist=["ls"]
    ).decision == ("allow")
    listed = decide(tenant_a, agent, command, security="allowlist", ask="off", allowlist=[command])
    assert listed.decision == "allow"
