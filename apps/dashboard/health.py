"""Liveness and readiness probes."""

from __future__ import annotations

import asyncio
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from apps.toolkit import jail

CHECK_TIMEOUT = 3.0


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is alive and serving requests; checks nothing else."""
    return JsonResponse({"status": "ok"})


def _check_database() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"ok": True}


def _check_q2() -> dict[str, Any]:
    from django_q.brokers import get_broker
    from django_q.status import Stat

    clusters = Stat.get_all(broker=get_broker())
    alive = [c for c in clusters if c.status not in {"Stopped", "Stopping"}]
    return {"ok": bool(alive), "clusters": len(alive)}


def _check_jail() -> dict[str, Any]:
    """Whether this process can make the jail every tenant process runs in (apps.toolkit.jail); when it
    cannot, tenants' commands are refused, and the reason says what to install or allow."""
    current = jail.status()
    result: dict[str, Any] = {"ok": current.available, **current.as_dict()}
    result.pop("available")
    if not current.available:
        result["error"] = current.reason
    return result


@dataclass
class _Probe:
    lock: asyncio.Lock
    channel: str | None = None


# One probe channel per event loop, reused by every check: a new channel per probe would leave a
# subscription behind on layers that release a channel only when a receive() is cancelled (Redis pub/sub).
_probes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Probe] = weakref.WeakKeyDictionary()


async def _check_channel_layer() -> dict[str, Any]:
    layer = get_channel_layer()
    if layer is None:
        return {"ok": False, "error": "no channel layer configured"}
    loop = asyncio.get_running_loop()
    probe = _probes.get(loop)
    if probe is None:
        probe = _probes[loop] = _Probe(lock=asyncio.Lock())
    async with probe.lock:  # concurrent probes would read each other's pings
        if probe.channel is None:
            probe.channel = await layer.new_channel("readyz")
        token = uuid.uuid4().hex
        try:
            await layer.send(probe.channel, {"type": "readyz.ping", "token": token})
            while True:  # skip a late ping of an earlier probe that timed out
                message = await layer.receive(probe.channel)
                if message.get("token") == token:
                    return {"ok": True}
        except BaseException:
            # A cancelled receive may have released the channel (Redis pub/sub): start afresh next time.
            probe.channel = None
            raise


async def _timed(name: str, check: Any) -> tuple[str, dict[str, Any]]:
    started = time.monotonic()
    try:
        result = await asyncio.wait_for(check(), timeout=CHECK_TIMEOUT)
    except TimeoutError:
        result = {"ok": False, "error": f"timed out after {CHECK_TIMEOUT:g}s"}
    except Exception as exc:  # readiness reports failures, it never raises them
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    result["ms"] = round((time.monotonic() - started) * 1000, 1)
    return name, result


async def readyz(request: HttpRequest) -> JsonResponse:
    """Ready when the database, the channel layer and a django-q2 cluster all answer, and the jail can
    be made."""
    if request.method != "GET":
        return JsonResponse(
            {"error": {"code": "method_not_allowed", "message": "Use GET.", "details": {}}}, status=405
        )
    checks = dict(
        await asyncio.gather(
            _timed("database", sync_to_async(_check_database)),
            _timed("channel_layer", _check_channel_layer),
            _timed("q2_cluster", sync_to_async(_check_q2)),
            _timed("jail", sync_to_async(_check_jail)),
        )
    )
    ready = all(c["ok"] for c in checks.values())
    return JsonResponse(
        {"status": "ready" if ready else "not_ready", "checks": checks}, status=200 if ready else 503
    )
