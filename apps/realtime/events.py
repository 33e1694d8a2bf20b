"""Live events: published after commit to tenant-scoped channel-layer groups.

An event is ``{"id", "type", "tenant", "topic", "data", "ts"}``. The group name carries the tenant id,
so a subscriber can only ever join groups of its own tenant; the consumer checks the tenant once more
before sending (fail closed).
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from apps.tenants.roles import Role

if TYPE_CHECKING:
    from apps.tenants.models import Tenant

logger = logging.getLogger(__name__)

# Topic -> the least role that may subscribe to it. Later features add their topics here.
TOPICS: dict[str, str] = {
    "audit": Role.ADMIN,
    "agents": Role.VIEWER,
    "api_keys": Role.ADMIN,
    "members": Role.VIEWER,
}


def group_name(tenant_id: uuid.UUID | str, topic: str) -> str:
    return f"tg.{uuid.UUID(str(tenant_id)).hex}.{topic}"


def build(*, tenant: Tenant, topic: str, type: str, data: dict[str, Any]) -> dict[str, Any]:
    if topic not in TOPICS:
        raise ValueError(f"unknown event topic {topic!r}")
    return {
        "id": uuid.uuid4().hex,
        "type": type,
        "tenant": tenant.slug,
        "topic": topic,
        "data": data,
        "ts": timezone.now().isoformat(),
        "_tenant_id": str(tenant.pk),
    }


def send_now(event: dict[str, Any]) -> None:
    """Deliver an already-built event to its group (use :func:`publish` from domain code)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(
            group_name(event["_tenant_id"], event["topic"]), {"type": "toolgate.event", "event": event}
        )
    except Exception:  # a lost live event must never break the committed change it reports
        logger.exception("could not deliver live event %s on topic %s", event["type"], event["topic"])


def publish(*, tenant: Tenant, topic: str, type: str, data: dict[str, Any]) -> None:
    """Queue a live event for delivery once the current transaction commits (at once outside one)."""
    event = build(tenant=tenant, topic=topic, type=type, data=data)
    transaction.on_commit(lambda: send_now(event))


def public(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if not k.startswith("_")}
