"""The server-rendered dashboard, through the Django test client.

Personas: an owner, an admin and a viewer of tenant A (logged-in users), and tenant B's objects that
tenant A's users must never reach.
"""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, ApiKey, Membership, Tenant
from apps.tenants.roles import Role
from tests import factories

pytestmark = pytest.mark.django_db

RAW_KEY = re.compile(r"tgk_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{43}")


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def audit_count(tenant: Tenant) -> int:
    return AuditEvent.objects.for_tenant(tenant).count()


def make_agent(tenant: Tenant, key: str = "support-bot", **fields) -> Agent:  # type: ignore[no-untyped-def]
    return services.agent_create(actor=Actor.system(tenant), key=key, name=fields.pop("name", key), **fields)


def make_key(tenant: Tenant, name: str = "ci", role: str = Role.MEMBER) -> ApiKey:
    key, _ = services.api_key_create(actor=Actor.system(tenant), name=name, role=role)
    return key


@pytest.fixture
def owner_user(tenant_a: Tenant):  # type: ignore[no-untyped-def]
    return factories.make_user(tenant_a, Role.OWNER, email="owner@a.test")


@pytest.fixture
def owner(owner_user) -> Client:  # type: ignore[no-untyped-def]
    return login(owner_user)


@pytest.fixture
def admin(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.ADMIN))


@pytest.fixture
def viewer(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.VIEWER))


# --- pages render -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url_name", "marker"),
    [
        ("dashboard:home", "Recent activity"),
        ("dashboard:agents", "support-bot"),
        ("dashboard:agent_create", "New agent"),
        ("dashboard:api_keys", "ci-key"),
        ("dashboard:api_key_create", "New API key"),
        ("dashboard:members", "owner@a.test"),
        ("dashboard:member_add", "Add member"),
        ("dashboard:audit", "agent.created"),
    ],
)
def test_each_page_renders_for_an_owner(owner, tenant_a, url_name, marker):
    make_agent(tenant_a)
    make_key(tenant_a, "ci-key")

    response = owner.get(reverse(url_name))

    assert response.status_code == 200
    assert marker in response.content.decode()
    assert 'href="/static/css/dashboard.css"' in response.content.decode()


def test_confirmation_pages_render_and_change_nothing(owner, owner_user, tenant_a):
    agent = make_agent(tenant_a)
    key = make_key(tenant_a)
    membership = Membership.objects.for_tenant(tenant_a).get(user=owner_user)
    before = audit_count(tenant_a)

    pages = [
        (reverse("dashboard:agent_edit", args=[agent.key]), "Edit agent"),
        (reverse("dashboard:agent_delete", args=[agent.key]), "Delete agent support-bot?"),
        (reverse("dashboard:api_key_revoke", args=[key.pk]), "Revoke API key"),
        (reverse("dashboard:member_remove", args=[membership.pk]), "Remove owner@a.test?"),
    ]
    for url, marker in pages:
        response = owner.get(url)
        assert response.status_code == 200, url
        assert marker in response.content.decode()

    assert audit_count(tenant_a) == before
    assert Agent.objects.for_tenant(tenant_a).filter(pk=agent.pk).exists()
    assert ApiKey.objects.for_tenant(tenant_a).get(pk=key.pk).revoked_at is None
    assert Membership.objects.for_tenant(tenant_a).filter(pk=membership.pk).exists()


def test_anonymous_visitors_are_sent_to_login(client):
    response = client.get(reverse("dashboard:agents"))

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/agents/"


def test_login_page_renders_and_logs_in_with_email(client, owner_user):
    page = client.get(reverse("dashboard:login"))
    assert page.status_code == 200
    assert '<label for="id_username">Email</label>' in page.content.decode()

    response = client.post(
        reverse("dashboard:login"), {"username": "owner@a.test", "password": factories.PASSWORD}
    )

    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_login_with_a_wrong_password_shows_an_error(client, owner_user):
    response = client.post(reverse("dashboard:login"), {"username": "owner@a.test", "password": "wrong"})

    assert response.status_code == 200
    assert "Please enter a correct" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_logout_needs_post(owner):
    assert owner.get(reverse("dashboard:logout")).status_code == 405
    assert owner.get(reverse("dashboard:home")).status_code == 200

    response = owner.post(reverse("dashboard:logout"))

    assert response.status_code == 302
    assert owner.get(reverse("dashboard:home")).status_code == 302


