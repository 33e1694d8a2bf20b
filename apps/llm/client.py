"""The client of OpenAI-compatible providers: typed calls over httpx through the SSRF guard.

Every request goes through :func:`apps.toolkit.ssrf.guarded_client` (public addresses only, checked at
connect time), within the provider's timeout (connection to last byte) and a response-size cap per
call. Every failure is one :class:`ProviderError` whose message says what happened (the provider, the
HTTP status and the endpoint's own error message) and never holds the API key or a header value.

Use :func:`client_for` (a capability, optionally a provider name) or :class:`ProviderClient` (a
provider)::

    client, model = client_for(tenant, "chat")
    result = client.chat([{"role": "user", "content": "Hi"}], tools=[...], model=model, temperature=0)
    result.content, result.tool_calls, result.usage, result.finish_reason, result.model
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from apps.llm.models import Provider
from apps.llm.selectors import ProviderUnavailable, resolve
from apps.tenants.api.parsers import strict_loads
from apps.toolkit.ssrf import USER_AGENT, AddressPolicy, SSRFBlocked, guarded_client

if TYPE_CHECKING:
    from apps.tenants.models import Tenant

CONNECT_TIMEOUT = 10.0
MAX_JSON_BYTES = 8 * 1024 * 1024  # a chat answer, a model list, an openai_compat_call answer
MAX_MEDIA_BYTES = 32 * 1024 * 1024  # one generated image, speech or audio file
MAX_IMAGES_RESPONSE_BYTES = 4 * 48 * 1024 * 1024  # up to 4 images as base64 in one JSON answer
MAX_VIDEO_BYTES = 100 * 1024 * 1024
MAX_ERROR_DETAIL = 300
VIDEO_POLL_SECONDS = 2.0
VIDEO_DONE = frozenset({"completed", "succeeded", "success"})
VIDEO_FAILED = frozenset({"failed", "error", "cancelled", "canceled", "expired"})

__all__ = [
    "ChatResult",
    "GeneratedFile",
    "ProviderClient",
    "ProviderError",
    "ProviderUnavailable",
    "ToolCall",
    "Usage",
    "VideoJob",
    "client_for",
    "make_client",
    "resolve",
]


TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class ProviderError(Exception):
    """A provider call failed; ``str(error)`` says why (status and the endpoint's message, no secrets)."""

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        # Worth another try a moment later: no answer in time, no connection, or HTTP 429 / 5xx.
        self.transient = transient or status in TRANSIENT_STATUSES


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asks for. ``arguments`` is the JSON text the model wrote."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as an object, read under the API's JSON rules (no NaN or infinite numbers, no
        duplicate keys, bounded depth; NUL characters are left to the pipeline, as for an API call);
        :class:`ProviderError` when the model wrote no such JSON object."""
        try:
            value = strict_loads(self.arguments or "{}", allow_nul=True)
        except json.JSONDecodeError:
            raise ProviderError(f"the model's arguments for {self.name} are not JSON") from None
        except ValueError as exc:
            raise ProviderError(f"the model's arguments for {self.name} are not accepted: {exc}") from None
        if not isinstance(value, dict):
            raise ProviderError(f"the model's arguments for {self.name} are not a JSON object")
        return value


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


@dataclass(frozen=True)
class ChatResult:
    """One chat completion: the text, the tool calls, token usage, why it stopped and the model that
    answered (as the provider names it)."""

    content: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: str
    model: str
    audio: bytes = field(default=b"", repr=False)  # audio output (create_audio), decoded
    audio_transcript: str = ""


@dataclass(frozen=True)
class GeneratedFile:
    data: bytes = field(repr=False)
    media_type: str
    extension: str  # without the dot
    note: str = ""  # what the provider said besides (a revised prompt, a transcript)


@dataclass(frozen=True)
class VideoJob:
    id: str
    status: str
    progress: int | None = None
    error: str = ""

    @property
    def done(self) -> bool:
        return self.status in VIDEO_DONE

    @property
    def failed(self) -> bool:
        return self.status in VIDEO_FAILED


_AUDIO_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/L16",
    "pcm16": "audio/L16",
}


def audio_media_type(fmt: str) -> str:
    return _AUDIO_TYPES.get(fmt, "application/octet-stream")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class ProviderClient:
    """Calls to one provider. Cheap to make: each call opens (and closes) its own guarded connection."""

    def __init__(self, provider: Provider, *, policy: AddressPolicy | None = None) -> None:
        self.provider = provider
        self.name = provider.name
        self.base_url = provider.base_url.rstrip("/")
        self.timeout = float(provider.timeout_seconds)
        self._api_key = provider.api_key
        self._headers = provider.extra_headers
        self._policy = policy

    def __repr__(self) -> str:
        return f"<ProviderClient {self.name} {self.base_url}>"

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values an output must never show (the key and the extra header values)."""
        return tuple(v for v in (self._api_key, *self._headers.values()) if v)

    def redact(self, text: str) -> str:
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "[redacted]")
        return text

    # --- transport --------------------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        data: Mapping[str, str] | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> tuple[int, httpx.Headers, bytes]:
        """Send one request and read its body up to ``max_bytes`` within the provider's timeout."""
        total = timeout if timeout is not None else self.timeout
        max_bytes = MAX_JSON_BYTES if max_bytes is None else max_bytes
        headers = {**self._headers, "Accept-Encoding": "identity", "User-Agent": USER_AGENT}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        content: bytes | None = None
        if json_body is not None:
            content = json.dumps(json_body, ensure_ascii=False).encode()
            headers["Content-Type"] = "application/json"
        endpoint = self.url(path)
        policy = self._policy or AddressPolicy.from_settings()
        deadline = time.monotonic() + total
        try:
            url = policy.check_url(endpoint)
            with (
                guarded_client(
                    policy=policy, connect_timeout=min(CONNECT_TIMEOUT, total), read_timeout=total
                ) as client,
                client.stream(
                    method, url, content=content, data=data, files=files, headers=headers
                ) as response,
            ):
                body = self._read(response, deadline, max_bytes, total)
                return response.status_code, response.headers, body
        except SSRFBlocked as exc:
            raise ProviderError(
                f"the provider {self.name} is refused ({exc}); its base URL must be a public https address"
            ) from None
        except httpx.TimeoutException:
            raise ProviderError(
                f"the provider {self.name} did not answer within {total:.0f} s", transient=True
            ) from None
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"the provider {self.name} could not be reached: {self.redact(str(exc))[:MAX_ERROR_DETAIL]}",
                transient=True,
            ) from None

    def _read(self, response: httpx.Response, deadline: float, max_bytes: int, total: float) -> bytes:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise ProviderError(
                f"the provider {self.name} answered with Content-Encoding {encoding!r}; only identity is read"
            )
        body = bytearray()
        for chunk in response.iter_raw():
            if time.monotonic() > deadline:
                raise ProviderError(
                    f"the provider {self.name} did not finish its answer within {total:.0f} s"
                )
            body += chunk
            if len(body) > max_bytes:
                raise ProviderError(f"the provider {self.name}'s answer is larger than {max_bytes} bytes")
        return bytes(body)

    def _status_error(self, path: str, status: int, body: bytes) -> ProviderError:
        detail = ""
        try:
            parsed = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            parsed = None
        message: Any = None
        if isinstance(parsed, dict):
            error = parsed.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            if message is None:
                message = parsed.get("message") or parsed.get("detail")
        elif body and not body.lstrip().startswith(b"<"):
            message = body[:MAX_ERROR_DETAIL].decode("utf-8", errors="replace")
        if isinstance(message, str) and message.strip():
            detail = ": " + self.redact(" ".join(message.split()))[:MAX_ERROR_DETAIL]
        if status in (401, 403):
            hint = "the API key was refused; set a valid key under Providers"
        elif status == 404:
            hint = "check the base URL and the model name"
        elif status == 429:
            hint = "the provider's rate limit or quota was reached; try again later"
        elif status in (400, 422):
            hint = "the provider refused the request"
        else:
            hint = "the provider failed"
        return ProviderError(
            f"the provider {self.name} answered HTTP {status} to {path} ({hint}){detail}", status=status
        )

    def _json(self, method: str, path: str, *, max_bytes: int | None = None, **kwargs: Any) -> Any:
        status, _headers, body = self._request(method, path, max_bytes=max_bytes, **kwargs)
        if not 200 <= status < 300:
            raise self._status_error(path, status, body)
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise ProviderError(f"the provider {self.name}'s answer to {path} is not JSON") from None

    def _binary(self, method: str, path: str, *, max_bytes: int, **kwargs: Any) -> tuple[bytes, str]:
        status, headers, body = self._request(method, path, max_bytes=max_bytes, **kwargs)
        if not 200 <= status < 300:
            raise self._status_error(path, status, body)
        media_type = str(headers.get("content-type", "")).split(";", 1)[0].strip().lower()
        if media_type in ("application/json", "text/html"):
            raise ProviderError(f"the provider {self.name} answered {path} with {media_type}, not a file")
        if not body:
            raise ProviderError(f"the provider {self.name} answered {path} with an empty file")
        return body, media_type

    # --- calls -----------------------------------------------------------------------------------------

    def post_json(self, path: str, body: dict[str, Any], *, max_bytes: int | None = None) -> Any:
        """POST ``body`` to ``path`` (relative to the base URL) and return the JSON answer."""
        return self._json("POST", path, json_body=body, max_bytes=max_bytes)

    def list_models(self) -> list[str]:
        """``GET /models``: the model ids the provider offers."""
        answer = self._json("GET", "models")
        data = answer.get("data") if isinstance(answer, dict) else answer
        if not isinstance(data, list):
            raise ProviderError(f"the provider {self.name}'s answer to models has no 'data' list")
        return [
            str(item["id"]) for item in data if isinstance(item, dict) and isinstance(item.get("id"), str)
        ]

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        **options: Any,
    ) -> ChatResult:
        """``POST /chat/completions``. ``tools`` are OpenAI function definitions (``{"type": "function",
        "function": {...}}``); ``options`` go into the body as given (temperature, max_tokens, …). The
        model is ``model``, else the provider's chat model."""
        chosen = model or self.provider.chat_model
        if not chosen:
            raise ProviderError(f"the provider {self.name} has no chat model; set one under Providers")
        body: dict[str, Any] = {**options, "model": chosen, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
        answer = self.post_json("chat/completions", body, max_bytes=MAX_MEDIA_BYTES * 2)
        return self._chat_result(answer, chosen)

    def _chat_result(self, answer: Any, asked: str) -> ChatResult:
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ProviderError(f"the provider {self.name}'s chat answer has no choices")
        choice: dict[str, Any] = choices[0]
        raw_message = choice.get("message")
        message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(
                str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
            )
        calls: list[ToolCall] = []
        for raw in message.get("tool_calls") or []:
            function = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise ProviderError(f"the provider {self.name}'s chat answer has a malformed tool call")
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments if arguments is not None else {})
            calls.append(ToolCall(id=str(raw.get("id") or ""), name=function["name"], arguments=arguments))
        raw_usage = answer.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        audio_data = b""
        transcript = ""
        audio = message.get("audio")
        if isinstance(audio, dict) and isinstance(audio.get("data"), str):
            audio_data = _b64(audio["data"], f"the provider {self.name}'s audio")
            transcript = str(audio.get("transcript") or "")
        return ChatResult(
            content=content if isinstance(content, str) else "",
            tool_calls=tuple(calls),
            usage=Usage(
                prompt_tokens=_int(usage.get("prompt_tokens")),
                completion_tokens=_int(usage.get("completion_tokens")),
                total_tokens=_int(usage.get("total_tokens")),
            ),
            finish_reason=str(choice.get("finish_reason") or ""),
            model=str(answer.get("model") or asked),
            audio=audio_data,
            audio_transcript=transcript,
        )

    def images(
        self, prompt: str, *, model: str | None = None, size: str | None = None, n: int = 1
    ) -> list[GeneratedFile]:
        """``POST /images/generations`` with ``response_format`` b64_json: the images, decoded."""
        chosen = model or self.provider.image_model
        body: dict[str, Any] = {"model": chosen, "prompt": prompt, "n": n, "response_format": "b64_json"}
        if size:
            body["size"] = size
        answer = self.post_json("images/generations", body, max_bytes=MAX_IMAGES_RESPONSE_BYTES)
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or not data:
            raise ProviderError(f"the provider {self.name}'s image answer has no 'data' list")
        files: list[GeneratedFile] = []
        for item in data[:n]:
            encoded = item.get("b64_json") if isinstance(item, dict) else None
            if not isinstance(encoded, str):
                raise ProviderError(f"the provider {self.name} sent an image without b64_json")
            image = _b64(encoded, f"the provider {self.name}'s image")
            if len(image) > MAX_MEDIA_BYTES:
                raise ProviderError(
                    f"the provider {self.name}'s image is larger than {MAX_MEDIA_BYTES} bytes"
                )
            media_type, extension = _image_type(image)
            files.append(GeneratedFile(image, media_type, extension, str(item.get("revised_prompt") or "")))
        return files

    def speech(
        self, text: str, *, model: str | None = None, voice: str = "alloy", fmt: str = "mp3"
    ) -> GeneratedFile:
        """``POST /audio/speech``: the spoken text as an audio file."""
        chosen = model or self.provider.speech_model
        body = {"model": chosen, "input": text, "voice": voice, "response_format": fmt}
        data, media_type = self._binary("POST", "audio/speech", json_body=body, max_bytes=MAX_MEDIA_BYTES)
        return GeneratedFile(data, media_type or audio_media_type(fmt), fmt)

    def transcription(
        self,
        data: bytes,
        *,
        filename: str,
        media_type: str,
        model: str | None = None,
        prompt: str = "",
    ) -> str:
        """``POST /audio/transcriptions`` (multipart): the text spoken in ``data``."""
        chosen = model or self.provider.transcription_model
        fields = {"model": chosen, "response_format": "json"}
        if prompt:
            fields["prompt"] = prompt
        answer = self._json(
            "POST", "audio/transcriptions", data=fields, files={"file": (filename, data, media_type)}
        )
        text = answer.get("text") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise ProviderError(f"the provider {self.name}'s transcription answer has no 'text'")
        return text

    def create_audio(
        self, prompt: str, *, model: str | None = None, voice: str = "alloy", fmt: str = "mp3"
    ) -> GeneratedFile:
        """Audio output of a chat completion (``modalities: ["text", "audio"]``), decoded."""
        chosen = model or self.provider.audio_model
        result = self.chat(
            [{"role": "user", "content": prompt}],
            model=chosen,
            modalities=["text", "audio"],
            audio={"voice": voice, "format": fmt},
        )
        if not result.audio:
            raise ProviderError(f"the provider {self.name} answered without audio (model {chosen})")
        extension = "pcm" if fmt == "pcm16" else fmt
        return GeneratedFile(result.audio, audio_media_type(fmt), extension, result.audio_transcript)

    def video_start(
        self, prompt: str, *, model: str | None = None, seconds: int | None = None, size: str | None = None
    ) -> VideoJob:
        """``POST /videos``: start rendering; the job to poll."""
        chosen = model or self.provider.video_model
        body: dict[str, Any] = {"model": chosen, "prompt": prompt}
        if seconds is not None:
            body["seconds"] = str(seconds)
        if size:
            body["size"] = size
        return self._video_job(self.post_json("videos", body))

    def video_status(self, video_id: str) -> VideoJob:
        """``GET /videos/{id}``."""
        return self._video_job(self._json("GET", f"videos/{_path_part(video_id)}"))

    def video_content(self, video_id: str) -> GeneratedFile:
        """``GET /videos/{id}/content``: the rendered video."""
        data, media_type = self._binary(
            "GET", f"videos/{_path_part(video_id)}/content", max_bytes=MAX_VIDEO_BYTES
        )
        return GeneratedFile(data, media_type or "video/mp4", "webm" if "webm" in media_type else "mp4")

    def wait_for_video(
        self, job: VideoJob, *, wait_seconds: float, sleep: Callable[[float], None] = time.sleep
    ) -> VideoJob:
        """Poll until the job is done or failed, or ``wait_seconds`` have passed (then the job as last
        seen, still rendering)."""
        deadline = time.monotonic() + wait_seconds
        while not job.done and not job.failed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            sleep(min(VIDEO_POLL_SECONDS, remaining))
            job = self.video_status(job.id)
        return job

    def _video_job(self, answer: Any) -> VideoJob:
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), str) or not answer["id"]:
            raise ProviderError(f"the provider {self.name}'s video answer has no id")
        error = answer.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        progress = answer.get("progress")
        return VideoJob(
            id=answer["id"][:200],
            status=str(answer.get("status") or "queued").lower(),
            progress=progress if isinstance(progress, int) and not isinstance(progress, bool) else None,
            error=self.redact(str(message))[:MAX_ERROR_DETAIL] if message else "",
        )


