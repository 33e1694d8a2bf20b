"""``/metrics`` is for the operator's scrapers only: a tenant's API key, a dashboard session or no
credentials get the same 404 as an unknown URL; the configured token (or a configured network) gets
the metrics. It is not in the OpenAPI document."""

from __future__ import annotations

import re

import pytest
from django.test import Client, override_settings

from apps.tenants.roles import Role
from tests import factories
from tests.dashboard.personas import login

pytestmark = pytest.mark.django_db

TOKEN = "scraper-token-0123456789abcdef"


def _page(content: bytes) -> bytes:
    """A page without its CSRF token (masked differently on every render)."""
    return re.sub(rb'name="csrfmiddlewaretoken" value="[^"]*"', b"", content)


def _unknown_url_404(client: Client) -> bytes:
    response = client.get("/no-such-page-at-all")
    assert response.status_code == 404
    return _page(response.content)


@override_settings(TOOLGATE_METRICS_TOKEN=TOKEN, TOOLGATE_METRICS_ALLOW_NETS=[])
def test_only_the_scraper_token_reads_metrics(tenant_a):
    owner_key = factories.make_api_key(tenant_a, Role.OWNER)
    owner = factories.make_user(tenant_a, Role.OWNER)
    personas = {
        "anonymous": Client(),
        "tenant owner key": Client(headers={"Authorization": f"Bearer {owner_key}"}),
        "dashboard session": login(owner),
        "wrong token": Client(headers={"Authorization": f"Bearer {TOKEN}x"}),
        "token prefix": Client(headers={"Authorization": f"Bearer {TOKEN[:-1]}"}),
        "token without scheme": Client(headers={"Authorization": TOKEN}),
    }
    for who, client in personas.items():
        response = client.get("/metrics")
        assert response.status_code == 404, who
        # the same page as any unknown URL: nothing tells the endpoint exists
        assert _page(response.content) == _unknown_url_404(client), who

    scraper = Client(headers={"Authorization": f"Bearer {TOKEN}"})
    response = scraper.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    body = response.content.decode()
    assert "toolgate_approvals_waiting " in body
    # writes are refused like any other unknown URL
    assert scraper.post("/metrics").status_code == 404


@override_settings(TOOLGATE_METRICS_TOKEN="", TOOLGATE_METRICS_ALLOW_NETS=[])
def test_nothing_configured_means_nobody_reads_metrics(tenant_a):
    assert Client().get("/metrics").status_code == 404
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 404
    assert Client(headers={"Authorization": "Bearer "}).get("/metrics").status_code == 404


@override_settings(TOOLGATE_METRICS_TOKEN="", TOOLGATE_METRICS_ALLOW_NETS=["10.1.2.0/24", "::1/128"])
def test_a_scraper_network_reads_metrics_by_its_peer_address(tenant_a):
    assert Client(REMOTE_ADDR="10.1.2.7").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="10.1.3.7").get("/metrics").status_code == 404
    # a forwarded-for header names no peer: only the connection's address counts
    spoofed = Client(REMOTE_ADDR="192.0.2.1", headers={"X-Forwarded-For": "10.1.2.7"})
    assert spoofed.get("/metrics").status_code == 404


def test_metrics_is_not_in_the_openapi_document(owner_a):
    document = owner_a.get("/api/schema/")
    assert document.status_code == 200
    assert b"/api/v1/agents/" in document.content
    assert b"metrics" not in document.content
