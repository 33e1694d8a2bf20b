"""The provider-backed tools: create_image, create_audio, create_video, tts, read_image, read_audio,
read_document, read_video and openai_compat_call, and workspace_dir.

Each resolves its provider and model for one capability (the provider the agent names, else the
tenant's default, else the first enabled provider with that capability: ``apps.llm.selectors.resolve``)
and answers ``unavailable: no provider with … model is configured — add one under Providers`` when there
is none. The provider's key and header values are registered with the call's scrubber before any request,
so no output can carry them. Generated files are saved in the call's workspace and inputs read from it
(or fetched from a URL through the SSRF guard) by :mod:`apps.llm.media`.
"""

from __future__ import annotations

import base64
import io
import json
import logging
from collections.abc import Callable
from typing import Any

from apps.llm import media
from apps.llm.client import ChatResult, GeneratedFile, ProviderClient, ProviderError, client_for, make_client
from apps.llm.media import InputFile, MediaError, SavedFile
from apps.llm.selectors import ProviderUnavailable, pick
from apps.sandbox.manager import CONTAINER_WORKDIR
from apps.teams import team_settings
from apps.teams.selectors import team_for_agent
from apps.toolkit.context import CallContext
from apps.toolkit.registry import ToolFunction, tool
from apps.toolkit.results import ToolResult
from apps.toolkit.workspace import PathError
from apps.tools.catalog import OPENAI_COMPAT_PATHS

logger = logging.getLogger(__name__)

MAX_IMAGE_INPUT_BYTES = 20 * 1024 * 1024
MAX_AUDIO_INPUT_BYTES = 25 * 1024 * 1024  # OpenAI's transcription limit
MAX_VIDEO_INPUT_BYTES = 20 * 1024 * 1024  # sent inline as a data URL
MAX_DOCUMENT_INPUT_BYTES = 32 * 1024 * 1024
MAX_DOCUMENT_PAGES = 100
MAX_DOCUMENT_CHARS = 200_000
MAX_ANSWER_CHARS = 100_000
MAX_COMPAT_BODY_BYTES = 1024 * 1024
MAX_COMPAT_ANSWER_BYTES = 4 * 1024 * 1024
VIDEO_WAIT_SECONDS = 120.0
DEFAULT_VOICE = "alloy"
TEXT_DOCUMENT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml")
MODEL_FILLED_PATHS = ("chat/completions", "completions", "responses")


class _ArgError(Exception):
    """A bad argument; the message is the error result."""


def _text(args: dict[str, Any], name: str, *, required: bool = False) -> str:
    value = args.get(name)
    if value is None or value == "":
        if required:
            raise _ArgError(f"missing required argument {name!r}.")
        return ""
    if not isinstance(value, str):
        raise _ArgError(f"argument {name!r} must be a string.")
    if required and not value.strip():
        raise _ArgError(f"argument {name!r} must not be blank.")
    return value


