"""The Overview page: the "needs you" strip links each item to its inbox for the roles that may open it,
members and viewers are told the figures are their own, the page hands its script the aggregate
endpoints and the live topics the role may subscribe to, and its queries are bounded."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.audit.models import ToolCall

pytestmark = pytest.mark.django_db


def _config(body: str) -> dict[str, object]:
    found = re.search(r'<script id="overview-config" type="application/json">(.*?)</script>', body, re.S)
    assert found, "no overview config"
    config: dict[str, object] = json.loads(found.group(1))
    return config


def _needs(body: str) -> dict[str, str]:
    return dict(re.findall(r'data-need="([a-z_]+)" href="([^"]+)"', body))


def test_an_admin_sees_every_item_linked_to_its_inbox(admin):
    body = admin.get(reverse("dashboard:home")).content.decode()
    assert _needs(body) == {
        "approvals_waiting": reverse("dashboard:approvals"),
        "open_escalations": reverse("dashboard:escalations"),
        "pending_access_requests": reverse("dashboard:mcp_requests"),
        "mcp_servers_not_connected": reverse("dashboard:mcp_servers"),
        "failed_runs": reverse("dashboard:runs") + "?status=failed",
    }
    config = _config(body)
    assert config["urls"] == {
        "series": "/api/v1/stats/tool-calls",
        "top": "/api/v1/stats/top",
        "needs": "/api/v1/stats/needs-you",
    }
    assert config["topics"] == ["tool_calls", "runs", "approvals", "mcp"]
    assert config["own"] is False
    assert "vendor/uplot/uPlot.iife.min.js" in body
    for chart in ("calls", "latency", "errors"):
        assert f'data-chart="{chart}"' in body
    assert body.count("Data table") == 3


def test_a_member_sees_their_own_version(member):
    body = member.get(reverse("dashboard:home")).content.decode()
    assert _needs(body) == {
        "pending_access_requests": reverse("dashboard:mcp_my_requests"),
        "failed_runs": reverse("dashboard:runs") + "?status=failed",
    }
    assert "the figures below are your own" in body
    config = _config(body)
    assert config["topics"] == ["tool_calls", "runs"]
    assert config["own"] is True


def test_a_viewer_has_nothing_waiting_and_no_topics(viewer):
    body = viewer.get(reverse("dashboard:home")).content.decode()
    assert _needs(body) == {}
    assert "Nothing waits for a viewer." in body
    assert _config(body)["topics"] == []


def test_the_range_comes_from_the_address(admin):
    assert _config(admin.get(reverse("dashboard:home") + "?range=week").content.decode())["range"] == "week"
    assert _config(admin.get(reverse("dashboard:home") + "?range=year").content.decode())["range"] == "day"


def test_the_overview_queries_are_bounded(owner, tenant_a, django_assert_max_num_queries):
    for index in range(20):
        ToolCall.objects.create(
            tenant=tenant_a,
            agent_key=f"a{index}",
            tool=f"t{index}",
            decision="allowed",
            status="ok",
            actor_kind="system",
            actor_id="system",
            created_at=timezone.now(),
        )
    owner.get(reverse("dashboard:home"))
    with django_assert_max_num_queries(14):
        assert owner.get(reverse("dashboard:home")).status_code == 200
