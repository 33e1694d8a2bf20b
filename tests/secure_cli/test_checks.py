"""The credentialed-exec checks on their own (SPEC B §5.4's tables): shell operators outside quotes,
start-anchored verbose patterns, deny_args on the joined arguments, and the presets."""

from __future__ import annotations

import pytest

from apps.secure_cli.execution import args_match, shell_operators, verbose_match
from apps.secure_cli.presets import PRESETS


@pytest.mark.parametrize(
    ("command", "found"),
    [
        ("gh api foo | jq .", 1),
        ("'a; b'", 0),
        ("gh api x --jq '.[0] | .name'", 0),
        ("gh --jq '.x' | cat", 1),
        ('gh api \\"foo | bar\\"', 1),
        ('gh api "a && b"', 0),
        ("gh api x &", 1),
        ("gh api `id`", 1),
        ("gh api $(id)", 1),
        ("gh api ${X}", 1),
        ("gh api $X", 0),
        ("gh api 'unclosed | pipe", 0),
        ("gh api x\r", 1),
    ],
)
def test_operator_detection_outside_quotes(command, found):
    assert bool(shell_operators(command)) == bool(found), shell_operators(command)


GH_VERBOSE = ("--verbose", "-v")


@pytest.mark.parametrize("arg", ["--version", "version", "--help", "view"])
def test_verbose_patterns_leave_look_alikes(arg):
    assert verbose_match(GH_VERBOSE, ["api", arg]) is None


@pytest.mark.parametrize("arg", ["-v", "-vv", "-vvv", "--verbose=true", "-v=1", "--verbose"])
def test_verbose_patterns_are_start_anchored_per_argument(arg):
    assert verbose_match(GH_VERBOSE, ["api", arg]) is not None


def test_verbose_patterns_of_gcloud_and_aws():
    assert verbose_match(("--verbosity=debug", "--log-http"), ["--verbosity=info"]) is None
    assert verbose_match(("--verbosity=debug",), ["--verbosity=debug"]) == "--verbosity=debug"
    assert verbose_match(("--debug",), ["--debugger"]) == "--debug"
    assert verbose_match(("-v",), ["x-v"]) is None  # anchored at the start of the argument only


def test_deny_args_match_across_arguments():
    assert args_match((r"repo\s+delete",), ["repo", "delete", "x"]) == r"repo\s+delete"
    assert args_match((r"repo\s+delete",), ["repo", "view", "delete"]) is None
    assert args_match(("destroy",), ["plan", "-destroy"]) == "destroy"
    assert args_match(("(",), ["x"]) is None  # an invalid pattern is skipped, not a crash


def test_the_five_march_presets():
    assert sorted(PRESETS) == ["aws", "gcloud", "gh", "kubectl", "terraform"]
    gh = PRESETS["gh"]
    assert gh.required_env == ("GH_TOKEN",)
    assert gh.deny_args == (r"auth\s+", "ssh-key", "gpg-key", r"repo\s+delete", r"secret\s+")
    assert gh.deny_verbose == ("--verbose", "-v")
    assert (gh.timeout_seconds, gh.tips) == (30, "Use --json flag for structured output")
    assert PRESETS["aws"].required_env == ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    assert PRESETS["terraform"].required_env == ()
    assert {p.name: p.timeout_seconds for p in PRESETS.values()} == {
        "gh": 30, "gcloud": 120, "aws": 60, "kubectl": 60, "terraform": 300,
    }  # fmt: skip
