"""The datetime tool: the current date and time in a time zone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult


@tool("datetime")
def current_datetime(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Now, in the requested IANA time zone (UTC by default)."""
    name = args.get("timezone") or "UTC"
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        close = sorted(z for z in available_timezones() if name.lower().replace(" ", "_") in z.lower())[:5]
        hint = f" Did you mean: {', '.join(close)}?" if close else " Use an IANA name such as Europe/Paris."
        return ToolResult.error(f"Unknown time zone {name!r}.{hint}")
    now = datetime.now(UTC).astimezone(zone)
    offset = now.strftime("%z")
    text = (
        f"{now.strftime('%A, %d %B %Y, %H:%M:%S')} {now.tzname()} (UTC{offset[:3]}:{offset[3:]}) — "
        f"ISO {now.isoformat(timespec='seconds')}, unix {int(now.timestamp())}"
    )
    return ToolResult.ok(
        text, iso=now.isoformat(timespec="seconds"), timezone=name, unix=int(now.timestamp())
    )
