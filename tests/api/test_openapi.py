"""The OpenAPI document is complete, valid, and describes our authentication and error shapes."""

from __future__ import annotations

from io import StringIO

import pytest
import yaml
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_schema_generates_without_warnings_and_validates(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target), stdout=StringIO())
    schema = yaml.safe_load(target.read_text())
    assert {"apiKey", "session"} <= set(schema["components"]["securitySchemes"])
    paths = set(schema["paths"])
    assert {
        "/api/v1/me/",
        "/api/v1/agents/",
        "/api/v1/agents/{key}/",
        "/api/v1/api-keys/",
        "/api/v1/memberships/",
        "/api/v1/audit/events/",
    } <= paths


def test_schema_and_docs_are_served(anonymous):
    assert anonymous.get("/api/schema/").status_code == 200
    docs = anonymous.get("/api/docs/")
    assert docs.status_code == 200
    # the viewer's assets come from the installed sidecar package, not from a CDN
    assert b"cdn.jsdelivr.net" not in docs.content
    assert b"/static/drf_spectacular_sidecar/" in docs.content
    bundle = anonymous.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert bundle.status_code == 200