def test_a_user_without_membership_sees_a_page_saying_so(tenant_a):
    user = get_user_model().objects.create_user(username="lonely@x.test", email="lonely@x.test")

    response = login(user).get(reverse("dashboard:home"))

    assert response.status_code == 403
    assert "You are not a member of any tenant" in response.content.decode()


def test_viewer_navigation_lists_only_sections_they_may_open(viewer):
    body = viewer.get(reverse("dashboard:home")).content.decode()

    nav = body[body.index('<nav class="sidenav"') : body.index("</nav>")]
    assert re.findall(r">([^<]+)</a>", nav) == [
        "Overview",
        "Agents",
        "Tools",
        "Policy",
        "Runtime settings",
        "Teams",
        "MCP",
        "Custom tools",
        "Credentialed CLIs",
        "Members",
        "Quotas",
    ]
    assert "Recent activity" not in body
    assert 'data-stat="api_keys"' not in body


def test_owner_navigation_marks_the_current_section(owner):
    body = owner.get(reverse("dashboard:agent_create")).content.decode()

    nav = body[body.index('<nav class="sidenav"') : body.index("</nav>")]
    assert re.findall(r">([^<]+)</a>", nav) == [
        "Overview",
        "Agents",
        "Tools",
        "Policy",
        "Runtime settings",
        "Teams",
        "MCP",
        "Custom tools",
        "Credentialed CLIs",
        "Skills",
        "Sandbox",
        "Providers",
        "Channels",
        "Runs",
        "Scheduled jobs",
        "Tool calls",
        "API keys",
        "Members",
        "Quotas",
        "Audit log",
        "Approvals",
    ]
    assert re.findall(r'aria-current="page">([^<]+)<', nav) == ["Agents"]


def test_overview_counts(owner, tenant_a, tenant_b):
    make_agent(tenant_a, "one")
    make_agent(tenant_a, "two")
    make_agent(tenant_b, "other-tenant")
    revoked = make_key(tenant_a, "old")
    services.api_key_revoke(actor=Actor.system(tenant_a), api_key=revoked)
    make_key(tenant_a, "current")

    body = owner.get(reverse("dashboard:home")).content.decode()

    assert re.search(r'data-stat="agents">2<', body)
    assert re.search(r'data-stat="api_keys">1<', body)
    assert re.search(r'data-stat="members">1<', body)


# --- roles: refused requests change nothing ------------------------------------------------------------


@pytest.mark.parametrize("url_name", ["dashboard:api_keys", "dashboard:audit", "dashboard:agent_create"])
def test_viewer_cannot_open_admin_pages(viewer, url_name):
    response = viewer.get(reverse(url_name))

    assert response.status_code == 403
    assert "your role is viewer" in response.content.decode()


def test_viewer_can_read_agents_and_members(viewer, tenant_a):
    make_agent(tenant_a)

    agents = viewer.get(reverse("dashboard:agents"))
    members = viewer.get(reverse("dashboard:members"))

    assert agents.status_code == 200
    assert "support-bot" in agents.content.decode()
    assert reverse("dashboard:agent_edit", args=["support-bot"]) not in agents.content.decode()
    assert members.status_code == 200
    assert "Add member" not in members.content.decode()


def test_viewer_cannot_create_an_agent(viewer, tenant_a):
    before = audit_count(tenant_a)

    response = viewer.post(reverse("dashboard:agent_create"), {"key": "sneaky", "name": "Sneaky"})

    assert response.status_code == 403
    assert not Agent.objects.for_tenant(tenant_a).exists()
    assert audit_count(tenant_a) == before


def test_viewer_cannot_edit_or_delete_an_agent(viewer, tenant_a):
    agent = make_agent(tenant_a, name="Original")
    before = audit_count(tenant_a)

    edit = viewer.post(reverse("dashboard:agent_edit", args=[agent.key]), {"name": "Changed", "type": "open"})
    delete = viewer.post(reverse("dashboard:agent_delete", args=[agent.key]))

    assert edit.status_code == 403
    assert delete.status_code == 403
    assert Agent.objects.for_tenant(tenant_a).get(pk=agent.pk).name == "Original"
    assert audit_count(tenant_a) == before


