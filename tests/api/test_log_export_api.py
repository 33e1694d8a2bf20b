"""The REST exports of the audit log and the tool-call log, and their detail routes: exactly the filtered
rows of the caller's tenant, streamed as CSV or NDJSON, formula-safe, audited, for the log's roles."""

from __future__ import annotations

import csv
import datetime
import io
import json

import pytest
from django.utils import timezone

from apps.audit import export
from apps.audit.models import AuditEvent, ToolCall
from apps.audit.services import record
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant

pytestmark = pytest.mark.django_db


def call(tenant: Tenant, **fields) -> ToolCall:  # type: ignore[no-untyped-def]
    values = {
        "agent_key": "bot",
        "tool": "datetime",
        "decision": "allowed",
        "status": "ok",
        "actor_kind": "system",
        "actor_id": "system",
        **fields,
    }
    return ToolCall.objects.create(tenant=tenant, **values)


def body(response) -> str:  # type: ignore[no-untyped-def]
    assert response.streaming
    return b"".join(response.streaming_content).decode()


def test_the_tool_call_export_holds_exactly_the_filtered_rows(member_a, tenant_a, tenant_b):
    kept = [call(tenant_a, tool="exec", session_key="s-1") for _ in range(3)]
    call(tenant_a, tool="exec", session_key="s-2")
    call(tenant_a, tool="read_file", session_key="s-1")
    call(tenant_b, tool="exec", session_key="s-1")

    response = member_a.get("/api/v1/tool-calls/export/?format=ndjson&tool=exec&session_key=s-1")

    lines = [json.loads(line) for line in body(response).splitlines()]
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    assert response["X-Export-Limit"] == "100000"
    assert [line["id"] for line in lines] == [str(c.pk) for c in reversed(kept)]
    assert set(lines[0]) == set(export.TOOL_CALL_COLUMNS)
    exported = AuditEvent.objects.for_tenant(tenant_a).get(verb="tool_calls.exported")
    assert exported.data == {
        "format": "ndjson",
        "filters": {"tool": "exec", "session_key": "s-1"},
        "limit": 100_000,
    }
    assert exported.actor_kind == "api_key"
    assert not AuditEvent.objects.for_tenant(tenant_b).filter(verb="tool_calls.exported").exists()


def test_the_audit_export_is_csv_by_default_and_escapes_formulas(admin_a, tenant_a, tenant_b):
    system = Actor.system(tenant_a)
    record(actor=system, verb="note.added", target_type="note", target_id="=1+2", data={"x": 1})
    record(actor=system, verb="note.added", target_type="note", target_id="@SUM(A1)")
    record(actor=system, verb="other.thing", target_type="note")
    record(actor=Actor.system(tenant_b), verb="note.added", target_type="note", target_id="b")

    response = admin_a.get("/api/v1/audit/events/export/?verb=note.*")

    table = list(csv.DictReader(io.StringIO(body(response))))
    assert response["Content-Type"].startswith("text/csv")
    assert [row["target_id"] for row in table] == ["'@SUM(A1)", "'=1+2"]
    assert table[1]["data"] == '{"x": 1}'
    # The export's own event is written as it starts, with its filters, and is not one of its rows.
    exported = AuditEvent.objects.for_tenant(tenant_a).get(verb="audit.exported")
    assert exported.data["filters"] == {"verb": "note.*"}
    assert exported.data["format"] == "csv"


def test_a_time_filter_applies_to_the_export(admin_a, tenant_a):
    call(tenant_a)
    future = (timezone.now() + datetime.timedelta(minutes=5)).isoformat().replace("+00:00", "Z")

    response = admin_a.get(f"/api/v1/tool-calls/export/?format=csv&since={future}")

    assert body(response).splitlines() == [",".join(export.TOOL_CALL_COLUMNS)]


def test_an_export_past_the_limit_says_it_was_cut(admin_a, tenant_a, monkeypatch):
    for _ in range(3):
        call(tenant_a)
    monkeypatch.setattr(export, "EXPORT_LIMIT", 2)

    ndjson = body(admin_a.get("/api/v1/tool-calls/export/?format=ndjson")).splitlines()
    rows = list(csv.reader(io.StringIO(body(admin_a.get("/api/v1/tool-calls/export/?format=csv")))))

    assert len(ndjson) == 3
    assert json.loads(ndjson[-1]) == {"truncated": True, "limit": 2}
    assert len(rows) == 4
    assert rows[-1] == ["# truncated: an export holds at most 2 rows"]
    finished = AuditEvent.objects.for_tenant(tenant_a).filter(verb="tool_calls.export_finished")
    assert [(e.data["rows"], e.data["truncated"]) for e in finished] == [(2, True), (2, True)]


@pytest.mark.parametrize(
    "query",
    ["format=xlsx", "format=csv&decision=maybe", "format=csv&since=yesterday", "format=csv&bogus=1"],
)
def test_a_bad_export_request_is_refused_and_not_audited(member_a, tenant_a, query):
    response = member_a.get(f"/api/v1/tool-calls/export/?{query}")

    assert response.status_code == 400, response.content
    assert response.json()["error"]
    assert not AuditEvent.objects.for_tenant(tenant_a).filter(verb="tool_calls.exported").exists()


def test_exports_need_the_logs_role(viewer_a, member_a, anonymous, tenant_a):
    assert viewer_a.get("/api/v1/tool-calls/export/").status_code == 403
    assert member_a.get("/api/v1/audit/events/export/").status_code == 403
    assert anonymous.get("/api/v1/tool-calls/export/").status_code == 401
    assert not AuditEvent.objects.for_tenant(tenant_a).filter(verb__endswith=".exported").exists()


def test_detail_routes_answer_for_the_tenant_only(member_a, admin_a, outsider, tenant_a):
    mine = call(tenant_a, tool="exec", args={"cmd": "ls"})
    event = record(actor=Actor.system(tenant_a), verb="note.added", target_type="note", data={"k": "v"})

    got = member_a.get(f"/api/v1/tool-calls/{mine.pk}/").json()
    got_event = admin_a.get(f"/api/v1/audit/events/{event.pk}/").json()

    assert got["tool"] == "exec"
    assert got["args"] == {"cmd": "ls"}
    assert got_event["data"] == {"k": "v"}
    assert member_a.get(f"/api/v1/audit/events/{event.pk}/").status_code == 403
    assert outsider.get(f"/api/v1/tool-calls/{mine.pk}/").status_code == 404
    assert outsider.get(f"/api/v1/audit/events/{event.pk}/").status_code == 404
