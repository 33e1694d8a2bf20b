"""The log pages' drill-down: each tool call's and audit event's own page, the filter links of the
tables' cells, the filters' suggestions, invalid filters, and the exports from the dashboard."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.audit.models import AuditEvent, ToolCall
from apps.audit.services import record
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.dashboard.test_runtime_pages import make_agent, make_call, rows

pytestmark = pytest.mark.django_db


def audit_count(tenant: Tenant, **filters: str) -> int:
    return AuditEvent.objects.for_tenant(tenant).filter(**filters).count()


def event(tenant: Tenant, verb: str = "thing.done", **fields) -> AuditEvent:  # type: ignore[no-untyped-def]
    return record(
        actor=Actor.system(tenant), verb=verb, target_type=fields.pop("target_type", "thing"), **fields
    )


# --- the tool call's page ----------------------------------------------------------------------------


def test_a_tool_call_page_shows_the_call_and_the_events_of_its_request(member, admin, tenant_a):
    agent = make_agent(tenant_a, "bot")
    call = make_call(
        tenant_a,
        agent,
        tool="bash",
        resolved_tool="exec",
        decision=ToolCall.Decision.APPROVAL_DENIED,
        status=ToolCall.Status.ERROR,
        error="denied: <script>x</script>",
        args={"command": "rm -rf /tmp/x", "token": "[REDACTED]"},
        duration_ms=12.5,
        session_key="chat-9",
        request_id="req-drill-1",
    )
    AuditEvent.objects.create(
        tenant=tenant_a,
        actor_kind="api_key",
        actor_id="k",
        verb="approval.requested",
        target_type="approval",
        target_id="00000000-0000-0000-0000-000000000001",
        request_id="req-drill-1",
    )
    AuditEvent.objects.create(
        tenant=tenant_a,
        actor_kind="api_key",
        actor_id="k",
        verb="other.request",
        target_type="x",
        request_id="r2",
    )
    url = reverse("dashboard:tool_call_detail", args=[call.pk])

    as_member = member.get(url)
    as_admin = admin.get(url).content.decode()

    assert as_member.status_code == 200
    body = as_member.content.decode()
    assert "Approval denied" in body
    assert "denied: &lt;script&gt;x&lt;/script&gt;" in body
    assert "<script>x</script>" not in body
    assert "&quot;token&quot;: &quot;[REDACTED]&quot;" in body
    assert "12.5 ms" in body
    assert "chat-9" in body
    assert reverse("dashboard:approvals") in body
    assert "approval.requested" not in body  # the audit log is for admins
    assert "approval.requested" in as_admin
    assert "other.request" not in as_admin
    related = AuditEvent.objects.for_tenant(tenant_a).get(verb="approval.requested")
    assert reverse("dashboard:audit_event", args=[related.pk]) in as_admin


def test_a_tool_call_page_refuses_a_viewer_and_hides_another_tenants_call(
    viewer, outsider, owner, tenant_a, tenant_b
):
    mine = make_call(tenant_a)
    theirs = make_call(tenant_b, agent_key="their-bot")
    before = audit_count(tenant_a), audit_count(tenant_b)

    assert viewer.get(reverse("dashboard:tool_call_detail", args=[mine.pk])).status_code == 403
    assert outsider.get(reverse("dashboard:tool_call_detail", args=[mine.pk])).status_code == 404
    missing = owner.get(reverse("dashboard:tool_call_detail", args=["00000000-0000-0000-0000-000000000000"]))
    other = owner.get(reverse("dashboard:tool_call_detail", args=[theirs.pk]))
    assert missing.status_code == other.status_code == 404
    assert "their-bot" not in other.content.decode()
    assert (audit_count(tenant_a), audit_count(tenant_b)) == before


# --- the audit event's page --------------------------------------------------------------------------


def test_an_audit_event_page_shows_every_field_escaped(admin, member, outsider, tenant_a):
    shown = event(tenant_a, verb="note.added", target_id="n-1", data={"text": "<b>bold</b>", "n": 3})

    response = admin.get(reverse("dashboard:audit_event", args=[shown.pk]))

    body = response.content.decode()
    assert response.status_code == 200
    assert "note.added" in body
    assert str(shown.pk) in body
    assert "&quot;text&quot;: &quot;&lt;b&gt;bold&lt;/b&gt;&quot;" in body
    assert "<b>bold</b>" not in body
    assert "?target_type=thing&amp;target_id=n-1" in body
    assert member.get(reverse("dashboard:audit_event", args=[shown.pk])).status_code == 403
    assert outsider.get(reverse("dashboard:audit_event", args=[shown.pk])).status_code == 404


def test_an_audit_event_links_to_its_target_page(admin, tenant_a):
    call = make_call(tenant_a)
    shown = event(tenant_a, verb="tool_call.noted", target_type="tool_call", target_id=str(call.pk))

    body = admin.get(reverse("dashboard:audit_event", args=[shown.pk])).content.decode()

    assert f'href="{reverse("dashboard:tool_call_detail", args=[call.pk])}"' in body
    agent = make_agent(tenant_a, "helper")
    created = AuditEvent.objects.for_tenant(tenant_a).get(verb="agent.created", target_id=str(agent.pk))
    agent_page = admin.get(reverse("dashboard:audit_event", args=[created.pk])).content.decode()
    assert f'href="{reverse("dashboard:agent_edit", args=["helper"])}"' in agent_page


# --- the tables' links, suggestions and invalid filters ----------------------------------------------


def test_a_tool_call_row_links_to_its_page_and_its_cells_filter(member, tenant_a):
    call = make_call(tenant_a, make_agent(tenant_a, "bot"), tool="exec", session_key="s-7")

    body = member.get(reverse("dashboard:tool_calls"), {"decision": "allowed", "page": "1"}).content.decode()

    assert f'href="{reverse("dashboard:tool_call_detail", args=[call.pk])}"' in body
    # Each filter link keeps the other filters and leaves the page number out.
    assert 'href="?decision=allowed&amp;agent=bot"' in body
    assert 'href="?decision=allowed&amp;tool=exec"' in body
    assert 'href="?decision=allowed&amp;session_key=s-7"' in body
    assert 'href="?decision=allowed&amp;status=ok"' in body
    listed = member.get(reverse("dashboard:tool_calls") + "?decision=allowed&tool=exec").content.decode()
    assert rows(listed) == [str(call.pk)]


def test_an_audit_row_links_to_its_page_and_its_actor_filters(admin, tenant_a):
    shown = event(tenant_a, verb="thing.done", target_id="7")

    body = admin.get(reverse("dashboard:audit"), {"verb": "thing."}).content.decode()

    assert f'href="{reverse("dashboard:audit_event", args=[shown.pk])}"' in body
    assert 'href="?verb=thing.&amp;actor_kind=system&amp;actor_id=system"' in body
    assert 'href="?verb=thing.&amp;target_type=thing&amp;target_id=7"' in body
    assert ' title="{' not in body  # the truncated hover text gave way to the event's page


def test_filters_suggest_recent_values_in_a_bounded_number_of_queries(member, admin, tenant_a, tenant_b):
    make_agent(tenant_a, "bot")
    make_call(tenant_a, tool="read_file", session_key="s-a")
    make_call(tenant_b, tool="their_secret_tool", session_key="s-b")
    event(tenant_b, verb="their.secret")

    with CaptureQueriesContext(connection) as few:
        body = member.get(reverse("dashboard:tool_calls")).content.decode()
    for i in range(30):
        make_call(tenant_a, tool=f"tool_{i}", session_key=f"s-{i}")
    with CaptureQueriesContext(connection) as many:
        more = member.get(reverse("dashboard:tool_calls")).content.decode()
    audit = admin.get(reverse("dashboard:audit")).content.decode()

    assert len(many) == len(few)
    assert 'list="suggest-tool"' in body
    assert re.search(r'<datalist id="suggest-tool">.*<option value="read_file">', body)
    assert '<option value="s-a">' in body
    assert "their_secret_tool" not in body
    assert '<option value="tool_29">' in more
    assert re.search(r'<datalist id="suggest-verb">.*<option value="agent.created">', audit)
    assert "their.secret" not in audit


def test_suggestions_are_bounded(member, tenant_a):
    for i in range(60):
        make_call(tenant_a, tool=f"t{i:02d}")

    body = member.get(reverse("dashboard:tool_calls")).content.decode()

    tools = re.search(r'<datalist id="suggest-tool">(.*?)</datalist>', body)
    assert tools
    assert tools.group(1).count("<option") == 50


def test_an_invalid_filter_shows_its_error_over_an_empty_table(member, admin, tenant_a):
    make_call(tenant_a)
    event(tenant_a)

    calls = member.get(
        reverse("dashboard:tool_calls"), {"decision": "maybe", "tool": "datetime"}
    ).content.decode()
    events = admin.get(reverse("dashboard:audit"), {"since": "yesterday-ish"}).content.decode()

    assert re.search(r'id="id_decision_error">\s*<li>Select a valid choice', calls)
    assert rows(calls) == []
    assert "No tool calls match these filters." in calls
    assert "data-tool-calls-live" not in calls
    assert re.search(r'id="id_since_error">\s*<li>Enter a valid date/time.</li>', events)
    assert "<tr data-id=" not in events
    assert "No audit events match these filters." in events
    assert "data-export=" not in calls + events


# --- exports -----------------------------------------------------------------------------------------


def test_the_tool_call_export_holds_exactly_the_filtered_rows_and_is_audited(member, tenant_a, tenant_b):
    bot = make_agent(tenant_a, "bot")
    kept = [make_call(tenant_a, bot, tool="exec", args={"cmd": '=HYPERLINK("x")'}) for _ in range(3)]
    make_call(tenant_a, bot, tool="read_file")
    make_call(tenant_b, agent_key="bot", tool="exec")
    page = member.get(reverse("dashboard:tool_calls"), {"tool": "exec", "page": "1"}).content.decode()
    link = re.search(r'href="([^"]+)"[^>]*data-export="csv"', page)
    assert link
    href = link.group(1).replace("&amp;", "&")
    assert href == reverse("dashboard:tool_calls_export") + "?tool=exec&format=csv"

    response = member.get(href)
    text = b"".join(response.streaming_content).decode()

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    table = list(csv.DictReader(io.StringIO(text)))
    assert sorted(r["id"] for r in table) == sorted(str(c.pk) for c in kept)
    assert all(r["tool"] == "exec" for r in table)
    assert {r["args"] for r in table} == {'{"cmd": "=HYPERLINK(\\"x\\")"}'}  # JSON: starts with "{"
    exported = AuditEvent.objects.for_tenant(tenant_a).get(verb="tool_calls.exported")
    assert exported.data == {"format": "csv", "filters": {"tool": "exec"}, "limit": 100_000}
    assert audit_count(tenant_b, verb="tool_calls.exported") == 0
    # Once the last row is written, how many the download held.
    finished = AuditEvent.objects.for_tenant(tenant_a).get(verb="tool_calls.export_finished")
    assert finished.data == {"started": str(exported.pk), "rows": 3, "truncated": False}


def test_a_formula_in_a_csv_cell_is_written_as_text(admin, tenant_a):
    for start in ("=", "+", "-", "@", "\t", "\r"):
        make_call(tenant_a, tool=f"{start}SUM(A1)", error=f"{start}cmd|' /C calc'!A0")

    response = admin.get(reverse("dashboard:tool_calls_export"), {"format": "csv"})
    table = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))

    assert len(table) == 6
    for row in table:
        assert row["tool"].startswith("'")
        assert row["tool"][1] in "=+-@\t\r"
        assert row["error"].startswith("'")


def test_the_audit_export_as_ndjson_holds_the_filtered_events(admin, tenant_a, tenant_b):
    kept = [event(tenant_a, verb="note.added", data={"i": i}) for i in range(2)]
    event(tenant_a, verb="other.thing")
    event(tenant_b, verb="note.added")

    response = admin.get(reverse("dashboard:audit_export"), {"format": "ndjson", "verb": "note.*"})
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]

    assert response["Content-Type"] == "application/x-ndjson"
    assert [line["id"] for line in lines] == [str(e.pk) for e in reversed(kept)]
    assert lines[0]["data"] == {"i": 1}
    assert audit_count(tenant_a, verb="audit.exported") == 1
    finished = AuditEvent.objects.for_tenant(tenant_a).get(verb="audit.export_finished")
    assert (finished.data["rows"], finished.data["truncated"]) == (2, False)


def test_exports_are_refused_below_the_logs_role_and_for_bad_input(viewer, member, admin, tenant_a):
    assert viewer.get(reverse("dashboard:tool_calls_export")).status_code == 403
    assert member.get(reverse("dashboard:audit_export")).status_code == 403
    assert admin.get(reverse("dashboard:audit_export"), {"format": "xlsx"}).status_code == 400
    assert admin.get(reverse("dashboard:tool_calls_export"), {"status": "maybe"}).status_code == 400
    assert audit_count(tenant_a, verb__endswith=".exported") == 0