@pytest.mark.parametrize("persona", ["viewer", "admin"])
def test_only_owners_create_or_revoke_api_keys(request, persona, tenant_a):
    client = request.getfixturevalue(persona)
    key = make_key(tenant_a, "existing")
    before = audit_count(tenant_a)

    create = client.post(reverse("dashboard:api_key_create"), {"name": "new", "role": "viewer"})
    revoke = client.post(reverse("dashboard:api_key_revoke", args=[key.pk]))

    assert create.status_code == 403
    assert revoke.status_code == 403
    assert RAW_KEY.search(create.content.decode()) is None
    assert list(ApiKey.objects.for_tenant(tenant_a).values_list("name", "revoked_at")) == [("existing", None)]
    assert audit_count(tenant_a) == before


def test_admin_cannot_add_change_or_remove_members(admin, owner_user, tenant_a):
    membership = Membership.objects.for_tenant(tenant_a).get(user=owner_user)
    before = audit_count(tenant_a)

    add = admin.post(
        reverse("dashboard:member_add"), {"email": "new@a.test", "role": "owner", "password": "x" * 20}
    )
    role = admin.post(reverse("dashboard:member_role", args=[membership.pk]), {"role": "viewer"})
    remove = admin.post(reverse("dashboard:member_remove", args=[membership.pk]))

    assert (add.status_code, role.status_code, remove.status_code) == (403, 403, 403)
    assert Membership.objects.for_tenant(tenant_a).get(pk=membership.pk).role == Role.OWNER
    assert Membership.objects.for_tenant(tenant_a).count() == 2
    assert not get_user_model().objects.filter(email="new@a.test").exists()
    assert audit_count(tenant_a) == before


# --- another tenant's objects: 404, nothing changed ----------------------------------------------------


def test_another_tenants_agent_is_not_found(owner, tenant_a, tenant_b):
    theirs = make_agent(tenant_b, "their-bot", name="Theirs")
    before_a, before_b = audit_count(tenant_a), audit_count(tenant_b)

    responses = [
        owner.get(reverse("dashboard:agent_edit", args=[theirs.key])),
        owner.post(reverse("dashboard:agent_edit", args=[theirs.key]), {"name": "Mine now", "type": "open"}),
        owner.post(reverse("dashboard:agent_delete", args=[theirs.key])),
    ]

    assert [r.status_code for r in responses] == [404, 404, 404]
    assert Agent.objects.for_tenant(tenant_b).get(pk=theirs.pk).name == "Theirs"
    assert (audit_count(tenant_a), audit_count(tenant_b)) == (before_a, before_b)


def test_another_tenants_api_key_is_not_found(owner, tenant_a, tenant_b):
    theirs = make_key(tenant_b, "their-key")
    before_b = audit_count(tenant_b)

    get = owner.get(reverse("dashboard:api_key_revoke", args=[theirs.pk]))
    post = owner.post(reverse("dashboard:api_key_revoke", args=[theirs.pk]))
    missing = owner.post(reverse("dashboard:api_key_revoke", args=[uuid.uuid4()]))

    assert (get.status_code, post.status_code, missing.status_code) == (404, 404, 404)
    assert ApiKey.objects.for_tenant(tenant_b).get(pk=theirs.pk).revoked_at is None
    assert audit_count(tenant_b) == before_b


def test_another_tenants_member_is_not_found(owner, tenant_b):
    their_owner = factories.make_user(tenant_b, Role.OWNER)
    theirs = Membership.objects.for_tenant(tenant_b).get(user=their_owner)
    before_b = audit_count(tenant_b)

    role = owner.post(reverse("dashboard:member_role", args=[theirs.pk]), {"role": "viewer"})
    remove = owner.post(reverse("dashboard:member_remove", args=[theirs.pk]))

    assert (role.status_code, remove.status_code) == (404, 404)
    assert Membership.objects.for_tenant(tenant_b).get(pk=theirs.pk).role == Role.OWNER
    assert audit_count(tenant_b) == before_b


# --- tenant switcher -----------------------------------------------------------------------------------


def test_switch_to_a_tenant_the_user_belongs_to(tenant_a, tenant_b, owner_user):
    services.membership_create(actor=Actor.system(tenant_b), email="owner@a.test", role=Role.VIEWER)
    client = login(owner_user)
    home = client.get(reverse("dashboard:home")).content.decode()
    assert "Switch tenant" in home
    assert client.session["tenant_id"] == str(tenant_a.pk)

    response = client.post(reverse("dashboard:switch_tenant"), {"tenant_id": str(tenant_b.pk)})

    assert response.status_code == 302
    assert client.session["tenant_id"] == str(tenant_b.pk)
    body = client.get(reverse("dashboard:home")).content.decode()
    assert "you are viewer" in body
    assert client.get(reverse("dashboard:api_keys")).status_code == 403


