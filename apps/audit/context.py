"""Per-request facts (request id, client ip, tenant) carried in a context variable.

Only *metadata* for logs and audit rows travels this way; the tenant a piece of code acts on is always
passed explicitly.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass


@dataclass
class RequestContext:
    request_id: str = ""
    ip: str | None = None
    tenant: str = ""


_current: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar(
    "toolgate_request", default=None
)


def current() -> RequestContext:
    ctx = _current.get()
    return ctx if ctx is not None else RequestContext()


def bind(ctx: RequestContext) -> contextvars.Token[RequestContext | None]:
    return _current.set(ctx)


def reset(token: contextvars.Token[RequestContext | None]) -> None:
    _current.reset(token)
