"""Markdown chunking: headings, then paragraphs, about 1000 characters, a short overlap, headings kept."""

from __future__ import annotations

import itertools

from apps.memory.chunking import CHUNK_CHARS, OVERLAP_CHARS, Chunk, chunk_markdown


def test_a_blank_document_has_no_chunks():
    assert chunk_markdown("") == []
    assert chunk_markdown("\n\n   \n") == []


def test_each_section_is_a_chunk_under_its_heading_path():
    text = (
        "Intro line.\n\n"
        "# Setup\nInstall it.\n\n"
        "## Database\nUse PostgreSQL.\n\n"
        "## Cache\nUse Redis.\n\n"
        "# Usage ##\nRun it.\n"
    )
    assert chunk_markdown(text) == [
        Chunk("", "Intro line."),
        Chunk("Setup", "Install it."),
        Chunk("Setup > Database", "Use PostgreSQL."),
        Chunk("Setup > Cache", "Use Redis."),
        Chunk("Usage", "Run it."),
    ]


def test_headings_without_text_make_no_chunk_and_a_deeper_level_skipped_is_fine():
    text = "# A\n\n### Deep\ntext\n# B\n"
    assert chunk_markdown(text) == [Chunk("A > Deep", "text")]


def test_a_hash_in_a_code_fence_is_not_a_heading():
    text = "# Script\n```sh\n# a comment, not a heading\necho hi\n```\nafter\n"
    [chunk] = chunk_markdown(text)
    assert chunk.heading == "Script"
    assert "# a comment, not a heading" in chunk.text
    assert chunk.text.endswith("after")
    assert chunk_markdown("#hashtag is text\n") == [Chunk("", "#hashtag is text")]


def test_paragraphs_are_packed_to_about_a_thousand_characters_with_an_overlap():
    paragraphs = [f"Paragraph {n:02} " + " ".join(["word"] * 78) for n in range(12)]  # 402 characters each
    chunks = chunk_markdown("# Notes\n\n" + "\n\n".join(paragraphs))
    assert len(chunks) == 6  # two paragraphs are 806 characters; a third would make 1210
    assert all(chunk.heading == "Notes" for chunk in chunks)
    assert chunks[0].text.startswith("Paragraph 00 ")
    assert "Paragraph 01 " in chunks[0].text
    assert "Paragraph 02 " not in chunks[0].text
    for previous, chunk in itertools.pairwise(chunks):
        assert chunk.text.startswith("… ")
        overlap = chunk.text[2:].split("\n\n", 1)[0]
        assert 0 < len(overlap) <= OVERLAP_CHARS
        assert previous.text.endswith(overlap)
        assert len(chunk.text) <= CHUNK_CHARS + OVERLAP_CHARS + 4
    assert [n for n in range(12) if any(f"Paragraph {n:02} " in c.text for c in chunks)] == list(range(12))


def test_the_overlap_stays_inside_one_section():
    long = "x " * 700
    chunks = chunk_markdown(f"# One\n{long}\n# Two\nshort")
    assert chunks[-1] == Chunk("Two", "short")


def test_a_paragraph_longer_than_a_chunk_is_cut_at_sentences_then_words():
    sentence = "This is one sentence of the long paragraph. "
    text = sentence * 60  # 2640 characters, no blank line
    chunks = chunk_markdown(text)
    assert len(chunks) == 3
    first = chunks[0].text
    assert len(first) <= CHUNK_CHARS
    assert first.endswith("paragraph.")
    assert all(" sentence " in chunk.text for chunk in chunks)

    one_word = "y" * 2500
    pieces = chunk_markdown(one_word)
    assert len(pieces[0].text) == CHUNK_CHARS
    assert "".join(p.text.split("\n\n")[-1] for p in pieces) == one_word


def test_windows_line_ends_and_long_headings():
    chunks = chunk_markdown("# " + "h" * 600 + "\r\nbody\r\n")
    assert chunks == [Chunk("h" * 500, "body")]
