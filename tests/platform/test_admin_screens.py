"""Django's admin for platform staff: every domain's models, across tenants, read-mostly, secrets never
shown, every change audited in the changed tenant's log, and out of reach of every tenant role."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from apps.accounts import services as accounts
from apps.audit.models import AuditEvent
from apps.llm import services as llm
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]


def _domain_models() -> list[Any]:
    return [m for m in apps.get_models() if m.__module__.startswith("apps.")]


@pytest.fixture
def staff() -> Client:
    user = get_user_model().objects.create_superuser("ops", "ops@platform.test", factories.PASSWORD)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def two_tenants(tenant_a: Tenant, tenant_b: Tenant) -> dict[str, Any]:
    made: dict[str, Any] = {}
    for tenant in (tenant_a, tenant_b):
        actor = Actor.system(tenant)
        made[f"agent_{tenant.slug}"] = accounts.agent_create(
            actor=actor, key="helper", name=f"Helper of {tenant.slug}"
        )
        made[f"provider_{tenant.slug}"] = llm.provider_create(
            actor=actor,
            name="main",
            base_url="https://llm.example.test/v1",
            api_key=f"sk-secret-of-{tenant.slug}",
        )
        factories.make_api_key(tenant, Role.MEMBER)
    return made


def _changelist(model: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def test_every_domain_model_has_a_screen_that_staff_can_list_and_search(
    staff: Client, two_tenants: Any
) -> None:
    models = _domain_models()
    assert len(models) > 50
    missing = [m._meta.label for m in models if not admin.site.is_registered(m)]
    assert missing == []
    index = staff.get("/admin/")
    assert index.status_code == 200
    for model in models:
        url = _changelist(model)
        assert url in index.content.decode(), model._meta.label
        # The list, its search (every search field must exist) and its tenant filter.
        for query in ("", "?q=helper", "?o=1"):
            response = staff.get(url + query)
            assert response.status_code == 200, (model._meta.label, query, response.status_code)


def test_staff_see_every_tenants_rows(staff: Client, two_tenants: Any, tenant_a: Tenant) -> None:
    page = staff.get(_changelist(Agent)).content.decode()
    assert "Helper of tenant-a" in page
    assert "Helper of tenant-b" in page
    narrowed = staff.get(_changelist(Agent) + f"?tenant__id__exact={tenant_a.pk}").content.decode()
    assert "Helper of tenant-a" in narrowed
    assert "Helper of tenant-b" not in narrowed


def test_a_secret_shows_as_set_and_never_as_its_value_or_ciphertext(staff: Client, two_tenants: Any) -> None:
    provider = two_tenants["provider_tenant-a"]
    from apps.llm.models import Provider

    stored = (
        Provider.objects.for_tenant(provider.tenant).filter(pk=provider.pk).values_list("api_key", flat=True)
    )
    url = reverse("admin:llm_provider_change", args=[provider.pk])
    page = staff.get(url).content.decode()
    assert "Api key (secret)" in page
    assert re.search(r"Api key \(secret\).*?<div class=\"readonly\">set</div>", page, re.S)
    assert "sk-secret-of-tenant-a" not in page
    assert (
        stored.get() == "sk-secret-of-tenant-a"
    )  # the field decrypts: the ciphertext is what the table holds
    listing = staff.get(_changelist(Provider)).content.decode()
    assert "sk-secret-of" not in listing


def test_an_admin_change_is_audited_in_the_tenants_log_with_the_staff_user_as_actor(
    staff: Client, two_tenants: Any, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    agent = two_tenants["agent_tenant-a"]
    version = Tenant.objects.get(pk=tenant_a.pk).config_version
    url = reverse("admin:tenants_agent_change", args=[agent.pk])
    response = staff.post(url, {"name": "Renamed by ops", "description": "", "_save": "Save"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Agent.objects.for_tenant(tenant_a).get(pk=agent.pk).name == "Renamed by ops"
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="platform_admin.changed")
    assert event.actor_kind == "user"
    assert event.actor_label == "ops@platform.test"
    assert event.target_type == "tenants.agent"
    assert event.target_id == str(agent.pk)
    assert event.data["fields"] == ["name"]
    assert event.data["via"] == "platform admin"
    assert Tenant.objects.get(pk=tenant_a.pk).config_version > version
    assert not AuditEvent.objects.for_tenant(tenant_b).filter(verb="platform_admin.changed").exists()


def test_read_only_screens_refuse_changes_additions_and_deletions(
    staff: Client, two_tenants: Any, tenant_a: Tenant
) -> None:
    provider = two_tenants["provider_tenant-a"]
    change = reverse("admin:llm_provider_change", args=[provider.pk])
    assert staff.post(change, {"name": "hijacked", "base_url": "http://127.0.0.1/"}).status_code == 403
    assert staff.get(reverse("admin:llm_provider_add")).status_code == 403
    assert (
        staff.post(reverse("admin:llm_provider_delete", args=[provider.pk]), {"post": "yes"}).status_code
        == 403
    )
    agent = two_tenants["agent_tenant-a"]
    assert (
        staff.post(reverse("admin:tenants_agent_delete", args=[agent.pk]), {"post": "yes"}).status_code == 403
    )
    assert Agent.objects.for_tenant(tenant_a).filter(pk=agent.pk).exists()
    from apps.llm.models import Provider

    assert Provider.objects.for_tenant(tenant_a).get(pk=provider.pk).name == "main"
    assert not AuditEvent.objects.for_tenant(tenant_a).filter(verb__startswith="platform_admin.").exists()


@pytest.mark.parametrize("role", [Role.OWNER, Role.ADMIN, Role.VIEWER])
def test_no_tenant_role_reaches_the_admin(role: str, tenant_a: Tenant, two_tenants: Any) -> None:
    user = factories.make_user(tenant_a, role)
    client = Client()
    client.force_login(user)
    agent = two_tenants["agent_tenant-a"]
    for url in ("/admin/", _changelist(Agent), reverse("admin:tenants_agent_change", args=[agent.pk])):
        response = client.get(url)
        assert (response.status_code, response["Location"].split("?")[0]) == (302, "/admin/login/"), url
    response = client.post(
        reverse("admin:tenants_agent_change", args=[agent.pk]), {"name": "x", "_save": "Save"}
    )
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    assert Agent.objects.for_tenant(tenant_a).get(pk=agent.pk).name == "Helper of tenant-a"


def test_an_api_key_does_not_reach_the_admin(tenant_a: Tenant) -> None:
    raw = factories.make_api_key(tenant_a, Role.OWNER)
    response = Client().get("/admin/", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_the_unscoped_manager_is_named_only_by_the_admin_screens() -> None:
    allowed = {Path("apps/tenants/scoping.py"), Path("apps/tenants/platform_admin.py")}
    users = set()
    for top in ("apps", "config", "bench", "scripts"):
        for path in (REPO / top).rglob("*.py"):
            if "dangerously_unscoped" in path.read_text():
                users.add(path.relative_to(REPO))
    assert Path("apps/tenants/platform_admin.py") in users
    strays = {p for p in users if p not in allowed and p.name != "admin.py"}
    assert strays == set()
