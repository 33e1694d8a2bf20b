"""Command classification (apps.policy.commands) and the decision table of B §6.2 (apps.policy.approvals)."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import replace

import pytest

from apps.policy import approvals, engine
from apps.policy.approval_models import ApprovalRule
from apps.policy.commands import classify
from apps.policy.engine import CallScope
from apps.runtime.tools.exec import SAFE_PATH
from apps.tenants import services
from apps.tenants.actors import Actor

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
    assert log.safe
    assert not push.safe


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


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@pytest.mark.parametrize(
    ("command", "safe"),
    [
        ("git status", True),
        ("git diff HEAD~1", True),
        ("git branch", True),
        ("git branch -a", True),
        ("git branch new-branch", False),
        ("git branch -D old", False),
        ("git diff --output=f", False),
        ("git -c core.pager=evil log", False),
        ("git commit -m x", False),
        ("git push", False),
    ],
)
def test_git_is_safe_only_for_reading(command, safe):
    assert commands(command)[0].safe is safe


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
