"""Schemathesis over the whole published API, against a real daphne on the test database.

First a deterministic pass (``seeded_pass.py``) sends every operation of the OpenAPI document a request
known to succeed, on objects seeded for it, until the operation answers a 2xx, and checks each answer
like the run does. Then every operation goes through schemathesis' coverage, fuzzing and stateful
phases within a time budget (``TOOLGATE_FUZZ_SECONDS``; set it higher for a long run), with these
checks: no server error, the response conforming to the documented schema, its status code and its
content type documented. The hooks (``schemathesis_hooks.py``) steer a share of the calls to seeded
objects and to requests known to succeed, send deletes to objects seeded for deletes alone, and keep
the run's keys from being revoked. The test reports how many operations answered a 2xx, in the pass and
in the random phases, and fails if one that is not listed as unreachable (``UNREACHABLE``) never did.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.fuzz import seeded_pass

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
BUDGET = int(os.environ.get("TOOLGATE_FUZZ_SECONDS", "90"))
# Operations that the random phases reached with a 2xx. Before the hooks steered calls to requests known
# to succeed, 175 of 192 were reached in 120 s on a quiet machine and 153 in 90 s within the suite:
# updates whose object an earlier DELETE had removed, and creates whose bodies must name other objects of
# the tenant, were missed. Now, 180 to 188 in 90 s on a busy machine; those missed are actions whose
# object an earlier call used up (an MCP request approved before it could be rejected, a task approved
# before it could be rejected, messages to a run not claimed yet, a relation gone with its entity). The
# seeded pass reaches every operation whatever the order; this floor keeps the random phases' reach.
REACHED_FLOOR = 170
# Operations that never answer a 2xx to this run, by design: operation → why. None today: every operation
# has a request that succeeds for an owner on seeded objects (the LLM provider, MCP server and channel
# tests answer 200 with ``ok: false`` for an endpoint that cannot be reached).
UNREACHABLE: dict[str, str] = {
    # A 2xx needs a live MCP server with resources and prompts granted to the agent, which the fuzzed
    # tenant has not; tests/mcp/test_api_features.py reads and gets through a real one.
    "GET /api/v1/agents/{key}/mcp/resources/read": "needs a live MCP server with resources",
    "POST /api/v1/agents/{key}/mcp/prompts/get": "needs a live MCP server with prompts",
    # Only a signed-in platform staff user changes quotas; the run's API key (any role) gets 403, by
    # design. tests/platform/test_quotas.py changes them as staff.
    "PATCH /api/v1/tenant/quota": "platform staff only (a session, never an API key)",
}
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def _seed() -> dict[str, Any]:
    """The main tenant with an agent and its key; a tenant of the role matrix's objects, with the
    requests known to succeed on it but its deletes (for every method but DELETE); and two more whose
    deletes alone the run may send (so that no delete takes the object other methods' calls use): one
    for the deletes of objects that hold others (an agent, a team, a server; ``holders``), one for the
    rest."""
    main = factories.make_tenant("fuzz")
    services.agent_create(actor=Actor.system(main), key="fuzz-agent", name="Fuzz agent")
    api_key, key = services.api_key_create(actor=Actor.system(main), name="fuzz-run", role=Role.OWNER)
    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    valid = [r for r in seeded_pass.seed(paths) if r.method != "DELETE"]
    leaves, holding = seeded_pass.seed(paths), seeded_pass.seed(paths)
    deletes = {r.template for r in leaves if r.method == "DELETE"}
    holders = {t for t in deletes if any(o != t and o.startswith(t) for o in deletes)}
    doomed = [r for r in leaves if r.method == "DELETE" and r.template not in holders]
    doomed += [r for r in holding if r.method == "DELETE" and r.template in holders]
    # The run sends thousands of requests a minute to these tenants: their rate quotas are off (the
    # quotas are tested in tests/platform/test_quotas.py and tests/live/test_quotas_live.py).
    Tenant.objects.all().update(quotas={"tool_calls_per_minute": 0, "api_requests_per_minute": 0})
    values: dict[str, list[tuple[dict[str, str], str]]] = collections.defaultdict(list)
    for request in valid:
        if request.path and (request.path, request.key) not in values[request.template]:
            values[request.template].append((request.path, request.key))
    return {
        "key": key,
        "protected": sorted({str(api_key.pk), *(r.key_id for r in valid + doomed)}),
        "seeded": values,
        "valid": _by_operation(valid),
        "doomed": _by_operation(doomed),
    }


def _by_operation(requests: list[seeded_pass.Request]) -> dict[str, list[dict[str, Any]]]:
    by_operation: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for request in requests:
        by_operation[request.operation].append(dataclasses.asdict(request))
    return by_operation


@pytest.mark.timeout(BUDGET + 420)
def test_the_whole_api_survives_schemathesis(live, tmp_path, record_property):  # type: ignore[no-untyped-def]
    state = tmp_path / "state.json"
    state.write_text(json.dumps(_seed()))
    log = tmp_path / "calls.ndjson"
    base = live.daphne()
    schema = schemathesis.openapi.from_url(f"{base}/api/schema/")
    documented = {
        f"{method.upper()} {path}"
        for path, item in schema.raw_schema["paths"].items()
        for method in item
        if method in ("get", "put", "post", "delete", "patch")
    }
    assert set(UNREACHABLE) <= documented, set(UNREACHABLE) - documented
    first = seeded_pass.run(schema, base, skip=lambda operation: operation in UNREACHABLE)
    report = tmp_path / "report.json"
    run = subprocess.run(
        [
            SCHEMATHESIS,
            "run",
            f"{base}/api/schema/",
            "--url",
            base,
            "--checks",
            CHECKS,
            "--max-time",
            str(BUDGET),
            "--seed",
            "1",
            "--report",
            "json",
            "--report-json-path",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=BUDGET + 300,
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "SCHEMATHESIS_HOOKS": "tests.fuzz.schemathesis_hooks",
            "TOOLGATE_FUZZ_STATE": str(state),
            "TOOLGATE_FUZZ_LOG": str(log),
        },
    )
    statuses: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    for line in log.read_text().splitlines():
        call = json.loads(line)
        statuses[call["operation"]][call["status"]] += 1
    summary = json.loads(report.read_text())
    operations = summary["operations"]["total"]
    reached = sorted(op for op, seen in statuses.items() if any(200 <= s < 300 for s in seen))
    never = "; ".join(f"{op} {dict(statuses[op])}" for op in sorted(set(statuses) - set(reached)))
    first_reached = {outcome.operation for outcome in first if 200 <= outcome.status < 300}
    missing = sorted(documented - first_reached - set(reached) - set(UNREACHABLE))
    record_property(
        "summary",
        f"schemathesis: {len(first_reached | set(reached))} of {operations} operations answered a 2xx "
        f"({len(first_reached)} in the seeded pass, {len(reached)} in the random phases); "
        f"{len(UNREACHABLE)} documented as unreachable; never in the random phases: {never or 'none'}",
    )
    assert not [o for o in first if o.failures], [o for o in first if o.failures]
    assert run.returncode == 0, run.stdout[-12000:]
    assert summary["operations"]["tested"] == operations == len(documented)
    assert not missing, [(o.operation, o.status, o.detail) for o in first if o.operation in missing]
    assert len(reached) >= REACHED_FLOOR, never
