"""A scripted OpenAI-compatible provider on a real HTTP server (127.0.0.2, allowed through the SSRF guard's
test seam): /v1/models, /v1/chat/completions, /v1/images/generations, /v1/audio/speech,
/v1/audio/transcriptions, /v1/videos (and /v1/videos/<id>, /v1/videos/<id>/content), /v1/embeddings and
/v1/moderations. Every answer needs ``Authorization: Bearer <KEY>``; a wrong key gets a 401 that repeats
the key it was sent (as some providers do), so tests can prove it never reaches an output.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.local_http import Handler, Hit, LocalServer

PUBLIC_IP = "127.0.0.2"
KEY = "sk-test-provider-7f3a9c2e1b5d"
HEADER_SECRET = "org-secret-header-value-91d2"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"fake-png-body" * 4
MP3 = b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"fake-mp3-frames" * 8
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"fake-wav" * 8
MP4 = b"\x00\x00\x00\x18ftypmp42" + b"fake-mp4-box" * 16
VIDEO_ID = "video_123"

ChatScript = Callable[[dict[str, Any]], dict[str, Any]]


def chat_answer(
    content: str = "", *, tool_calls: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "fake-chat-2026",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        **extra,
    }


def tool_call(name: str, args: dict[str, Any], n: int = 1) -> dict[str, Any]:
    """A function call as a chat answer carries it, with the id ``call_<name>_<n>``."""
    return {
        "id": f"call_{name}_{n}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def scripted(*answers: dict[str, Any]) -> ChatScript:
    """Answers in order, one per chat request (the last one again after that); the requests are kept in
    ``.requests`` for inspection."""
    requests: list[dict[str, Any]] = []

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        return answers[min(len(requests), len(answers)) - 1]

    chat.requests = requests  # type: ignore[attr-defined]
    return chat


def _echo_chat(request: dict[str, Any]) -> dict[str, Any]:
    """Answers what it was asked about: the last user text, and the kinds of parts it carried."""
    last = request["messages"][-1]["content"]
    if isinstance(last, list):
        kinds = [p["type"] for p in last]
        text = next(p["text"] for p in last if p["type"] == "text")
        return chat_answer(f"seen {'+'.join(kinds)}: {text}")
    if request.get("modalities") == ["text", "audio"]:
        answer = chat_answer("")
        answer["choices"][0]["message"]["audio"] = {
            "id": "audio_1",
            "data": base64.b64encode(WAV if request["audio"]["format"] == "wav" else MP3).decode(),
            "transcript": "a short jingle",
        }
        return answer
    return chat_answer(f"answer to: {last[-200:]}")


@dataclass
class FakeProvider:
    server: LocalServer
    chat: ChatScript = _echo_chat
    video_polls_before_done: int = 1
    video_fails: bool = False
    refuse_video_input: bool = False
    polls: dict[str, int] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return self.server.url("/v1")

    @property
    def hits(self) -> list[Hit]:
        return self.server.hits

    def last(self, path: str) -> Hit:
        return next(h for h in reversed(self.server.hits) if h.path.split("?")[0] == "/v1/" + path)

    def last_json(self, path: str) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.last(path).body)
        return body

    def install(self) -> FakeProvider:
        routes: dict[str, Callable[[Handler], None]] = {
            "models": self._models,
            "chat/completions": self._chat,
            "images/generations": self._images,
            "audio/speech": self._speech,
            "audio/transcriptions": self._transcription,
            "videos": self._video_start,
            f"videos/{VIDEO_ID}": self._video_status,
            f"videos/{VIDEO_ID}/content": self._video_content,
            "embeddings": self._embeddings,
            "moderations": self._moderations,
        }
        for path, route in routes.items():
            self.server.routes["/v1/" + path] = self._authorised(route)
        return self

    def _authorised(self, route: Callable[[Handler], None]) -> Callable[[Handler], None]:
        def run(handler: Handler) -> None:
            sent = handler.headers.get("Authorization", "")
            if sent != f"Bearer {KEY}":
                body = {"error": {"message": f"Incorrect API key provided: {sent.removeprefix('Bearer ')}."}}
                handler.reply(401, json.dumps(body).encode(), "application/json")
                return
            route(handler)

        return run

    @staticmethod
    def _json(handler: Handler, value: Any, status: int = 200) -> None:
        handler.reply(status, json.dumps(value).encode(), "application/json")

    def _request(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.server.hits[-1].body)
        return body

    def _models(self, handler: Handler) -> None:
        ids = ["fake-chat", "fake-vision", "fake-image", "fake-tts", "fake-whisper", "fake-video"]
        self._json(handler, {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})

    def _chat(self, handler: Handler) -> None:
        request = self._request()
        if self.refuse_video_input and any(
            isinstance(m.get("content"), list) and any(p["type"] == "video_url" for p in m["content"])
            for m in request["messages"]
        ):
            self._json(handler, {"error": {"message": "video_url is not supported by this model"}}, 400)
            return
        answer = dict(self.chat(request))
        self._json(handler, answer, answer.pop("__status__", 200))  # a scripted failure names its status

    def _images(self, handler: Handler) -> None:
        request = self._request()
        data = [
            {
                "b64_json": base64.b64encode(PNG + bytes([i])).decode(),
                "revised_prompt": "a red fox, watercolour",
            }
            for i in range(request.get("n", 1))
        ]
        self._json(handler, {"created": 1, "data": data})

    def _speech(self, handler: Handler) -> None:
        handler.reply(200, MP3, "audio/mpeg")

    def _transcription(self, handler: Handler) -> None:
        body = self.server.hits[-1].body
        if b'name="file"' not in body or b'name="model"' not in body:
            self._json(handler, {"error": {"message": "file and model are required"}}, 400)
            return
        self._json(handler, {"text": "hello from the recording"})

    def _video_start(self, handler: Handler) -> None:
        self.polls[VIDEO_ID] = 0
        self._json(handler, {"id": VIDEO_ID, "object": "video", "status": "queued", "progress": 0})

    def _video_status(self, handler: Handler) -> None:
        seen = self.polls.get(VIDEO_ID, 0) + 1
        self.polls[VIDEO_ID] = seen
        answer: dict[str, Any]
        if self.video_fails:
            answer = {"id": VIDEO_ID, "status": "failed", "error": {"message": "content policy violation"}}
        elif seen > self.video_polls_before_done:
            answer = {"id": VIDEO_ID, "status": "completed", "progress": 100}
        else:
            answer = {"id": VIDEO_ID, "status": "in_progress", "progress": 40}
        self._json(handler, answer)

    def _video_content(self, handler: Handler) -> None:
        handler.reply(200, MP4, "video/mp4")

    def _embeddings(self, handler: Handler) -> None:
        request = self._request()
        self._json(
            handler,
            {"object": "list", "data": [{"index": 0, "embedding": [0.5, 0.25]}], "model": request["model"]},
        )

    def _moderations(self, handler: Handler) -> None:
        self._json(handler, {"id": "modr-1", "results": [{"flagged": False}]})
