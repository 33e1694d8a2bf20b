"""Local peers of the messaging tests on 127.0.0.2 (allowed through the SSRF guard's test seam): a
webhook receiver and a fake Telegram Bot API, each recording what it got."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from tests.local_http import Handler, LocalServer

PUBLIC_IP = "127.0.0.2"
TOKEN = "123456789:AAEsecretBotTokenValue_9f8e7d6c5b"
WEBHOOK_SECRET = "whsec-signing-secret-4a1b2c3d"
HEADER_SECRET = "Bearer header-secret-value-77aa"
HOOK_PATH = "/hooks/toolgate"


@dataclass
class FakeWebhook:
    """Answers 200 with ``{"id": "msg-<n>"}``; ``status`` and ``delay`` change that."""

    server: LocalServer
    status: int = 200
    answer: bytes = b""
    delay: float = 0.0
    sent: list[dict[str, Any]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url(HOOK_PATH)

    def install(self) -> FakeWebhook:
        def hook(handler: Handler) -> None:
            if self.delay:
                time.sleep(self.delay)
            body = self.server.hits[-1].body
            self.sent.append(json.loads(body))
            answer = self.answer or json.dumps({"id": f"msg-{len(self.sent)}"}).encode()
            handler.reply(self.status, answer, content_type="application/json")

        self.server.routes[HOOK_PATH] = hook
        return self


@dataclass
class FakeTelegram:
    """The Bot API methods sendMessage and createForumTopic for the bot :data:`TOKEN`. A wrong token
    gets Telegram's 401 answer; ``refuse`` makes every call answer ``{"ok": false, ...}``. Its error
    descriptions repeat the token, so tests prove it never reaches an output."""

    server: LocalServer
    refuse: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return self.server.url("").rstrip("/")

    def install(self) -> FakeTelegram:
        for method in ("sendMessage", "createForumTopic"):
            self.server.routes[f"/bot{TOKEN}/{method}"] = self._method(method)
        return self

    def _method(self, method: str) -> Any:
        def run(handler: Handler) -> None:
            payload = json.loads(self.server.hits[-1].body)
            self.calls.append((method, payload))
            if self.refuse:
                answer = {"ok": False, "error_code": 400, "description": f"{self.refuse} (bot{TOKEN})"}
                handler.reply(400, json.dumps(answer).encode(), content_type="application/json")
                return
            if method == "sendMessage":
                result: dict[str, Any] = {
                    "message_id": 500 + len(self.calls),
                    "chat": {"id": payload["chat_id"]},
                }
            else:
                result = {"message_thread_id": 77, "name": payload["name"], "icon_color": 7322096}
            handler.reply(
                200, json.dumps({"ok": True, "result": result}).encode(), content_type="application/json"
            )

        return run
