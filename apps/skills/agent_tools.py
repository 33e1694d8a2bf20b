"""The skill tools: ``skill_search`` (find a skill), ``use_skill`` (load one: recorded, and active in
the conversation under the loading rules of :mod:`apps.skills.loading`) and ``publish_skill`` (register
a workspace directory holding a SKILL.md as the agent's skill).

An agent sees its own enabled skills and the tenant's enabled global ones, its own shadowing a global
one of the same name (``selectors.visible_skills``).
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
from pathlib import Path
from typing import Any

from apps.skills import loading, parsing, search, selectors, services
from apps.skills.models import MAX_CONTENT_CHARS, MAX_FILE_CHARS, MAX_FILES, SkillFile
from apps.skills.services import SKILL_MD
from apps.tenants.errors import ServiceError
from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult
from apps.toolkit.workspace import (
    BINARY_EXTENSIONS,
    DEFAULT_DENIED_PREFIXES,
    DISK_FULL,
    PathError,
    check_open_file,
    disk_full,
    is_hidden,
    normalise_prefixes,
    open_parent,
    real_workspace,
    resolve_path,
)

DEFAULT_LIMIT = 5
MAX_LIMIT = 50
MAX_QUERY_CHARS = 500
MAX_NAME_ARG_CHARS = 200
MAX_WALK_ENTRIES = 1000  # entries publish_skill looks at in a directory tree
MAX_DEPTH = 8
HOW_TO_ADD = (
    "Skills are added by administrators (the dashboard's Skills page, or POST /api/v1/skills/) or "
    "published from a workspace directory holding a SKILL.md with publish_skill."
)


class _Refused(Exception):
    """publish_skill cannot use the directory; the message says why and what to do."""


def _text_arg(args: dict[str, Any], name: str, limit: int) -> str | ToolResult:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        return ToolResult.error(f"missing required argument {name!r}.")
    if len(value) > limit:
        return ToolResult.error(f"argument {name!r} is longer than {limit} characters.")
    return value.strip()


# --- skill_search -------------------------------------------------------------------------------------


@tool("skill_search")
def skill_search(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """The skills of this agent that match ``query`` best (BM25), with name, description and score."""
    query = _text_arg(args, "query", MAX_QUERY_CHARS)
    if isinstance(query, ToolResult):
        return query
    limit = args.get("limit", DEFAULT_LIMIT)
    if limit is None:
        limit = DEFAULT_LIMIT
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        return ToolResult.error(f"limit must be a whole number from 1 to {MAX_LIMIT}.")
    visible = selectors.visible_skills(tenant=ctx.tenant, agent=ctx.agent)
    if not visible:
        return ToolResult.ok(f"No skills are available to this agent yet. {HOW_TO_ADD}", skills=[], total=0)
    found = search.rank(query, list(visible.values()), limit)
    if not found:
        return ToolResult.ok(
            f"No skill matches {query!r} ({len(visible)} skill{'s' if len(visible) != 1 else ''} available). "
            "Try other words: what the task is about, or a tool or format it involves. If no skill fits, "
            "you can write one: a directory with a SKILL.md, registered with publish_skill.",
            skills=[],
            total=len(visible),
        )
    lines = [f"{len(found)} skill{'s' if len(found) != 1 else ''} found; load one with use_skill(name):"]
    for skill, score in found:
        lines.append(f"- {skill.name}: {skill.description} (score {score:.2f})")
    return ToolResult.ok(
        "\n".join(lines),
        skills=[
            {"name": skill.name, "description": skill.description, "score": round(score, 3)}
            for skill, score in found
        ],
        total=len(visible),
    )


# --- use_skill ----------------------------------------------------------------------------------------


def _unknown(name: str, names: list[str]) -> ToolResult:
    if not names:
        return ToolResult.error(
            f"unknown skill {name!r}: no skills are available to this agent. {HOW_TO_ADD}"
        )
    close = difflib.get_close_matches(name.lower(), names, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(n) for n in close)}?" if close else ""
    return ToolResult.error(
        f"unknown skill {name!r}.{hint} Use skill_search to find skills by what they do.",
        suggestions=close,
    )


def _file_list(files: list[SkillFile], name: str) -> str:
    if not files:
        return ""
    rows = "\n".join(f"- {f.path} ({len(f.content)} characters)" for f in files)
    return f'\n\nFiles of this skill (read one with use_skill(name="{name}", file="<path>")):\n{rows}'


@tool("use_skill")
def use_skill(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Load a skill: its instructions (the SKILL.md body) and the list of its files; the skill becomes
    active in this conversation. With ``file``: one of its files instead."""
    name = _text_arg(args, "name", MAX_NAME_ARG_CHARS)
    if isinstance(name, ToolResult):
        return name
    visible = selectors.visible_skills(tenant=ctx.tenant, agent=ctx.agent)
    skill = visible.get(name) or visible.get(name.lower())
    if skill is None:
        return _unknown(name, sorted(visible))
    files = list(selectors.skill_files(tenant=ctx.tenant, skill=skill))
    wanted = args.get("file")
    if wanted is not None:
        if not isinstance(wanted, str) or not wanted.strip():
            return ToolResult.error("argument 'file' must be the path of one of the skill's files.")
        chosen = next((f for f in files if f.path == wanted.strip().removeprefix("./")), None)
        if chosen is None:
            known = ", ".join(f.path for f in files) or "none besides SKILL.md"
            return ToolResult.error(f"skill {skill.name!r} has no file {wanted[:200]!r}; its files: {known}.")
        return ToolResult.ok(chosen.content, skill=skill.name, file=chosen.path, size=len(chosen.content))
    loading.activate_manual(
        actor=ctx.actor, agent=ctx.agent, skill=skill, user_id=ctx.user_id, session_key=ctx.session_key
    )
    body = parsing.body_of(skill.content)
    header = (
        f"Skill {skill.name} loaded. Follow its instructions; it stays active in this conversation for "
        f"{loading.MANUAL_TTL_TURNS} turns after its last use.\n\n"
    )
    return ToolResult.ok(
        header + body + _file_list(files, skill.name),
        skill=skill.name,
        version=skill.version,
        files=[f.path for f in files],
    )