def test_switch_refuses_a_tenant_the_user_is_not_a_member_of(owner, tenant_a, tenant_b):
    factories.make_user(tenant_b, Role.OWNER)  # tenant B has members, just not this user
    owner.get(reverse("dashboard:home"))
    assert owner.session["tenant_id"] == str(tenant_a.pk)

    foreign = owner.post(reverse("dashboard:switch_tenant"), {"tenant_id": str(tenant_b.pk)})
    garbage = owner.post(reverse("dashboard:switch_tenant"), {"tenant_id": "not-a-uuid"})

    assert (foreign.status_code, garbage.status_code) == (404, 404)
    assert owner.session["tenant_id"] == str(tenant_a.pk)
    assert "Switch tenant" not in owner.get(reverse("dashboard:home")).content.decode()


def test_a_stale_session_tenant_falls_back_to_a_membership(owner, tenant_a, tenant_b):
    session = owner.session
    session["tenant_id"] = str(tenant_b.pk)
    session.save()

    body = owner.get(reverse("dashboard:home")).content.decode()

    assert f"<code>{tenant_a.slug}</code>" in body
    assert owner.session["tenant_id"] == str(tenant_a.pk)


# --- agents --------------------------------------------------------------------------------------------


def test_owner_creates_an_agent_with_settings(owner, tenant_a):
    response = owner.post(
        reverse("dashboard:agent_create"),
        {
            "key": "triage",
            "name": "Triage",
            "description": "Sorts tickets",
            "type": "predefined",
            "provider": "openai",
            "model": "gpt-x",
            "settings": '{"temperature": 0.2}',
        },
    )

    assert response.status_code == 302
    agent = Agent.objects.for_tenant(tenant_a).get(key="triage")
    assert (agent.name, agent.type, agent.provider, agent.model, agent.settings) == (
        "Triage",
        "predefined",
        "openai",
        "gpt-x",
        {"temperature": 0.2},
    )
    assert (
        AuditEvent.objects.for_tenant(tenant_a).filter(verb="agent.created", target_id=str(agent.pk)).exists()
    )


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ("{not json", "Not valid JSON"),
        ("[1, 2]", "Must be a JSON object"),
        ('{"note": "a\\u0000b"}', "NUL character"),
        ('{"k\\u0000": 1}', "NUL character"),
        ('{"t": 1e999}', "send a finite number"),
        ('{"t": NaN}', "send a finite number"),
        ('{"t": 1, "t": 2}', "duplicate key"),
        ('{"a": ' * 100 + "1" + "}" * 100, "nested deeper than 64 levels"),
        ("a\x00b", "Null characters are not allowed"),
    ],
)
def test_bad_settings_json_is_shown_inline(owner, tenant_a, settings, error):
    response = owner.post(
        reverse("dashboard:agent_create"), {"key": "bot", "name": "Bot", "type": "open", "settings": settings}
    )

    assert response.status_code == 200
    body = response.content.decode()
    errors = re.search(r'<ul class="errorlist" id="id_settings_error">(.*?)</ul>', body, re.S)
    assert errors is not None
    assert error in errors.group(1)
    assert not Agent.objects.for_tenant(tenant_a).exists()


def test_a_duplicate_agent_key_is_shown_on_the_key_field(owner, tenant_a):
    make_agent(tenant_a, "bot")

    response = owner.post(reverse("dashboard:agent_create"), {"key": "bot", "name": "Again", "type": "open"})

    assert response.status_code == 200
    assert re.search(r'id="id_key_error">\s*<li>Already in use.</li>', response.content.decode())
    assert Agent.objects.for_tenant(tenant_a).count() == 1


def test_editing_an_agent_keeps_its_key(owner, tenant_a):
    agent = make_agent(tenant_a, "bot", name="Old", settings={"a": 1})

    page = owner.get(reverse("dashboard:agent_edit", args=["bot"])).content.decode()
    assert 'name="key"' not in page
    response = owner.post(
        reverse("dashboard:agent_edit", args=["bot"]),
        {"key": "renamed", "name": "New", "type": "open", "settings": '{"a": 2}'},
    )

    assert response.status_code == 302
    agent.refresh_from_db()
    assert (agent.key, agent.name, agent.settings) == ("bot", "New", {"a": 2})


