"""Markdown into search chunks: split by headings, then by paragraphs, packed to about
:data:`CHUNK_CHARS` characters, each chunk starting with a short overlap of the one before it in the
same section, and each carrying the headings it sits under (``"Setup > Database"``).

Headings inside fenced code blocks are text, not headings. A paragraph longer than a chunk is cut at
line ends, then at sentence or word boundaries, and only as a last resort in the middle of a word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CHUNK_CHARS = 1000  # the body of a chunk, before the overlap
OVERLAP_CHARS = 150  # the tail of the previous chunk repeated at the start of the next
HEADING_CHARS = 500  # MemoryChunk.heading's size
HEADING_SEPARATOR = " > "

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_BLANK_LINES = re.compile(r"\n[ \t]*\n")
_BREAKS = ("\n", ". ", "! ", "? ", "; ", ", ", " ")


@dataclass(frozen=True)
class Chunk:
    heading: str  # the headings above the text, outermost first, joined by " > "; "" before the first
    text: str


@dataclass
class _Section:
    heading: str
    lines: list[str]


def chunk_markdown(text: str) -> list[Chunk]:
    """The chunks of a Markdown document, in document order; none for a blank document."""
    chunks: list[Chunk] = []
    for section in _sections(text.replace("\r\n", "\n").replace("\r", "\n")):
        body = "\n".join(section.lines).strip()
        if not body:
            continue
        previous = ""
        for piece in _pack(_paragraphs(body)):
            overlap = _tail(previous) if previous else ""
            chunks.append(Chunk(heading=section.heading, text=f"{overlap}{piece}" if overlap else piece))
            previous = piece
    return chunks


def _sections(text: str) -> list[_Section]:
    """The document cut at its headings; each section knows the path of headings above it."""
    sections = [_Section(heading="", lines=[])]
    trail: list[tuple[int, str]] = []  # (level, title) of the headings currently open
    fence = ""
    for line in text.split("\n"):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1) == fence:
                fence = ""
            sections[-1].lines.append(line)
            continue
        if opened:
            fence = opened.group(1)
            sections[-1].lines.append(line)
            continue
        heading = _HEADING.match(line)
        if heading is None:
            sections[-1].lines.append(line)
            continue
        level, title = len(heading.group(1)), heading.group(2).strip()
        trail = [entry for entry in trail if entry[0] < level]
        trail.append((level, title))
        path = HEADING_SEPARATOR.join(title for _, title in trail if title)
        sections.append(_Section(heading=path[:HEADING_CHARS], lines=[]))
    return sections


def _paragraphs(body: str) -> list[str]:
    """The section's paragraphs, each no longer than a chunk (longer ones are cut)."""
    pieces: list[str] = []
    for paragraph in _BLANK_LINES.split(body):
        paragraph = paragraph.strip("\n")
        if paragraph.strip():
            pieces.extend(_cut(paragraph))
    return pieces


def _cut(paragraph: str) -> list[str]:
    pieces: list[str] = []
    rest = paragraph
    while len(rest) > CHUNK_CHARS:
        window = rest[:CHUNK_CHARS]
        end = 0
        for mark in _BREAKS:
            found = window.rfind(mark)
            if found >= CHUNK_CHARS // 2:
                end = found + len(mark)
                break
        if end == 0:
            end = CHUNK_CHARS
        pieces.append(rest[:end].rstrip())
        rest = rest[end:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces


def _pack(paragraphs: list[str]) -> list[str]:
    """Paragraphs joined (by a blank line) into pieces of at most CHUNK_CHARS characters."""
    pieces: list[str] = []
    current = ""
    for paragraph in paragraphs:
        if current and len(current) + 2 + len(paragraph) > CHUNK_CHARS:
            pieces.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        pieces.append(current)
    return pieces


def _tail(text: str) -> str:
    """The last OVERLAP_CHARS characters of ``text``, from a word start, followed by a blank line; ""
    when the text is that short (the next chunk would only repeat it)."""
    if len(text) <= OVERLAP_CHARS:
        return ""
    tail = text[-OVERLAP_CHARS:]
    space = tail.find(" ")
    if 0 <= space < len(tail) - 1:
        tail = tail[space + 1 :]
    tail = tail.strip()
    return f"… {tail}\n\n" if tail else ""