def _path_part(value: str) -> str:
    """An id put into a URL path: only characters that cannot change the path."""
    cleaned = "".join(c for c in value if c.isalnum() or c in "-_.")
    if not cleaned or cleaned != value or cleaned in (".", ".."):
        raise ProviderError(f"{value[:64]!r} is not a valid id (letters, digits, '-', '_' and '.')")
    return cleaned


def _b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ProviderError(f"{what} is not valid base64") from None


def _image_type(data: bytes) -> tuple[str, str]:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png", "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg", "jpg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp", "webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif", "gif"
    return "application/octet-stream", "bin"


def make_client(provider: Provider, *, policy: AddressPolicy | None = None) -> ProviderClient:
    """The client for ``provider``'s kind (each kind answers the same calls; only OpenAI-compatible
    endpoints exist so far)."""
    if provider.kind != Provider.Kind.OPENAI_COMPATIBLE:
        raise ProviderError(
            f"the provider {provider.name} is of kind {provider.kind!r}, which this Toolgate cannot call"
        )
    return ProviderClient(provider, policy=policy)


def client_for(
    tenant: Tenant, capability: str, provider_name: str | None = None, *, policy: AddressPolicy | None = None
) -> tuple[ProviderClient, str]:
    """The client and model for ``capability`` (see :func:`apps.llm.selectors.resolve`); raises
    :class:`ProviderUnavailable`."""
    provider, model = resolve(tenant, capability, provider_name)
    return make_client(provider, policy=policy), model