# --- publish_skill ------------------------------------------------------------------------------------


def _denied_prefixes(ctx: CallContext) -> tuple[str, ...]:
    """What read_file may not read (publish_skill reads the directory): its built-in prefixes plus the
    configured ``denied_prefixes``; a malformed setting refuses the call."""
    configured = ctx.settings_for("read_file").get("denied_prefixes") or ()
    if not isinstance(configured, list | tuple) or not all(isinstance(p, str) for p in configured):
        raise _Refused(
            "the read_file tool is misconfigured (denied_prefixes must be a list of strings); ask an "
            "administrator to fix the tool settings."
        )
    return DEFAULT_DENIED_PREFIXES["read_file"] + tuple(configured)


def _read_text(name: str, dir_fd: int, shown: str) -> str:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _Refused(f"{shown} is a symlink; publish_skill does not follow symlinks.") from None
        raise
    try:
        info = check_open_file(fd)
        if info.st_size > MAX_FILE_CHARS * 4:
            raise _Refused(
                f"{shown} is {info.st_size} bytes; a skill file holds at most {MAX_FILE_CHARS} characters."
            )
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as handle:
            raw = handle.read(MAX_FILE_CHARS * 4 + 1)
    finally:
        os.close(fd)
    if b"\x00" in raw:
        raise _Refused(f"{shown} is a binary file; a skill holds text files only (remove it or move it out).")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refused(f"{shown} is not UTF-8 text; a skill holds text files only.") from None