def test_deleting_an_agent_after_confirmation(owner, tenant_a):
    agent = make_agent(tenant_a)

    response = owner.post(reverse("dashboard:agent_delete", args=[agent.key]))

    assert response.status_code == 302
    assert not Agent.objects.for_tenant(tenant_a).exists()
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="agent.deleted").count() == 1


def test_agent_list_query_count_is_bounded(owner, tenant_a, django_assert_max_num_queries):
    for i in range(15):
        make_agent(tenant_a, f"bot-{i}")

    with django_assert_max_num_queries(8):
        response = owner.get(reverse("dashboard:agents"))

    # edit, delete, context files, memory and knowledge per agent
    assert response.content.decode().count('href="/agents/bot-') == 75


# --- API keys ------------------------------------------------------------------------------------------


def test_the_api_key_secret_is_shown_once(owner, tenant_a):
    response = owner.post(reverse("dashboard:api_key_create"), {"name": "deploy", "role": "admin"})

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    shown = RAW_KEY.findall(response.content.decode())
    assert len(set(shown)) == 1
    raw = shown[0]
    key = ApiKey.objects.for_tenant(tenant_a).get(name="deploy")
    assert raw.startswith(f"tgk_{key.prefix}_")
    assert key.role == Role.ADMIN
    # The secret may itself contain "_": cut it off after the prefix, never split on "_" (a short
    # fragment could appear in any page by chance).
    secret = raw[len(f"tgk_{key.prefix}_") :]
    for url_name in ("dashboard:api_keys", "dashboard:home", "dashboard:audit"):
        body = owner.get(reverse(url_name)).content.decode()
        assert raw not in body, url_name
        assert secret not in body, url_name
    assert owner.get(reverse("dashboard:api_keys")).content.decode().count(f"{key.prefix}…") == 1


def test_a_key_can_be_used_as_bearer_credentials(owner, tenant_a):
    response = owner.post(reverse("dashboard:api_key_create"), {"name": "cli", "role": "viewer"})
    raw = RAW_KEY.search(response.content.decode()).group(0)  # type: ignore[union-attr]

    me = Client().get("/api/v1/me/", HTTP_AUTHORIZATION=f"Bearer {raw}")

    assert me.status_code == 200
    assert me.json()["role"] == "viewer"


def test_api_key_expiry_in_the_past_is_refused_inline(owner, tenant_a):
    response = owner.post(
        reverse("dashboard:api_key_create"),
        {"name": "old", "role": "member", "expires_at": "2001-01-01T00:00"},
    )

    assert response.status_code == 200
    assert re.search(
        r'id="id_expires_at_error">\s*<li>Must be in the future.</li>', response.content.decode()
    )
    assert RAW_KEY.search(response.content.decode()) is None
    assert not ApiKey.objects.for_tenant(tenant_a).exists()


def test_a_duplicate_key_name_is_refused_inline(owner, tenant_a):
    make_key(tenant_a, "ci")

    response = owner.post(reverse("dashboard:api_key_create"), {"name": "CI", "role": "member"})

    assert response.status_code == 200
    assert "Already in use." in response.content.decode()
    assert ApiKey.objects.for_tenant(tenant_a).count() == 1


def test_revoking_a_key(owner, tenant_a):
    key = make_key(tenant_a)

    response = owner.post(reverse("dashboard:api_key_revoke", args=[key.pk]), follow=True)

    assert response.status_code == 200
    key.refresh_from_db()
    assert key.revoked_at is not None
    body = response.content.decode()
    assert "revoked." in body
    assert reverse("dashboard:api_key_revoke", args=[key.pk]) not in body

    again = owner.post(reverse("dashboard:api_key_revoke", args=[key.pk]), follow=True)
    assert "This API key is already revoked." in again.content.decode()


# --- members -------------------------------------------------------------------------------------------


def test_adding_a_new_person_needs_a_password(owner, tenant_a):
    without = owner.post(reverse("dashboard:member_add"), {"email": "New@A.test", "role": "admin"})
    assert without.status_code == 200
    assert re.search(r'id="id_password_error">\s*<li>Required for a new user.</li>', without.content.decode())

    response = owner.post(
        reverse("dashboard:member_add"),
        {"email": "New@A.test", "role": "admin", "password": "another-long-passphrase"},
    )

    assert response.status_code == 302
    membership = Membership.objects.for_tenant(tenant_a).select_related("user").get(user__email="new@a.test")
    assert membership.role == Role.ADMIN
    assert membership.user.check_password("another-long-passphrase")


