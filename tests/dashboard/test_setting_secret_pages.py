"""The web search key in the dashboard's settings editors (tenant runtime settings, agent edit): shown as
"set"/"not set", set, replaced and cleared by admins, and never rendered into any page."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, SettingSecret, Tenant
from apps.toolkit.runtime_settings import DEFAULTS, SANDBOX_MODES
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db

KEY = "BSAk3y-dashboard-0123456789"
OTHER = "BSAk3y-replaced-9876543210"
# The key is the form's other part: the sandbox mode stays as a new tenant has it (or the first offered).
DEFAULT_MODE = DEFAULTS["sandbox"]["mode"]
FORM = {
    "sandbox_mode": DEFAULT_MODE if DEFAULT_MODE in SANDBOX_MODES else SANDBOX_MODES[0],
    "tools": json.dumps({"web_search": {"provider": "brave"}}),
}


def tenant_key(tenant: Tenant) -> str | None:
    secret = SettingSecret.objects.for_tenant(tenant).filter(agent=None).first()
    return secret.value if secret is not None else None


def agent_key(agent: Agent) -> str | None:
    secret = SettingSecret.objects.for_tenant(agent.tenant).filter(agent=agent).first()
    return secret.value if secret is not None else None


def pages(client: Client, bot: Agent) -> str:
    """Every page that shows settings or their changes, as ``client`` gets them (refusals included)."""
    urls = ["runtime_settings", "agents", "audit"]
    shown = [client.get(reverse(f"dashboard:{name}")).content.decode() for name in urls]
    shown.append(client.get(reverse("dashboard:agent_edit", args=[bot.key])).content.decode())
    return "".join(shown)


def test_an_admin_sets_replaces_and_clears_the_tenants_key(admin, viewer, tenant_a, bot):
    edit = reverse("dashboard:runtime_settings_edit")
    page = admin.get(reverse("dashboard:runtime_settings")).content.decode()
    assert "Web search API key (not set)" in page

    saved = admin.post(edit, {**FORM, "web_search_api_key": KEY})

    assert saved.status_code == 302, saved.content.decode()
    assert tenant_key(tenant_a) == KEY
    shown = admin.get(reverse("dashboard:runtime_settings")).content.decode()
    assert "Web search API key (set)" in shown
    assert "A web search API key is stored. Leave blank to keep it." in shown
    assert KEY not in shown + pages(admin, bot) + pages(viewer, bot)

    kept = admin.post(edit, {**FORM, "tools": '{"web_search": {"provider": "brave", "count": 3}}'})
    assert kept.status_code == 302
    assert tenant_key(tenant_a) == KEY
    admin.post(edit, {**FORM, "web_search_api_key": OTHER})
    assert tenant_key(tenant_a) == OTHER
    admin.post(edit, {**FORM, "web_search_api_key_clear": "on"})
    assert tenant_key(tenant_a) is None
    assert "Web search API key (not set)" in admin.get(reverse("dashboard:runtime_settings")).content.decode()
    changes = [
        e.data["changes"].get("settings.tools.web_search.api_key")
        for e in AuditEvent.objects.for_tenant(tenant_a).filter(verb="tenant.updated").order_by("created_at")
    ]
    assert [c for c in changes if c] == [{"changed": True, "set": True}] * 2 + [
        {"changed": True, "set": False}
    ]


def test_a_bad_key_is_shown_on_its_field_with_nothing_saved(admin, tenant_a):
    response = admin.post(
        reverse("dashboard:runtime_settings_edit"), {**FORM, "web_search_api_key": "a\tb-key"}
    )

    assert response.status_code == 200
    assert "must not contain control characters" in response.content.decode()
    assert tenant_key(tenant_a) is None


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_below_admin_the_key_cannot_be_set(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    before = tenant_state(tenant_a)

    response = client.post(reverse("dashboard:runtime_settings_edit"), {**FORM, "web_search_api_key": KEY})

    assert response.status_code == 403
    assert tenant_state(tenant_a) == before


def test_an_admin_sets_and_clears_an_agents_key(admin, viewer, tenant_a, bot):
    url = reverse("dashboard:agent_edit", args=[bot.key])
    form = {"name": "Bot", "type": bot.type, "settings": '{"tools": {"web_search": {"provider": "brave"}}}'}
    assert "Web search API key (not set)" in admin.get(url).content.decode()

    saved = admin.post(url, {**form, "web_search_api_key": KEY})

    assert saved.status_code == 302, saved.content.decode()
    assert agent_key(bot) == KEY
    page = admin.get(url).content.decode()
    assert "Web search API key (set)" in page
    assert KEY not in page + pages(admin, bot) + pages(viewer, bot)
    bot.refresh_from_db()
    assert bot.settings == {"tools": {"web_search": {"provider": "brave"}}}

    admin.post(url, {**form, "description": "kept"})
    assert agent_key(bot) == KEY
    admin.post(url, {**form, "web_search_api_key_clear": "on"})
    assert agent_key(bot) is None


def test_another_tenants_agent_is_404_with_nothing_changed(outsider, tenant_a, bot):
    services.agent_update(
        actor=Actor.system(tenant_a),
        agent=bot,
        changes={"settings": {"tools": {"web_search": {"provider": "brave", "api_key": KEY}}}},
    )
    before = tenant_state(tenant_a)

    url = reverse("dashboard:agent_edit", args=[bot.key])
    response = outsider.post(
        url, {"name": "Bot", "type": bot.type, "settings": "{}", "web_search_api_key": OTHER}
    )

    assert response.status_code == 404
    assert KEY not in response.content.decode()
    assert tenant_state(tenant_a) == before
