"""Rendering a command template: one shell word per argument, whatever it holds, in one pass."""

from __future__ import annotations

import subprocess

import pytest

from apps.custom_tools.rendering import RenderError, placeholders, render, shell_quote

HOSTILE = [
    "plain",
    "it's",
    "'",
    "''",
    "a'\"'\"'b",
    "$(id)",
    "`id`",
    "${HOME}",
    "a\nb",
    "a; b",
    "a && b || c",
    "\\'",
    "-n",
    "{{.b}}",
    "ünïcødé ☃",
    "",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_quoted_value_is_one_word_with_its_exact_text(value):
    # printf runs in a real shell: the value comes back exactly, as one argument.
    printed = subprocess.run(
        ["/bin/sh", "-c", f"printf '<%s>' {shell_quote(value)}"], capture_output=True, text=True, check=True
    )
    assert printed.stdout == f"<{value}>"


def test_placeholders_are_replaced_in_one_pass():
    # An argument whose value looks like another placeholder is not expanded again.
    rendered = render("echo {{.a}} {{.b}}", {"a": "{{.b}}", "b": "x'; evil; '"})
    assert rendered == "echo '{{.b}}' 'x'\\''; evil; '\\'''"


def test_missing_required_arguments_are_an_error_and_optional_ones_empty_words():
    with pytest.raises(RenderError, match="missing required arguments: a, b"):
        render("echo {{.a}} {{.b}}", {}, required=["a", "b"])
    assert render("echo {{.a}} {{.c}}", {"a": "x"}, required=["a"]) == "echo 'x' ''"


def test_values_are_json_text_unless_strings():
    assert render("{{.n}} {{.f}} {{.l}} {{.o}}", {"n": 3, "f": False, "l": [1, "a"], "o": {"k": None}}) == (
        "'3' 'false' '[1,\"a\"]' '{\"k\":null}'"
    )


def test_a_nul_byte_is_refused():
    with pytest.raises(RenderError, match="NUL"):
        render("echo {{.a}}", {"a": "x\x00y"})


def test_placeholders_are_listed_once_in_order():
    assert placeholders("{{.b}} {{.a}} {{.b}} {{ .c }} {{.9}}") == ["b", "a"]