def _collect(
    ctx: CallContext, directory: Path, ws_real: Path, shown: str
) -> tuple[str, list[tuple[str, str]], list[str]]:
    """(SKILL.md text, the other files as (relative path, text), skipped hidden entries) of a skill
    directory. Walks by directory file descriptors without following symlinks; a symlink, a binary or
    special file, a hardlink, too many or too big files refuse the whole directory."""
    prefixes = normalise_prefixes(_denied_prefixes(ctx))
    base_parts = () if directory == ws_real else Path(os.path.relpath(directory, ws_real)).parts
    parent_fd: int | None = None
    top = str(ws_real)
    if directory != ws_real:
        parent_fd, top = open_parent(directory, workspace=ws_real)
    skill_md: str | None = None
    files: list[tuple[str, str]] = []
    skipped: list[str] = []
    seen = 0
    try:
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(top, dir_fd=parent_fd, follow_symlinks=False):
            below = os.path.relpath(dirpath, top)
            inner = () if below == "." else tuple(below.split(os.sep))
            descend: list[str] = []
            for name in sorted(dirnames + filenames):
                seen += 1
                if seen > MAX_WALK_ENTRIES:
                    raise _Refused(
                        f"{shown} holds more than {MAX_WALK_ENTRIES} entries; a skill is a small directory."
                    )
                relative = "/".join((*inner, name))
                if is_hidden((*base_parts, *inner, name), prefixes):
                    continue
                if name.startswith("."):
                    skipped.append(relative)
                    continue
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                entry = f"{shown}/{relative}" if shown != "." else relative
                if stat.S_ISLNK(info.st_mode):
                    raise _Refused(
                        f"{entry} is a symlink; publish_skill does not follow symlinks. "
                        "Put the file itself there."
                    )
                if stat.S_ISDIR(info.st_mode):
                    if len(inner) + 1 >= MAX_DEPTH:
                        raise _Refused(f"{entry}: a skill's folders nest at most {MAX_DEPTH - 1} deep.")
                    descend.append(name)
                    continue
                if not stat.S_ISREG(info.st_mode):
                    raise _Refused(f"{entry} is not a regular file (device, FIFO or socket).")
                if "." in name and name.rsplit(".", 1)[-1].lower() in BINARY_EXTENSIONS:
                    raise _Refused(
                        f"{entry} is a binary file; a skill holds text files only (remove it or move it out)."
                    )
                if relative == SKILL_MD:
                    skill_md = _read_text(name, dir_fd, entry)
                    continue
                if len(files) >= MAX_FILES:
                    raise _Refused(
                        f"{shown} holds more than {MAX_FILES} files besides SKILL.md; "
                        f"a skill has at most {MAX_FILES}."
                    )
                files.append((relative, _read_text(name, dir_fd, entry)))
            dirnames[:] = descend
    finally:
        if parent_fd is not None:
            os.close(parent_fd)
    if skill_md is None:
        raise _Refused(
            f"no SKILL.md in {shown}. A skill directory holds a SKILL.md that starts with a frontmatter:\n"
            + parsing.EXAMPLE
        )
    if len(skill_md) > MAX_CONTENT_CHARS:
        raise _Refused(
            f"{shown}/SKILL.md has {len(skill_md)} characters; a SKILL.md holds at most {MAX_CONTENT_CHARS}."
        )
    return skill_md, files, skipped


@tool("publish_skill")
def publish_skill(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Register a workspace directory holding a SKILL.md (and other text files) as this agent's skill
    of the frontmatter's name: created, or updated to the next version."""
    path = args.get("path")
    if not isinstance(path, str) or not path.strip():
        return ToolResult.error(
            "missing required argument 'path': the skill's directory, e.g. skills/my-skill."
        )
    try:
        ws_real = real_workspace(ctx.workspace)
        target = resolve_path(path, workspace=ctx.workspace, denied_prefixes=_denied_prefixes(ctx))
        info = os.lstat(target) if os.path.lexists(target) else None
        if info is not None and stat.S_ISREG(info.st_mode) and target.name == SKILL_MD:
            target = target.parent
            info = os.lstat(target)
        shown = os.path.relpath(target, ws_real)
        if info is None:
            return ToolResult.error(
                f"directory not found: {path}. Give the workspace directory that holds the SKILL.md "
                "(list_files shows what is there)."
            )
        if not stat.S_ISDIR(info.st_mode):
            return ToolResult.error(f"{shown} is a file; give the directory that holds the skill's SKILL.md.")
        content, files, skipped = _collect(ctx, target, ws_real, shown)
    except (_Refused, PathError) as error:
        return ToolResult.error(str(error))
    except OSError as error:
        if disk_full(error):
            return ToolResult.error(DISK_FULL)
        return ToolResult.error(f"file system error: {error.strerror or error}.")
    try:
        skill, created = services.skill_publish(
            actor=ctx.actor, agent=ctx.agent, content=content, files=files, published_from=shown
        )
    except ServiceError as error:
        return ToolResult.error(f"{shown}/SKILL.md: {error.message}")
    verb = "Published" if created else f"Updated (version {skill.version})"
    listed = "".join(f"\n- {relative}" for relative, _ in files)
    text = (
        f"{verb} the skill {skill.name} from {shown} with {len(files)} other "
        f"file{'s' if len(files) != 1 else ''}."
        f"{listed}\nIt is this agent's skill now: skill_search finds it and use_skill loads it."
    )
    if skipped:
        text += f"\nSkipped hidden entries: {', '.join(skipped[:20])}."
    return ToolResult.ok(
        text,
        skill=skill.name,
        id=str(skill.pk),
        created=created,
        version=skill.version,
        files=[relative for relative, _ in files],
    )
