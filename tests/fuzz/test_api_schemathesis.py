"""Schemathesis over the whole published API, against a real daphne on the test database.

Every operation of the OpenAPI document goes through the coverage, fuzzing and stateful phases within
a time budget (``TOOLGATE_FUZZ_SECONDS``, a few minutes by default; set it higher for a long run), with
these checks: no server error, the response conforming to the documented schema, its status code and
its content type documented. Objects are seeded so that operations needing ids are reached
(``schemathesis_hooks.py``), and the run's keys cannot be revoked by the run. The test reports how
many operations answered a 2xx at least once, and fails if one that should be reachable was not.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.api.test_tenant_isolation import CASES

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
BUDGET = int(os.environ.get("TOOLGATE_FUZZ_SECONDS", "90"))
# Operations that answered a 2xx in the run. With 120 s on a quiet machine 175 of 192 were reached;
# within the suite's 90 s, beside the other tests on two cores, 153. Those not reached are mostly updates
# whose seeded object an earlier DELETE of the same run removed, and creates whose bodies the schema
# cannot describe fully (a channel's type-specific config, an access request naming a server the
# tenant has). The figure may not fall below this floor.
REACHED_FLOOR = 130
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def _owner_key(tenant: Any, protected: set[str]) -> str:
    api_key, raw = services.api_key_create(actor=Actor.system(tenant), name="fuzz-run", role=Role.OWNER)
    protected.add(str(api_key.pk))
    return raw


def _seed() -> dict[str, Any]:
    """The main tenant with an agent and its key, and one tenant per builder of the tenant-isolation
    cases holding that builder's objects, with the URLs that name them."""
    protected: set[str] = set()
    main = factories.make_tenant("fuzz")
    services.agent_create(actor=Actor.system(main), key="fuzz-agent", name="Fuzz agent")
    key = _owner_key(main, protected)
    made: dict[Any, tuple[dict[str, str], str]] = {}
    urls = []
    for name, case in sorted(CASES.items()):
        if case.own_tenant_only or case.tenant_agnostic or case.collection or case.post_only:
            continue
        if case.make not in made:
            tenant = factories.make_tenant(f"fuzz-{len(made)}")
            made[case.make] = (case.make(tenant), _owner_key(tenant, protected))
        kwargs, raw = made[case.make]
        urls.append((reverse(name, kwargs=kwargs), raw))
    return {"key": key, "protected": sorted(protected), "seeded": _by_template(urls)}


def _by_template(urls: list[tuple[str, str]]) -> dict[str, list[tuple[dict[str, str], str]]]:
    """Each seeded URL's path values under the most specific path template of the OpenAPI document
    it matches (``…/users/{user_id}/bootstrap`` rather than ``…/users/{user_id}/{name}``)."""
    templates = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    patterns = {}
    for template in templates:
        parts = re.split(r"(\{\w+\})", template)
        patterns[template] = re.compile(
            "".join(
                (
                    f"(?P<{part[1:-1]}>{'.+' if part == '{path}' else '[^/]+'})"
                    if part[:1] == "{"
                    else re.escape(part)
                )
                for part in parts
            )
            + "$"
        )
    seeded: dict[str, list[tuple[dict[str, str], str]]] = collections.defaultdict(list)
    for url, key in urls:
        matches = [(template, pattern.match(url)) for template, pattern in patterns.items()]
        found = [(template, match) for template, match in matches if match]
        if found:
            template, match = max(found, key=lambda pair: len(re.sub(r"\{\w+\}", "", pair[0])))
            seeded[template].append(({k: unquote(v) for k, v in match.groupdict().items()}, key))
    return seeded


@pytest.mark.timeout(BUDGET + 420)
def test_the_whole_api_survives_schemathesis(live, tmp_path, record_property):  # type: ignore[no-untyped-def]
    state = tmp_path / "state.json"
    state.write_text(json.dumps(_seed()))
    log = tmp_path / "calls.ndjson"
    base = live.daphne()
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
    unreached = sorted(set(statuses) - set(reached))
    never = "; ".join(f"{op} {dict(statuses[op])}" for op in unreached)
    record_property(
        "summary",
        f"schemathesis: {len(reached)} of {operations} operations answered a 2xx; never: {never or 'none'}",
    )
    assert run.returncode == 0, run.stdout[-12000:]
    assert summary["operations"]["tested"] == operations
    assert len(reached) >= REACHED_FLOOR, never
