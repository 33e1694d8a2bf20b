"""SKILL.md parsing: the frontmatter's name, description and triggers, the body, and clear refusals."""

from __future__ import annotations

import pytest

from apps.skills import parsing
from apps.skills.models import MAX_CONTENT_CHARS, MAX_TRIGGERS
from apps.skills.parsing import SkillFormatError, parse


def refused(text: str) -> SkillFormatError:
    with pytest.raises(SkillFormatError) as caught:
        parse(text)
    return caught.value


def test_a_skill_md_gives_its_fields_and_body():
    parsed = parse(
        "---\nname: release-notes\ndescription: Write release notes.\ntriggers: [release notes, Changelog]\n"
        "license: MIT\n---\n\n# Release notes\n\nList the merged pull requests.\n"
    )
    assert parsed.name == "release-notes"
    assert parsed.description == "Write release notes."
    assert parsed.triggers == ("release notes", "Changelog")
    assert parsed.body == "# Release notes\n\nList the merged pull requests.\n"
    assert parsed.metadata["license"] == "MIT"


def test_triggers_may_be_one_comma_separated_string_and_repeats_go():
    parsed = parse("---\nname: a\ndescription: d\ntriggers: 'deploy,  roll   out , Deploy,'\n---\nbody")
    assert parsed.triggers == ("deploy", "roll out")


def test_no_triggers_and_windows_line_endings_are_fine():
    parsed = parse("\ufeff---\r\nname: x1\r\ndescription: d\r\n---\r\nline one\r\nline two")
    assert parsed.triggers == ()
    assert parsed.body == "line one\nline two"


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("", "content", "empty"),
        ("# no frontmatter\n", "content", "starts with a '---' line"),
        ("---\nname: a\ndescription: d\n", "content", "no closing '---'"),
        ("---\ndescription: d\n---\n", "name", "name: missing"),
        ("---\nname: Release Notes\ndescription: d\n---\n", "name", "not a valid skill name"),
        ("---\nname: -dash\ndescription: d\n---\n", "name", "not a valid skill name"),
        ("---\nname: " + "a" * 65 + "\ndescription: d\n---\n", "name", "not a valid skill name"),
        ("---\nname: 12\ndescription: d\n---\n", "name", "not a valid skill name"),
        ("---\nname: a\n---\n", "description", "description: missing"),
        ("---\nname: a\ndescription: '   '\n---\n", "description", "description: missing"),
        ("---\nname: a\ndescription: " + "d" * 1025 + "\n---\n", "description", "at most 1024"),
        ("---\nname: a\ndescription: d\ntriggers: {a: 1}\n---\n", "triggers", "a list of phrases"),
        ("---\nname: a\ndescription: d\ntriggers: [1]\n---\n", "triggers", "every trigger is a phrase"),
        ("---\nname: a\ndescription: d\ntriggers: [" + "t" * 101 + "]\n---\n", "triggers", "at most 100"),
        ("---\nname: a\ndescription: d\nkey: [unclosed\n---\n", "content", "invalid YAML (frontmatter line"),
        ("---\n- a list\n---\n", "content", "must be a YAML mapping"),
        ("---\nname: a\ndescription: &d d\nother: *d\n---\n", "content", "anchors and aliases"),
        ("---\nname: a\ndescription: d\n---\nnul \x00 here", "content", "NUL"),
    ],
)
def test_what_is_not_a_skill_is_refused_with_the_field_and_a_reason(text, field, words):
    error = refused(text)
    assert error.field == field
    assert words in error.message


def test_too_many_triggers_and_too_long_texts_are_refused():
    many = ", ".join(f"t{i}" for i in range(MAX_TRIGGERS + 1))
    assert "at most 20" in refused(f"---\nname: a\ndescription: d\ntriggers: '{many}'\n---\n").message
    huge = "---\nname: a\ndescription: d\n---\n" + "x" * MAX_CONTENT_CHARS
    assert f"at most {MAX_CONTENT_CHARS} characters" in refused(huge).message
    long_frontmatter = "---\nname: a\ndescription: d\nnotes: '" + "n" * 9000 + "'\n---\n"
    assert "the frontmatter holds at most" in refused(long_frontmatter).message


def test_an_alias_bomb_is_refused_before_it_is_expanded():
    bomb = "---\nname: a\ndescription: d\na: &a [x, x, x, x, x, x, x, x, x]\n"
    for level in "bcdefghij":
        previous = chr(ord(level) - 1)
        bomb += f"{level}: &{level} [*{previous}, *{previous}, *{previous}, *{previous}, *{previous}]\n"
    assert "anchors and aliases" in refused(bomb + "---\n").message


def test_build_and_render_give_a_text_that_parses_back():
    text = parsing.build(
        name="from-fields", description="Built: with a colon.", triggers=["a b"], body="Do it."
    )
    parsed = parse(text)
    assert (parsed.name, parsed.description, parsed.triggers, parsed.body) == (
        "from-fields",
        "Built: with a colon.",
        ("a b",),
        "Do it.",
    )
    assert parsing.body_of(text) == "Do it."
