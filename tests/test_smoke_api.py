from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_me_answers_for_an_api_key(admin_a, tenant_a):
    response = admin_a.get("/api/v1/me/")
    assert response.status_code == 200
    assert response.json()["tenant"]["slug"] == tenant_a.slug
    assert response.json()["role"] == "admin"
