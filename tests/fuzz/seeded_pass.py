"""Requests known to succeed, for every operation of the OpenAPI document, and the fuzz run's first,
deterministic pass that sends them before schemathesis' random phases.

The requests are the role matrix's (``tests/api/test_roles.ACTIONS``: one or more actions per operation,
each with a valid body and its success status) plus those it leaves out (``EXTRA``), on the role
matrix's objects (``test_roles._targets``) in a tenant of their own, sent with an owner key.

The pass sends them through schemathesis' own case objects, and every answer goes through the run's
checks. Reads go first, then writes in their order, then deletes (the deepest path first, so a parent
outlives its children); an operation is sent until it answers a 2xx once, and a request that an earlier
one spoiled is sent again once in a fresh tenant. The random phases never see the pass's tenants; the
hooks steer a share of their calls to the same requests on tenants of their own
(``schemathesis_hooks.py``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import requests
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.tenants.actors import Actor
from apps.tenants.models import Agent
from apps.tenants.roles import Role
from tests import factories
from tests.api.test_roles import ACTIONS, _targets
from tests.factories import PASSWORD

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

# Operations the role matrix does not send with success, with the request that succeeds. The run's
# messages and its finish come after its claim (writes keep their order).
EXTRA: list[tuple[str, str, dict[str, Any] | None]] = [
    ("get", "/api/v1/mcp/requests/{mcp_request}/", None),
    ("post", "/api/v1/mcp/servers/{mcp_server}/test", None),
    ("post", "/api/v1/mcp/servers/{mcp_server}/refresh", None),
    ("post", "/api/v1/runs/{external_run}/messages", {"role": "assistant", "content": "working on it"}),
    ("post", "/api/v1/runs/{external_run}/finish", {"status": "completed", "output": "done"}),
]

# Bodies the fuzz run sends instead of the role matrix's (string values may name the tenant's slug): the
# local embedding model would load in the server on the next memory write or search, longer than a
# request of the run may take; a new member's email must be new to the whole database, whose users all
# tenants share.
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("put", "/api/v1/memory/embedding-settings"): {"kind": "none"},
    ("post", "/api/v1/memberships/"): {"email": "new@{tenant}.test", "role": "viewer", "password": PASSWORD},
}

_TENANTS = itertools.count()


@dataclass(frozen=True)
class Request:
    """One request known to succeed on a seeded tenant."""

    method: str  # upper case
    template: str  # the operation's path template in the document
    path: dict[str, str]  # its path values
    query: dict[str, str]
    body: dict[str, Any] | None
    key: str  # an owner key of the tenant
    key_id: str  # and its id

    @property
    def operation(self) -> str:
        return f"{self.method} {self.template}"


@dataclass
class Outcome:
    operation: str  # "METHOD /template"
    status: int
    failures: list[str]  # the checks that failed
    detail: str = ""  # the start of the answer, when it was not a 2xx


def seed(paths: dict[str, Any]) -> list[Request]:
    """A fresh tenant with the role matrix's objects and an owner key, and the requests known to succeed
    on it (``paths``: the document's paths): reads, then writes in their order, then deletes with the
    deepest path first."""
    tenant = factories.make_tenant(f"fuzz-valid-{next(_TENANTS)}")
    targets = _targets(tenant)
    agent = Agent.objects.for_tenant(tenant).get(key=targets["agent"])
    from apps.runtime import pipeline
    from apps.toolkit import gateway

    call = pipeline.execute(
        actor=Actor.system(tenant),
        request=gateway.CallRequest(agent=agent, tool="datetime", args={"timezone": "UTC"}),
    )
    event = AuditEvent.objects.for_tenant(tenant).filter(verb="agent.created").order_by("pk").first()
    assert event is not None
    targets = {**targets, "tool_call": call.call_id, "audit_event": str(event.pk)}
    api_key, key = services.api_key_create(actor=Actor.system(tenant), name="fuzz-valid", role=Role.OWNER)

    actions = [(m, t, b) for m, t, b, _least, success in ACTIONS if 200 <= success < 300] + EXTRA
    reads = [a for a in actions if a[0] == "get"]
    writes = [a for a in actions if a[0] not in ("get", "delete")]
    deletes = sorted((a for a in actions if a[0] == "delete"), key=lambda a: -a[1].split("?")[0].count("/"))
    known = []
    for method, url, body in reads + writes + deletes:
        if (method, url) in BODIES:
            body = {
                name: value.format(tenant=tenant.slug) if isinstance(value, str) else value
                for name, value in BODIES[(method, url)].items()
            }
        path, _, query = url.format(**targets).partition("?")
        template, values = match_template(paths, method, path)
        query_values = dict(parse_qsl(query))
        known.append(Request(method.upper(), template, values, query_values, body, key, str(api_key.pk)))
    return known


def match_template(paths: dict[str, Any], method: str | None, path: str) -> tuple[str, dict[str, str]]:
    """The path template of the document that ``path`` falls under (for ``method``, unless None: the
    most specific one, ``…/users/{user_id}/bootstrap`` rather than ``…/users/{user_id}/{name}``), and
    its path values."""
    found = []
    for template, operations in paths.items():
        if method is not None and method not in operations:
            continue
        pattern = "".join(
            (
                f"(?P<{part[1:-1]}>{'.+' if part == '{path}' else '[^/]+'})"
                if part[:1] == "{"
                else re.escape(part)
            )
            for part in re.split(r"(\{\w+\})", template)
        )
        match = re.fullmatch(pattern, path)
        if match:
            found.append((len(re.sub(r"\{\w+\}", "", template)), template, match.groupdict()))
    assert found, f"no operation for {method} {path}"
    _, template, values = max(found)
    return template, values


def run(schema: Any, base_url: str, skip: Callable[[str], bool]) -> list[Outcome]:
    """Send each operation's requests until it answers a 2xx once (operations ``skip`` names are left
    to the random phases); a request that answers otherwise is sent again in a fresh tenant."""
    paths = schema.raw_schema["paths"]
    reached: set[str] = set()
    outcomes: list[Outcome] = []
    fresh: Iterator[list[Request]] = (seed(paths) for _ in itertools.count())
    session = requests.Session()
    for index, request in enumerate(next(fresh)):
        if request.operation in reached or skip(request.operation):
            continue
        outcome = _send(schema, base_url, request, session)
        if not 200 <= outcome.status < 300 and not outcome.failures:
            outcome = _send(schema, base_url, next(fresh)[index], session)
        outcomes.append(outcome)
        if 200 <= outcome.status < 300:
            reached.add(request.operation)
    return outcomes


def _send(schema: Any, base_url: str, request: Request, session: requests.Session) -> Outcome:
    body: dict[str, Any] = (
        {} if request.body is None else {"body": request.body, "media_type": "application/json"}
    )
    case = schema[request.template][request.method].Case(
        path_parameters=request.path,
        query=request.query,
        headers={"Authorization": f"Bearer {request.key}"},
        **body,
    )
    response = case.call(base_url=base_url, session=session)
    failures: list[str] = []
    try:
        case.validate_response(response, checks=CHECKS)
    except (AssertionError, FailureGroup) as exc:
        failures.append(f"{exc}"[:2000])
    detail = "" if 200 <= response.status_code < 300 else response.text[:300]
    return Outcome(request.operation, response.status_code, failures, detail)
