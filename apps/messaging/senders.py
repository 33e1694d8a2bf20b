"""Sending through a channel: a webhook POST or the Telegram Bot API, always through the SSRF guard.

Every request goes through :func:`apps.toolkit.ssrf.guarded_client` (public addresses only, checked at
connect time) within :data:`SEND_TIMEOUT` seconds and reads at most :data:`MAX_ANSWER_BYTES` of the
answer. Every failure is one :class:`SendError` whose message says what happened (the HTTP status and a
bounded part of the answer, Telegram's own description) and never holds the bot token (it is part of
the Bot API's URL path), the signing secret or a header value: :meth:`Sender.redact` scrubs them.

A Telegram chat id may name a forum topic: ``"<chat>:topic:<thread>"`` (``"-100123:topic:45"``) sends to
thread 45 of chat -100123.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from apps.messaging.models import Channel
from apps.toolkit.ssrf import USER_AGENT, AddressPolicy, SSRFBlocked, guarded_client

SEND_TIMEOUT = 15.0
CONNECT_TIMEOUT = 5.0
MAX_ANSWER_BYTES = 256 * 1024
MAX_SNIPPET = 200
MAX_MESSAGE_ID = 100
SIGNATURE_HEADER = "X-Toolgate-Signature"
REDACTED = "[redacted]"
CHAT_RE = re.compile(r"\A(-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31})(?::topic:(\d{1,12}))?\Z")
TOPIC_COLORS = (7322096, 16766590, 13338331, 9367192, 16749490, 16478047)
# The Bot API puts the token in the URL path (/bot<token>/<method>); httpx logs every request's URL.
BOT_TOKEN_IN_PATH = re.compile(r"/bot[^/\s]+/")


class BotTokenFilter(logging.Filter):
    """Rewrites any ``/bot<token>/`` in a log record to ``/bot[redacted]/`` (httpx logs request URLs)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and "/bot" in record.msg:
            record.msg = BOT_TOKEN_IN_PATH.sub(f"/bot{REDACTED}/", record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(
                BOT_TOKEN_IN_PATH.sub(f"/bot{REDACTED}/", str(a)) if "/bot" in str(a) else a
                for a in record.args
            )
        return True


def install_log_filter() -> None:
    """Keep bot tokens out of the HTTP client's log lines (idempotent)."""
    for name in ("httpx", "httpcore"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, BotTokenFilter) for f in logger.filters):
            logger.addFilter(BotTokenFilter())


class SendError(Exception):
    """A send failed; ``str(error)`` says why, without secrets."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Sent:
    message_id: str  # what the receiver called it ("" when it did not say)


@dataclass(frozen=True)
class Outgoing:
    """A message and who sends it."""

    chat_id: str
    text: str
    agent: str = ""
    session_key: str = ""
    user_id: str = ""
    reply_to: str = ""
    silent: bool = False


def parse_telegram_chat(chat_id: str) -> tuple[str, int | None]:
    """``"-100123:topic:45"`` -> ``("-100123", 45)``; ``"@name"`` -> ``("@name", None)``. Raises
    :class:`SendError` for anything else."""
    match = CHAT_RE.match(chat_id)
    if match is None:
        raise SendError(
            f"{chat_id[:64]!r} is not a Telegram chat id: use a number (-100123), @channelname, "
            "or <chat>:topic:<thread> for a forum topic (-100123:topic:45)"
        )
    thread = match.group(2)
    return match.group(1), int(thread) if thread is not None else None


def check_telegram_chat(chat_id: str) -> str | None:
    try:
        parse_telegram_chat(chat_id)
    except SendError as exc:
        return exc.message
    return None


class Sender:
    """Sends through one channel. Cheap to make: each call opens (and closes) its own connection."""

    def __init__(self, channel: Channel, *, policy: AddressPolicy | None = None) -> None:
        self.channel = channel
        self.name = channel.name
        self._secrets = channel.secrets
        self._policy = policy

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._secrets

    def redact(self, text: str) -> str:
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return text

    def send(self, message: Outgoing) -> Sent:
        raise NotImplementedError

    def create_forum_topic(self, chat_id: str, name: str, icon_color: int | None = None) -> int:
        raise SendError(
            f"the channel {self.name} is a {self.channel.kind} channel; forum topics are Telegram's"
        )

    def _post(self, url: str, content: bytes, headers: Mapping[str, str], what: str) -> tuple[int, bytes]:
        """POST ``content`` to ``url``; the status and at most MAX_ANSWER_BYTES of the answer."""
        policy = self._policy or AddressPolicy.from_settings()
        deadline = time.monotonic() + SEND_TIMEOUT
        try:
            checked = policy.check_url(url)
            with (
                guarded_client(
                    policy=policy, connect_timeout=CONNECT_TIMEOUT, read_timeout=SEND_TIMEOUT
                ) as client,
                client.stream(
                    "POST",
                    checked,
                    content=content,
                    headers={
                        **headers,
                        "Content-Type": "application/json",
                        "Accept-Encoding": "identity",
                        "User-Agent": USER_AGENT,
                    },
                ) as response,
            ):
                body = bytearray()
                for chunk in response.iter_raw():
                    if time.monotonic() > deadline:
                        raise SendError(f"{what} did not answer within {SEND_TIMEOUT:.0f} s")
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        break  # the start is enough to tell what happened
                return response.status_code, bytes(body[:MAX_ANSWER_BYTES])
        except SSRFBlocked as exc:
            raise SendError(
                f"{what} is refused ({self.redact(str(exc))}); a channel must use a public address"
            ) from None
        except httpx.TimeoutException:
            raise SendError(f"{what} did not answer within {SEND_TIMEOUT:.0f} s") from None
        except httpx.HTTPError as exc:
            detail = self.redact(str(exc))[:MAX_SNIPPET]
            raise SendError(f"{what} could not be reached: {detail}") from None

    def _snippet(self, body: bytes) -> str:
        text = body[: MAX_SNIPPET * 4].decode("utf-8", errors="replace")
        return self.redact(" ".join(text.split()))[:MAX_SNIPPET]


class WebhookSender(Sender):
    """POSTs ``{channel, chat_id, text, agent, session_key, user_id, sent_at}`` (and ``reply_to``,
    ``silent`` when given) as JSON to the channel's URL, signed with HMAC-SHA256 of the body in
    ``X-Toolgate-Signature: sha256=<hex>`` when the channel has a secret. Any 2xx is success; an ``id``
    or ``message_id`` in a JSON answer is kept as the message's id."""

    def body(self, message: Outgoing) -> bytes:
        payload: dict[str, Any] = {
            "channel": self.name,
            "chat_id": message.chat_id,
            "text": message.text,
            "agent": message.agent,
            "session_key": message.session_key,
            "user_id": message.user_id,
            "sent_at": datetime.now(UTC).isoformat(),
        }
        if message.reply_to:
            payload["reply_to"] = message.reply_to
        if message.silent:
            payload["silent"] = True
        return json.dumps(payload, ensure_ascii=False).encode()

    def signature(self, content: bytes) -> str:
        return "sha256=" + hmac.new(self.channel.secret.encode(), content, hashlib.sha256).hexdigest()

    def send(self, message: Outgoing) -> Sent:
        content = self.body(message)
        headers = dict(self.channel.extra_headers)
        if self.channel.secret:
            headers[SIGNATURE_HEADER] = self.signature(content)
        what = f"the webhook of channel {self.name}"
        status, answer = self._post(self.channel.url, content, headers, what)
        if not 200 <= status < 300:
            snippet = self._snippet(answer)
            raise SendError(
                f"{what} answered HTTP {status}" + (f": {snippet}" if snippet else ""), status=status
            )
        message_id = ""
        try:
            parsed = json.loads(answer) if answer else None
        except (ValueError, UnicodeDecodeError):
            parsed = None
        if isinstance(parsed, dict):
            found = parsed.get("message_id", parsed.get("id"))
            if isinstance(found, str | int) and not isinstance(found, bool):
                message_id = self.redact(str(found))[:MAX_MESSAGE_ID]
        return Sent(message_id=message_id)


