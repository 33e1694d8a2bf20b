"""Policy documents and whole-policy imports (the GoClaw keys and Toolgate's), fuzzed with Hypothesis
through the API: every generated document is stored or refused with the error envelope and 400;
nothing else, and a refused one changes nothing. A stored document reads back as stored, and saving it
again is accepted unchanged. ``TOOLGATE_FUZZ_EXAMPLES`` sets the examples per test (120) for a longer
run."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apps.accounts import services
from apps.policy.models import PolicyVersion
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests import factories
from tests.fuzz.strategies import json_values, policy_documents

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=int(os.environ.get("TOOLGATE_FUZZ_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)


@pytest.fixture
def admin(tenant_a: Tenant) -> Any:
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    return factories.key_client(factories.make_api_key(tenant_a, "admin"))


def _refused_or_stored(response: Any) -> bool:
    assert response.status_code in (200, 201, 400), (response.status_code, response.content[:500])
    if response.status_code == 400:
        body = response.json()
        assert set(body) == {"error"}, body
        assert body["error"]["message"], body
        event("refused")
        return False
    event("stored")
    return True


@FUZZ
@given(document=policy_documents(), scope=st.sampled_from(["tenant", "agents/bot"]))
def test_a_policy_document_is_stored_or_refused_never_a_server_error(admin, tenant_a, document, scope):
    url = f"/api/v1/policy/{scope}/"
    versions = PolicyVersion.objects.for_tenant(tenant_a).count()
    response = admin.put(url, {"document": document}, format="json")
    if not _refused_or_stored(response):
        assert PolicyVersion.objects.for_tenant(tenant_a).count() == versions
        return
    stored = admin.get(url).json()["document"]
    again = admin.put(url, {"document": stored}, format="json")
    assert again.status_code in (200, 201), again.content[:500]
    assert admin.get(url).json()["document"] == stored


@FUZZ
@given(
    bundle=st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "format": st.one_of(st.just(1), json_values(2)),
                "tenant": policy_documents(),
                "agents": st.one_of(
                    st.dictionaries(st.sampled_from(["bot", "ghost", ""]), policy_documents(), max_size=2),
                    json_values(4),
                ),
                "channels": st.one_of(
                    st.lists(
                        st.fixed_dictionaries(
                            {"channel": st.sampled_from(["telegram", "", "x" * 200])},
                            optional={"chat_id": json_values(1), "allow": json_values(4)},
                        ),
                        max_size=2,
                    ),
                    json_values(4),
                ),
            },
        ),
        json_values(10),
    )
)
def test_a_whole_policy_import_is_applied_or_refused_never_a_server_error(admin, tenant_a, bundle):
    versions = PolicyVersion.objects.for_tenant(tenant_a).count()
    response = admin.put("/api/v1/policy/export", bundle, format="json")
    if not _refused_or_stored(response):
        assert PolicyVersion.objects.for_tenant(tenant_a).count() == versions
