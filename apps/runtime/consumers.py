"""The ``/ws/events/`` websocket: authenticated by session or API key, topics of the own tenant only; a
``team:<id>`` topic only for a team of the own tenant that the user's grants reach
(``apps.teams.visibility``), any other refused as ``not_found`` the way a 404 would be; ``me`` carries the
events addressed to the socket's own actor (its API key, or its user in this tenant) and nobody else's."""

from __future__ import annotations

import logging
import uuid
from typing import Any
from urllib.parse import urlparse

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.http.request import validate_host

from apps.realtime.events import (
    ME,
    TOPIC_PATTERNS,
    TOPICS,
    actor_group,
    group_name,
    principal_group,
    public,
    topic_role,
)
from apps.teams.visibility import visible_team_ids
from apps.tenants import metrics
from apps.tenants.actors import Actor
from apps.tenants.authentication import actor_for_api_key_header, actor_for_session_user

logger = logging.getLogger(__name__)
MAX_TOPICS = 50


class EventsConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    actor: Actor | None = None

    async def connect(self) -> None:
        self.topics: set[str] = set()
        self.principal_groups: list[str] = []
        self.actor = await self._authenticate()
        if self.actor is None:
            await self.close(code=4401)  # before accept: the handshake is refused (HTTP 403)
            return
        # Join the credential's groups first, then check the credential once more: a revocation that
        # commits meanwhile is either seen by the check or delivered to the joined group.
        self.principal_groups = self._principal_groups(self.actor)
        for group in self.principal_groups:
            await self.channel_layer.group_add(group, self.channel_name)
        if await self._authenticate() != self.actor:
            await self._leave_principal_groups()
            self.actor = None
            await self.close(code=4401)
            return
        await self.accept()
        self.counted = True
        metrics.websocket_opened()
        await self.send_json(
            {
                "type": "hello",
                "tenant": self.actor.tenant.slug,
                "role": self.actor.role,
                "topics": sorted(t for t, r in TOPICS.items() if self.actor.can(r)),
                "topic_patterns": sorted(f"{p}:<id>" for p, r in TOPIC_PATTERNS.items() if self.actor.can(r)),
                # Events are not stored: those sent while a socket was closed are not sent again.
                "replay": False,
                "after_reconnect": "Events sent while this socket was closed are not replayed; read again "
                "what you show.",
            }
        )

    async def _authenticate(self) -> Actor | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in self.scope.get("headers", [])}
        authorization = headers.get("authorization", "")
        if authorization:
            actor: Actor | None = await database_sync_to_async(actor_for_api_key_header)(authorization)
            return actor
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not self._same_origin(headers.get("origin", "")):
            return None
        session = self.scope.get("session")
        tenant_id = session.get("tenant_id") if session is not None else None
        actor = await database_sync_to_async(actor_for_session_user)(user, tenant_id)
        return actor

    def _principal_groups(self, actor: Actor) -> list[str]:
        groups = [principal_group("tenant", str(actor.tenant.pk))]
        if actor.kind == "api_key" and actor.api_key is not None:
            return [*groups, principal_group("api_key", str(actor.api_key.pk))]
        if actor.user is not None:
            groups.append(principal_group("member", f"{actor.tenant.pk}:{actor.user.pk}"))
        session = self.scope.get("session")
        if session is not None and session.session_key:
            groups.append(principal_group("session", session.session_key))
        return groups

    def _group(self, topic: str) -> str:
        """The channel-layer group behind one of this socket's topics: ``me`` is the actor's own."""
        assert self.actor is not None
        if topic == ME:
            return actor_group(self.actor.tenant.pk, self.actor.kind, self.actor.id)
        return group_name(self.actor.tenant.pk, topic)

    async def _leave_principal_groups(self) -> None:
        for group in self.principal_groups:
            await self.channel_layer.group_discard(group, self.channel_name)
        self.principal_groups = []

    async def toolgate_disconnect(self, message: dict[str, Any]) -> None:
        """The credential of this socket was revoked, expired, removed or changed role: say why, close."""
        code = str(message.get("code") or "credentials_revoked")
        await self._error(code, str(message.get("reason") or "Your credentials changed."))
        await self.close(code=4403)

    @staticmethod
    def _same_origin(origin: str) -> bool:
        # Session-authenticated sockets must come from our own pages (cross-site websocket hijacking).
        if not origin:
            return False
        host = urlparse(origin).hostname or ""
        return validate_host(host, settings.ALLOWED_HOSTS)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "counted", False):
            self.counted = False
            metrics.websocket_closed()
        await self._leave_principal_groups()
        if self.actor is not None:
            for topic in list(self.topics):
                await self.channel_layer.group_discard(self._group(topic), self.channel_name)
            self.topics.clear()
        # Layers that keep per-channel state for the process's lifetime can let this channel go now.
        release = getattr(self.channel_layer, "release_channel", None)
        if release is not None:
            release(self.channel_name)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """Decode one frame; a frame that is not JSON text gets an error and the socket stays open."""
        if text_data is None:
            await self._error("invalid", "Send JSON text frames; binary frames are not accepted.")
            return
        try:
            content = await self.decode_json(text_data)
        except ValueError:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            await self._error(
                "invalid", 'Messages must be JSON, e.g. {"type": "subscribe", "topics": ["audit"]}.'
            )
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Handle ``subscribe``, ``unsubscribe`` and ``ping``; anything else gets an error reply."""
        assert self.actor is not None
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            await self._error("invalid", "Send a JSON object with a string 'type'.")
            return
        kind = content["type"]
        if kind == "ping":
            await self.send_json({"type": "pong"})
            return
        if kind not in {"subscribe", "unsubscribe"}:
            await self._error(
                "invalid", f"Unknown message type {kind!r}; use subscribe, unsubscribe or ping."
            )
            return
        topics = content.get("topics")
        if not isinstance(topics, list) or not topics or not all(isinstance(t, str) for t in topics):
            await self._error("invalid", "'topics' must be a non-empty list of topic names.")
            return
        if len(topics) > MAX_TOPICS:
            await self._error("invalid", f"At most {MAX_TOPICS} topics per message.")
            return
        roles = {t: topic_role(t) for t in topics}
        unknown = [t for t, role in roles.items() if role is None]
        if unknown:
            patterns = ", ".join(f"{p}:<id>" for p in sorted(TOPIC_PATTERNS))
            await self._error(
                "unknown_topic",
                f"Unknown topics: {', '.join(sorted(unknown))}. Available: {', '.join(sorted(TOPICS))}, "
                f"and {patterns} (the id as a UUID in lower case with dashes).",
                available=sorted(TOPICS),
            )
            return
        forbidden = [t for t, role in roles.items() if role is None or not self.actor.can(role)]
        if forbidden:
            await self._error(
                "permission_denied", f"Your role may not subscribe to: {', '.join(sorted(forbidden))}."
            )
            return
        if kind == "subscribe":
            hidden = await self._hidden_team_topics(topics)
            if hidden:
                # As a 404 would: another tenant's team, a missing one and one the user's grants do
                # not reach get the same answer.
                await self._error(
                    "not_found",
                    f"No team you can see in this tenant has these topics: {', '.join(sorted(hidden))}. "
                    "Nothing was subscribed.",
                )
                return
        for topic in topics:
            group = self._group(topic)
            if kind == "subscribe" and topic not in self.topics:
                await self.channel_layer.group_add(group, self.channel_name)
                self.topics.add(topic)
            elif kind == "unsubscribe" and topic in self.topics:
                await self.channel_layer.group_discard(group, self.channel_name)
                self.topics.discard(topic)
        await self.send_json({"type": f"{kind}d", "topics": sorted(self.topics)})

    async def _hidden_team_topics(self, topics: list[str]) -> list[str]:
        """The ``team:<id>`` topics naming no team of the actor's tenant that the actor may see (its
        user grants included)."""
        assert self.actor is not None
        actor = self.actor
        wanted = {t: uuid.UUID(t.partition(":")[2]) for t in topics if t.startswith("team:")}
        if not wanted:
            return []
        visible = await database_sync_to_async(visible_team_ids)(actor, set(wanted.values()))
        return [t for t, team_id in wanted.items() if team_id not in visible]

    async def _error(self, code: str, message: str, **details: Any) -> None:
        await self.send_json({"type": "error", "code": code, "message": message, "details": details})

    async def toolgate_event(self, message: dict[str, Any]) -> None:
        event = message.get("event") or {}
        # Fail closed: never forward an event of another tenant, whatever the group said.
        if self.actor is None or event.get("_tenant_id") != str(self.actor.tenant.pk):
            return
        if event.get("topic") not in self.topics:
            return
        if event.get("topic") == ME and event.get("_actor") != f"{self.actor.kind}:{self.actor.id}":
            return
        await self.send_json({"type": "event", "event": public(event)})