class TelegramSender(Sender):
    """The Bot API: ``sendMessage`` (to a topic's thread for ``<chat>:topic:<thread>``) and
    ``createForumTopic``. Telegram's ``{"ok": false, "description": …}`` becomes the error."""

    def _call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.channel.url.rstrip('/')}/bot{self.channel.secret}/{method}"
        content = json.dumps(payload, ensure_ascii=False).encode()
        what = f"Telegram ({self.name})"
        status, answer = self._post(url, content, dict(self.channel.extra_headers), what)
        try:
            parsed = json.loads(answer) if answer else None
        except (ValueError, UnicodeDecodeError):
            parsed = None
        if not isinstance(parsed, dict):
            snippet = self._snippet(answer)
            raise SendError(
                f"{what} answered HTTP {status} to {method} without a Bot API answer"
                + (f": {snippet}" if snippet else ""),
                status=status,
            )
        if parsed.get("ok") is not True:
            description = parsed.get("description")
            detail = self.redact(" ".join(str(description).split()))[:MAX_SNIPPET] if description else ""
            hint = " (the bot token was refused; set a valid token on the channel)" if status == 401 else ""
            raise SendError(
                f"{what} refused {method} (HTTP {status}){hint}" + (f": {detail}" if detail else ""),
                status=status,
            )
        result = parsed.get("result")
        return result if isinstance(result, dict) else {}

    def send(self, message: Outgoing) -> Sent:
        chat, thread = parse_telegram_chat(message.chat_id)
        payload: dict[str, Any] = {"chat_id": chat, "text": message.text}
        if thread is not None:
            payload["message_thread_id"] = thread
        if message.reply_to:
            if not message.reply_to.isdigit():
                raise SendError("reply_to must be the number of a message in that chat")
            payload["reply_parameters"] = {
                "message_id": int(message.reply_to),
                "allow_sending_without_reply": True,
            }
        if message.silent:
            payload["disable_notification"] = True
        result = self._call("sendMessage", payload)
        found = result.get("message_id")
        return Sent(message_id=str(found)[:MAX_MESSAGE_ID] if isinstance(found, int) else "")

    def create_forum_topic(self, chat_id: str, name: str, icon_color: int | None = None) -> int:
        chat, thread = parse_telegram_chat(chat_id)
        if thread is not None:
            raise SendError("a forum topic is created in a chat, not in a topic: give the chat id alone")
        payload: dict[str, Any] = {"chat_id": chat, "name": name}
        if icon_color is not None:
            payload["icon_color"] = icon_color
        result = self._call("createForumTopic", payload)
        thread_id = result.get("message_thread_id")
        if not isinstance(thread_id, int) or isinstance(thread_id, bool):
            raise SendError(f"Telegram ({self.name}) answered createForumTopic without a message_thread_id")
        return thread_id


def sender_for(channel: Channel, *, policy: AddressPolicy | None = None) -> Sender:
    if channel.kind == Channel.Kind.TELEGRAM:
        return TelegramSender(channel, policy=policy)
    return WebhookSender(channel, policy=policy)