def test_adding_an_existing_user_by_email(owner, tenant_a, tenant_b):
    factories.make_user(tenant_b, Role.MEMBER, email="known@b.test")

    response = owner.post(reverse("dashboard:member_add"), {"email": "known@b.test", "role": "viewer"})

    assert response.status_code == 302
    assert Membership.objects.for_tenant(tenant_a).get(user__email="known@b.test").role == Role.VIEWER


def test_changing_a_members_role(owner, tenant_a):
    user = factories.make_user(tenant_a, Role.VIEWER)
    membership = Membership.objects.for_tenant(tenant_a).get(user=user)

    response = owner.post(
        reverse("dashboard:member_role", args=[membership.pk]), {"role": "admin"}, follow=True
    )

    assert f"{user.email} is now admin." in response.content.decode()
    assert Membership.objects.for_tenant(tenant_a).get(pk=membership.pk).role == Role.ADMIN


def test_the_last_owner_cannot_be_demoted_or_removed(owner, owner_user, tenant_a):
    membership = Membership.objects.for_tenant(tenant_a).get(user=owner_user)
    before = audit_count(tenant_a)

    demote = owner.post(
        reverse("dashboard:member_role", args=[membership.pk]), {"role": "admin"}, follow=True
    )
    remove = owner.post(reverse("dashboard:member_remove", args=[membership.pk]), follow=True)

    for response in (demote, remove):
        assert response.status_code == 200
        assert "A tenant must keep at least one owner." in response.content.decode()
    assert Membership.objects.for_tenant(tenant_a).get(pk=membership.pk).role == Role.OWNER
    assert audit_count(tenant_a) == before


def test_removing_a_member(owner, tenant_a):
    user = factories.make_user(tenant_a, Role.MEMBER)
    membership = Membership.objects.for_tenant(tenant_a).get(user=user)

    response = owner.post(reverse("dashboard:member_remove", args=[membership.pk]))

    assert response.status_code == 302
    assert not Membership.objects.for_tenant(tenant_a).filter(pk=membership.pk).exists()
    assert get_user_model().objects.filter(pk=user.pk).exists()


# --- audit log -----------------------------------------------------------------------------------------


def test_audit_log_filters(owner, tenant_a, tenant_b):
    agent = make_agent(tenant_a, "bot")
    make_key(tenant_a, "ci")
    make_agent(tenant_b, "their-secret-bot")

    def table(body: str) -> str:  # the filters' suggestions name other verbs
        return body[body.index("<table") :]

    everything = owner.get(reverse("dashboard:audit")).content.decode()
    agents_only = table(owner.get(reverse("dashboard:audit"), {"verb": "agent."}).content.decode())
    by_target = owner.get(
        reverse("dashboard:audit"), {"target_type": "agent", "target_id": str(agent.pk)}
    ).content.decode()
    by_actor = owner.get(reverse("dashboard:audit"), {"actor_kind": "user"}).content.decode()

    assert "api_key.created" in everything
    assert "their-secret-bot" not in everything
    assert "agent.created" in agents_only
    assert "api_key.created" not in agents_only
    assert re.findall(r"<td><code>([^<]+)</code></td>", by_target) == ["agent.created"]
    assert "No audit events match these filters." in by_actor


def test_audit_log_reports_an_invalid_filter(owner, tenant_a):
    make_agent(tenant_a)

    body = owner.get(reverse("dashboard:audit"), {"since": "yesterday-ish"}).content.decode()

    assert re.search(r'id="id_since_error">\s*<li>Enter a valid date/time.</li>', body)
    assert "<tr data-id=" not in body  # never the rows the filter was meant to leave out


def test_audit_log_is_paginated_and_live_only_on_the_first_page(
    owner, tenant_a, django_assert_max_num_queries
):
    for i in range(55):
        make_agent(tenant_a, f"bot-{i:02d}")

    with django_assert_max_num_queries(10):
        first = owner.get(reverse("dashboard:audit"), {"verb": "agent.created"}).content.decode()
    second = owner.get(reverse("dashboard:audit"), {"verb": "agent.created", "page": 2}).content.decode()

    assert first.count("<tr data-id=") == 50
    assert "Page 1 of 2 · 55 events" in first
    assert "?verb=agent.created&amp;page=2" in first
    assert "data-audit-live" in first
    assert "audit-live.js" in first
    assert "live-table.js" in first
    assert second.count("<tr data-id=") == 5
    assert "data-audit-live" not in second
    assert "audit-live.js" not in second