def _guard(name: str) -> Callable[[ToolFunction], ToolFunction]:
    """Turn the expected failures of a provider-backed tool into error results (tools never raise)."""

    def wrap(function: ToolFunction) -> ToolFunction:
        def run(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
            try:
                return function(ctx, args)
            except ProviderUnavailable as exc:
                return ToolResult.error(str(exc))
            except ProviderError as exc:
                logger.info("%s: provider call failed", name, extra={"call_id": ctx.call_id})
                return ToolResult.error(f"{name} failed: {exc.message}.", status=exc.status)
            except (_ArgError, MediaError, PathError) as exc:
                return ToolResult.error(str(exc))
            except PermissionError:
                return ToolResult.error("permission denied by the file system; choose another path.")

        run.__name__ = function.__name__
        run.__doc__ = function.__doc__
        return run

    return wrap


def _client(ctx: CallContext, capability: str, args: dict[str, Any]) -> tuple[ProviderClient, str]:
    client, model = client_for(ctx.tenant, capability, _text(args, "provider") or None)
    for secret in client.secrets:
        ctx.scrubber.register(secret)
    return client, model


def _save(
    ctx: CallContext, tool_name: str, args: dict[str, Any], output: GeneratedFile, index: int | None = None
) -> SavedFile:
    """Save a generated file in the workspace, at the call's ``path`` or under a generated name."""
    return media.save_output(
        ctx,
        tool=tool_name,
        path=_text(args, "path") or None,
        data=output.data,
        extension=output.extension,
        media_type=output.media_type,
        index=index,
    )


def _saved_message(verb: str, files: list[SavedFile], client: ProviderClient, model: str) -> str:
    lines = [f"{verb} with {client.name} ({model}):"]
    lines += [f"- {f.path} ({f.bytes} bytes, {f.media_type})" for f in files]
    return "\n".join(lines)


def _saved_result(
    verb: str, files: list[SavedFile], client: ProviderClient, model: str, **extra: Any
) -> ToolResult:
    message = _saved_message(verb, files, client, model)
    note = extra.pop("note", "")
    if note:
        message += f"\n{note}"
    return ToolResult.ok(
        message, files=[f.as_dict() for f in files], provider=client.name, model=model, **extra
    )


# --- generation -----------------------------------------------------------------------------------------


@tool("create_image")
@_guard("create_image")
def create_image(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Generate 1-4 images and save them in the workspace."""
    prompt = _text(args, "prompt", required=True)
    count = args.get("n", 1)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 4:
        raise _ArgError("argument 'n' must be a whole number from 1 to 4.")
    client, model = _client(ctx, "image", args)
    images = client.images(prompt, model=model, size=_text(args, "size") or None, n=count)
    files = [
        _save(ctx, "create_image", args, image, index if len(images) > 1 else None)
        for index, image in enumerate(images, 1)
    ]
    revised = next((i.note for i in images if i.note), "")
    return _saved_result(
        f"Created {len(files)} image(s)",
        files,
        client,
        model,
        note=f"Revised prompt: {revised}" if revised else "",
    )


@tool("tts")
@_guard("tts")
def tts(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Speak a text and save the audio in the workspace."""
    text = _text(args, "text", required=True)
    fmt = _text(args, "format") or "mp3"
    client, model = _client(ctx, "speech", args)
    audio = client.speech(text, model=model, voice=_text(args, "voice") or DEFAULT_VOICE, fmt=fmt)
    saved = _save(ctx, "tts", args, audio)
    return _saved_result("Spoke the text", [saved], client, model)


@tool("create_audio")
@_guard("create_audio")
def create_audio(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Generate audio with a chat model that answers in audio, and save it in the workspace."""
    prompt = _text(args, "prompt", required=True)
    fmt = _text(args, "format") or "mp3"
    client, model = _client(ctx, "audio", args)
    audio = client.create_audio(prompt, model=model, voice=_text(args, "voice") or DEFAULT_VOICE, fmt=fmt)
    saved = _save(ctx, "create_audio", args, audio)
    note = f"Transcript: {audio.note[:2000]}" if audio.note else ""
    return _saved_result("Created audio", [saved], client, model, note=note)


@tool("create_video")
@_guard("create_video")
def create_video(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Start a video (or look at one started earlier with ``video_id``), wait for it within a bound and
    save it in the workspace; a video still rendering is reported with its id."""
    video_id = _text(args, "video_id")
    prompt = _text(args, "prompt")
    if not video_id and not prompt.strip():
        raise _ArgError(
            "create_video needs a prompt (what the video shows), or video_id to fetch a video started "
            "earlier."
        )
    seconds = args.get("seconds")
    if seconds is not None and (
        isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= 60
    ):
        raise _ArgError("argument 'seconds' must be a whole number from 1 to 60.")
    client, model = _client(ctx, "video", args)
    if video_id:
        job = client.video_status(video_id)
    else:
        job = client.video_start(prompt, model=model, seconds=seconds, size=_text(args, "size") or None)
    job = client.wait_for_video(job, wait_seconds=VIDEO_WAIT_SECONDS)
    if job.failed:
        reason = f": {job.error}" if job.error else ""
        return ToolResult.error(
            f"create_video: the video {job.id} {job.status}{reason}.", video_id=job.id, status=job.status
        )
    if not job.done:
        progress = f", {job.progress}% done" if job.progress is not None else ""
        return ToolResult.ok(
            f"The video is still rendering, id {job.id} (status {job.status}{progress}). Call create_video "
            f'again with video_id="{job.id}" later to save it.',
            video_id=job.id,
            status=job.status,
            progress=job.progress,
            provider=client.name,
        )
    video = client.video_content(job.id)
    saved = _save(ctx, "create_video", args, video)
    return _saved_result(f"Created the video {job.id}", [saved], client, model, video_id=job.id)


# --- reading --------------------------------------------------------------------------------------------


def _input(ctx: CallContext, tool_name: str, args: dict[str, Any], max_bytes: int) -> InputFile:
    return media.read_input(
        ctx,
        tool=tool_name,
        path=_text(args, "path") or None,
        url=_text(args, "url") or None,
        max_bytes=max_bytes,
    )


def _data_url(file: InputFile) -> str:
    return f"data:{file.media_type};base64,{base64.b64encode(file.data).decode('ascii')}"


def _answer(text: str) -> str:
    if len(text) > MAX_ANSWER_CHARS:
        return text[:MAX_ANSWER_CHARS] + f"\n[… cut at {MAX_ANSWER_CHARS} characters]"
    return text


def _look_at(client: ProviderClient, model: str, file: InputFile, *, part: str, prompt: str) -> ChatResult:
    """Ask the vision model ``prompt`` about ``file``, sent inline as a ``part`` (``image_url`` or
    ``video_url``) data URL."""
    content = [{"type": "text", "text": prompt}, {"type": part, part: {"url": _data_url(file)}}]
    return client.chat([{"role": "user", "content": content}], model=model)


def _seen_result(result: ChatResult, file: InputFile, client: ProviderClient) -> ToolResult:
    return ToolResult.ok(
        _answer(result.content),
        source=file.shown,
        provider=client.name,
        model=result.model,
        usage=result.usage.__dict__,
    )


@tool("read_image")
@_guard("read_image")
def read_image(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Send an image to the vision model with the prompt."""
    client, model = _client(ctx, "vision", args)
    image = _input(ctx, "read_image", args, MAX_IMAGE_INPUT_BYTES)
    if not image.media_type.startswith("image/"):
        raise MediaError(
            f"{image.shown} is not an image ({image.media_type}); read_image reads PNG, JPEG, GIF or WebP."
        )
    prompt = _text(args, "prompt") or "Describe this image."
    result = _look_at(client, model, image, part="image_url", prompt=prompt)
    return _seen_result(result, image, client)


@tool("read_video")
@_guard("read_video")
def read_video(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Send a video (as a ``video_url`` data URL) to the vision model with the prompt."""
    client, model = _client(ctx, "vision", args)
    video = _input(ctx, "read_video", args, MAX_VIDEO_INPUT_BYTES)
    if not video.media_type.startswith("video/"):
        raise MediaError(f"{video.shown} is not a video ({video.media_type}); read_video reads MP4 or WebM.")
    prompt = _text(args, "prompt") or "Describe this video."
    try:
        result = _look_at(client, model, video, part="video_url", prompt=prompt)
    except ProviderError as exc:
        if exc.status in (400, 415, 422):
            return ToolResult.error(
                f"read_video: the provider {client.name} refused the video ({exc.message}). Its model "
                f"{model} may not read video input; configure a vision model that accepts video_url under "
                "Providers.",
                status=exc.status,
            )
        raise
    return _seen_result(result, video, client)


@tool("read_audio")
@_guard("read_audio")
def read_audio(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Transcribe an audio file."""
    client, model = _client(ctx, "transcription", args)
    audio = _input(ctx, "read_audio", args, MAX_AUDIO_INPUT_BYTES)
    if not (audio.media_type.startswith("audio/") or audio.media_type.startswith("video/")):
        raise MediaError(
            f"{audio.shown} is not audio ({audio.media_type}); read_audio reads MP3, WAV, OGG, FLAC, M4A "
            "or WebM."
        )
    text = client.transcription(
        audio.data,
        filename=audio.name,
        media_type=audio.media_type,
        model=model,
        prompt=_text(args, "prompt"),
    )
    return ToolResult.ok(
        _answer(text) or "(no speech found)", source=audio.shown, provider=client.name, model=model
    )


def _pdf_text(file: InputFile) -> tuple[str, int, bool]:
    """The text of a PDF's first pages: (text, pages read, whether it was cut)."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(file.data))
        if reader.is_encrypted:
            raise MediaError(f"{file.shown} is an encrypted PDF; read_document cannot open it.")
        total = len(reader.pages)
        parts: list[str] = []
        size = 0
        read = 0
        for page in reader.pages[:MAX_DOCUMENT_PAGES]:
            read += 1
            text = page.extract_text() or ""
            parts.append(f"[page {read}]\n{text}")
            size += len(text)
            if size >= MAX_DOCUMENT_CHARS:
                break
    except MediaError:
        raise
    except Exception as exc:  # an untrusted file: any parser failure means "not a PDF we can read"
        raise MediaError(f"{file.shown} could not be read as a PDF ({type(exc).__name__}: {exc}).") from None
    text = "\n\n".join(parts)
    cut = read < total or len(text) > MAX_DOCUMENT_CHARS
    return text[:MAX_DOCUMENT_CHARS], total, cut


@tool("read_document")
@_guard("read_document")
def read_document(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Read a PDF (text extracted locally) or a text file, and let the document model answer the prompt
    about it."""
    client, model = _client(ctx, "document", args)
    document = _input(ctx, "read_document", args, MAX_DOCUMENT_INPUT_BYTES)
    note = ""
    if document.media_type == "application/pdf":
        text, pages, cut = _pdf_text(document)
        if not text.strip().replace("[page", "").strip():
            raise MediaError(
                f"{document.shown} has no extractable text (a scanned PDF?); use read_image on its pages."
            )
        note = f"PDF, {pages} page(s)" + (
            f"; only the first {MAX_DOCUMENT_PAGES} pages or {MAX_DOCUMENT_CHARS} characters were read"
            if cut
            else ""
        )
    elif document.media_type.startswith(TEXT_DOCUMENT_TYPES) or _is_text(document.data):
        if b"\x00" in document.data[:8192]:
            raise MediaError(f"{document.shown} is a binary file; read_document reads PDF and text files.")
        text = document.data.decode("utf-8", errors="replace")
        cut = len(text) > MAX_DOCUMENT_CHARS
        text = text[:MAX_DOCUMENT_CHARS]
        note = "text" + (f"; only the first {MAX_DOCUMENT_CHARS} characters were read" if cut else "")
    else:
        raise MediaError(
            f"{document.shown} is {document.media_type}; read_document reads PDF and text files (use "
            "read_image for images)."
        )
    prompt = _text(args, "prompt") or "Summarise this document."
    result = client.chat(
        [
            {
                "role": "system",
                "content": "Answer the request about the document below, using only what it says.",
            },
            {
                "role": "user",
                "content": f"Document ({document.shown}, {note}):\n\n{text}\n\nRequest: {prompt}",
            },
        ],
        model=model,
    )
    return ToolResult.ok(
        _answer(result.content),
        source=document.shown,
        provider=client.name,
        model=result.model,
        document=note,
    )


def _is_text(data: bytes) -> bool:
    try:
        data[:65536].decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > 65530  # a character cut at the sample's end
    return True


# --- openai_compat_call and workspace_dir ---------------------------------------------------------------


@tool("openai_compat_call")
@_guard("openai_compat_call")
def openai_compat_call(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """POST ``body`` to an allow-listed path of a provider and return its JSON answer."""
    path = _text(args, "path", required=True)
    if path not in OPENAI_COMPAT_PATHS:
        raise _ArgError(f"path must be one of: {', '.join(OPENAI_COMPAT_PATHS)}.")
    body = args.get("body")
    if not isinstance(body, dict):
        raise _ArgError("argument 'body' must be a JSON object (the request body).")
    if body.get("stream"):
        raise _ArgError("streaming answers are not supported; leave out stream or set it to false.")
    if len(json.dumps(body, ensure_ascii=False).encode()) > MAX_COMPAT_BODY_BYTES:
        raise _ArgError(f"the body is larger than {MAX_COMPAT_BODY_BYTES} bytes.")
    provider = pick(ctx.tenant, _text(args, "provider") or None)
    client = make_client(provider)
    for secret in client.secrets:
        ctx.scrubber.register(secret)
    if "model" not in body:
        if path not in MODEL_FILLED_PATHS or not provider.chat_model:
            raise _ArgError(
                f"body.model is required for {path} (the provider {provider.name} has no default for it)."
            )
        body = {**body, "model": provider.chat_model}
    answer = client.post_json(path, body, max_bytes=MAX_COMPAT_ANSWER_BYTES)
    text = json.dumps(answer, ensure_ascii=False, indent=1)
    return ToolResult.ok(_answer(text), provider=provider.name, path=path, model=str(body.get("model", "")))


@tool("workspace_dir")
def workspace_dir(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """The call's workspace as the agent sees it, and its team's workspace arrangement."""
    scope = "user" if ctx.agent.type == "open" and ctx.user_id else "agent"
    info: dict[str, Any] = {
        "workspace": ".",
        "scope": scope,
        "sandbox_path": CONTAINER_WORKDIR,
        "user_id": ctx.user_id if scope == "user" else "",
    }
    lines = [
        "Your workspace is the current directory: give file tools paths relative to it (e.g. notes/todo.md).",
        f"In the exec sandbox it is mounted at {CONTAINER_WORKDIR}.",
        "It belongs to you and this user." if scope == "user" else "It belongs to this agent.",
    ]
    team = team_for_agent(tenant=ctx.tenant, agent=ctx.agent)
    if team is not None:
        shared = team_settings.shared_workspace(team.settings or {})
        info["team"] = {
            "name": team.name,
            "lead": team.lead_id == ctx.agent.pk,
            "workspace_scope": "shared" if shared else "chat",
            "chat_id": "" if shared else ctx.chat_id,
        }
        where = "one board for every chat" if shared else f"the board of this chat, {ctx.chat_id or 'none'}"
        lines.append(
            f"You are in the team {team.name} ({'lead' if team.lead_id == ctx.agent.pk else 'member'}); its "
            f"workspace scope is {info['team']['workspace_scope']} ({where}). Files pass between members "
            "through team_tasks attach and team_message media, as paths in each member's own workspace."
        )
    return ToolResult.ok("\n".join(lines), **info)
