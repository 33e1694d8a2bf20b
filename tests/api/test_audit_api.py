from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection, transaction
from django.db.utils import DatabaseError
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.audit.services import record
from apps.tenants.actors import Actor

pytestmark = pytest.mark.django_db


def _events(tenant, n: int, verb: str = "thing.done") -> None:
    for i in range(n):
        record(actor=Actor.system(tenant), verb=verb, target_type="thing", target_id=str(i), data={"i": i})


def test_cursor_pagination_walks_every_event_once_newest_first(
    admin_a, tenant_a, django_assert_max_num_queries
):
    _events(tenant_a, 120)
    seen: list[str] = []
    url = "/api/v1/audit/events/?verb=thing.done&page_size=50"
    pages = 0
    while url:
        with django_assert_max_num_queries(3):
            body = admin_a.get(url).json()
        seen += [e["target"]["id"] for e in body["results"]]
        url = body["next"]
        pages += 1
    assert pages == 3
    assert seen == [str(i) for i in reversed(range(120))]


def test_filters(admin_a, tenant_a):
    _events(tenant_a, 3, verb="agent.created")
    _events(tenant_a, 2, verb="agent.deleted")
    _events(tenant_a, 1, verb="key.rotated")

    def count(query: str) -> int:
        response = admin_a.get(f"/api/v1/audit/events/?{query}")
        assert response.status_code == 200, response.content
        return len(response.json()["results"])

    assert count("verb=agent.created") == 3
    assert count("verb=agent.*") == 5
    assert count("verb=agent.deleted&target_id=1") == 1
    assert count("actor_kind=system&target_type=thing") == 6
    assert count("actor_kind=user") == 0
    future = (timezone.now() + dt.timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    assert count(f"since={future}") == 0
    assert count(f"until={future}&verb=key.rotated") == 1


def test_api_requests_record_request_id_and_ip(admin_a, tenant_a):
    response = admin_a.post(
        "/api/v1/agents/", {"key": "x", "name": "X"}, format="json", HTTP_X_REQUEST_ID="req-1234567890"
    )
    assert response["X-Request-ID"] == "req-1234567890"
    event = admin_a.get("/api/v1/audit/events/?verb=agent.created").json()["results"][0]
    assert event["request_id"] == "req-1234567890"
    assert event["ip"] == "127.0.0.1"
    assert event["actor"]["kind"] == "api_key"


def test_audit_rows_are_append_only_in_the_database(tenant_a):
    _events(tenant_a, 1)
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="thing.done")
    for sql in (
        "UPDATE audit_auditevent SET verb = 'x' WHERE id = %s",
        "DELETE FROM audit_auditevent WHERE id = %s",
    ):
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cur,
        ):
            cur.execute(sql, [event.pk])
    with pytest.raises(RuntimeError, match="append-only"):
        event.save()
    assert AuditEvent.objects.for_tenant(tenant_a).get(pk=event.pk).verb == "thing.done"


def test_a_failed_change_leaves_no_audit_row(tenant_a):
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        record(actor=Actor.system(tenant_a), verb="doomed", target_type="thing")
        1 / 0  # noqa: B018
    assert not AuditEvent.objects.for_tenant(tenant_a).filter(verb="doomed").exists()
