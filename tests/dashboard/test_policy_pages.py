"""The policy editor pages of the dashboard, through the Django test client: the tenant, agent and
channel-group policies, the live explain endpoint, version history, rollback, and the refusal of a save
made on a stale version.

Personas: an owner, admin, member and viewer of tenant A (logged-in users), and tenant B's owner as the
outsider, who gets 404 for A's objects with nothing changed.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.policy import services as policy_services
from apps.policy.models import PolicyDocument, PolicyVersion
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db

PERSONAS = ["viewer", "member", "admin", "owner"]


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def member(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.MEMBER))


@pytest.fixture
def viewer(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.VIEWER))


@pytest.fixture
def bot(tenant_a: Tenant) -> Agent:
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def save(tenant: Tenant, document: dict[str, Any], *, agent: Agent | None = None, channel: str = "",
         chat_id: str = "", note: str = "") -> PolicyVersion:  # fmt: skip
    scope = "agent" if agent else "channel" if channel else "tenant"
    target = policy_services.target(scope, agent=agent, channel=channel, chat_id=chat_id)
    saved = policy_services.policy_save(Actor.system(tenant), target, document, note=note)
    assert saved.version is not None
    return saved.version


def tenant_document(tenant: Tenant) -> dict[str, Any] | None:
    row = PolicyDocument.objects.for_tenant(tenant).filter(scope="tenant").first()
    return row.document if row is not None else None


def config_version(tenant: Tenant) -> int:
    return Tenant.objects.get(pk=tenant.pk).config_version


def textarea(body: str) -> str:
    match = re.search(r'<textarea name="document"[^>]*>(.*?)</textarea>', body, re.S)
    assert match, body
    return html.unescape(match.group(1)).strip()


def path_errors(body: str) -> list[str]:
    block = re.search(r"<ul class=\"form-errors policy-errors\"[^>]*>(.*?)</ul>", body, re.S)
    if not block:
        return []
    items = re.findall(r"<li>(.*?)</li>", block.group(1), re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", item)) for item in items]


def form_data(document: Any, base: int, note: str = "") -> dict[str, Any]:
    text = document if isinstance(document, str) else json.dumps(document)
    return {"document": text, "base_version": str(base), "note": note}


def explain(client: Client, scope: dict[str, Any], document: Any, **context: Any):  # type: ignore[no-untyped-def]
    text = document if isinstance(document, str) else json.dumps(document)
    return client.post(
        reverse("dashboard:policy_explain"),
        json.dumps({"scope": scope, "document": text, "context": context}),
        content_type="application/json",
    )


# --- pages and roles ----------------------------------------------------------------------------------


def page_urls(tenant: Tenant, agent: Agent) -> list[str]:
    version = save(tenant, {"deny": ["exec"]})
    save(tenant, {"allow": ["read_file"]}, channel="telegram")
    return [
        reverse("dashboard:policy_tenant"),
        reverse("dashboard:policy_tenant_versions"),
        reverse("dashboard:policy_agent", args=[agent.key]),
        reverse("dashboard:policy_agent_versions", args=[agent.key]),
        reverse("dashboard:policy_channels"),
        reverse("dashboard:policy_channel", args=["telegram"]),
        reverse("dashboard:policy_channel_versions", args=["telegram"]),
        reverse("dashboard:policy_version", args=[version.pk]),
    ]


@pytest.mark.parametrize("persona", PERSONAS)
def test_every_page_renders_for_every_role(request, persona, tenant_a, bot):
    client = request.getfixturevalue(persona)
    for url in page_urls(tenant_a, bot):
        response = client.get(url)
        assert response.status_code == 200, (persona, url)
        assert 'href="/static/css/dashboard.css"' in response.content.decode()


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_readers_see_the_document_without_an_editor(request, persona, tenant_a):
    save(tenant_a, {"deny": ["exec"]})
    body = request.getfixturevalue(persona).get(reverse("dashboard:policy_tenant")).content.decode()

    assert "Only admins can change the policy." in body
    document = re.search(r"<pre class=\"mono\" data-policy-document>(.*?)</pre>", body, re.S)
    assert document
    assert json.loads(html.unescape(document.group(1))) == {"deny": ["exec"]}
    assert 'name="document"' not in body
    assert "Save policy" not in body
    assert "Delete policy" not in body
    assert "Version 1" in body


@pytest.mark.parametrize("persona", ["admin", "owner"])
def test_admins_get_the_editor_with_the_reference_and_explain(request, persona, tenant_a, bot):
    save(tenant_a, {"deny": ["exec"]})
    body = request.getfixturevalue(persona).get(reverse("dashboard:policy_tenant")).content.decode()

    assert json.loads(textarea(body)) == {"deny": ["exec"]}
    assert 'name="base_version" value="1"' in body
    assert "<dt>shellDenyGroups</dt>" in body
    assert "<code>browser</code> (there is no browser tool)" in body  # IGNORED keys
    assert "data-explain" in body
    assert "js/policy-editor.js" in body
    config = re.search(r'<script id="policy-editor-config" type="application/json">(.*?)</script>', body)
    assert config
    assert json.loads(config.group(1)) == {
        "url": reverse("dashboard:policy_explain"),
        "scope": {"scope": "tenant", "agent": None, "channel": None, "chat_id": None},
        "base": 1,
    }
    assert '<option value="bot">bot</option>' in body


def test_the_agent_page_takes_only_the_agent_keys(admin, bot):
    body = admin.get(reverse("dashboard:policy_agent", args=["bot"])).content.decode()

    assert "Policy of agent bot" in body
    assert "<dt>execApproval</dt>" in body
    assert "<dt>profile</dt>" not in body
    assert "<code>profile</code> (only the tenant" in body
    assert "No policy yet" in body
    assert textarea(body) == "{}"


def test_navigation_and_agent_pages_link_to_the_policy(viewer, admin, bot):
    home = viewer.get(reverse("dashboard:home")).content.decode()
    agents = viewer.get(reverse("dashboard:agents")).content.decode()
    edit = admin.get(reverse("dashboard:agent_edit", args=["bot"])).content.decode()
    runtime = viewer.get(reverse("dashboard:runtime_settings")).content.decode()

    assert f'<a href="{reverse("dashboard:policy_tenant")}">Policy</a>' in home
    assert f'href="{reverse("dashboard:policy_agent", args=["bot"])}"' in agents
    assert f'href="{reverse("dashboard:policy_agent", args=["bot"])}"' in edit
    assert f'href="{reverse("dashboard:policy_tenant")}"' in runtime
    page = viewer.get(reverse("dashboard:policy_channels")).content.decode()
    nav = page[page.index('<nav class="sidenav"') : page.index("</nav>")]
    assert re.findall(r'aria-current="page">([^<]+)<', nav) == ["Policy"]


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_readers_cannot_change_anything(request, persona, tenant_a, bot):
    client = request.getfixturevalue(persona)
    version = save(tenant_a, {"deny": ["exec"]})
    save(tenant_a, {"deny": ["exec", "cron"]})
    save(tenant_a, {"allow": ["read_file"]}, channel="telegram")
    before = tenant_state(tenant_a)

    responses = [
        client.post(reverse("dashboard:policy_tenant_save"), form_data({}, 2)),
        client.post(reverse("dashboard:policy_agent_save", args=["bot"]), form_data({"deny": ["exec"]}, 0)),
        client.post(reverse("dashboard:policy_channel_save", args=["telegram"]), form_data({}, 1)),
        client.post(reverse("dashboard:policy_tenant_delete")),
        client.post(reverse("dashboard:policy_channel_delete", args=["telegram"])),
        client.post(reverse("dashboard:policy_version_rollback", args=[version.pk])),
        client.get(reverse("dashboard:policy_version_rollback", args=[version.pk])),
        explain(client, {"scope": "tenant"}, {"deny": ["cron"]}),
    ]

    assert [r.status_code for r in responses] == [403] * len(responses)
    assert f"your role is {persona}" in responses[0].content.decode()
    assert tenant_state(tenant_a) == before


def test_the_save_and_explain_urls_take_only_post(admin):
    assert admin.get(reverse("dashboard:policy_tenant_save")).status_code == 405
    assert admin.get(reverse("dashboard:policy_explain")).status_code == 405
    assert admin.post(reverse("dashboard:policy_tenant")).status_code == 405
    assert admin.post(reverse("dashboard:policy_channels")).status_code == 405


def test_anonymous_visitors_are_sent_to_login(client):
    response = client.get(reverse("dashboard:policy_tenant"))
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    assert (
        client.post(reverse("dashboard:policy_explain"), "{}", content_type="application/json").status_code
        == 302
    )


# --- saving -------------------------------------------------------------------------------------------


def test_admin_saves_the_tenant_policy_audited_and_versioned(admin, tenant_a):
    before = config_version(tenant_a)

    response = admin.post(
        reverse("dashboard:policy_tenant_save"), form_data({"deny": ["exec"]}, 0, note="no shell")
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:policy_tenant")
    assert tenant_document(tenant_a) == {"deny": ["exec"]}
    version = PolicyVersion.objects.for_tenant(tenant_a).get()
    assert (version.number, version.note, version.author_kind, version.author_label) == (
        1,
        "no shell",
        "user",
        "admin@a.test",
    )
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="policy.updated")
    assert event.actor_kind == "user"
    assert event.data["changes"] == {"deny": {"added": ["exec"], "removed": []}}
    assert config_version(tenant_a) == before + 1
    page = admin.get(reverse("dashboard:policy_tenant")).content.decode()
    assert "Policy saved as version 1." in page
    assert 'name="base_version" value="1"' in page


def test_a_saved_policy_applies_to_the_next_tool_call(admin, tenant_a, bot, member_a):
    def call() -> dict[str, Any]:
        body = {"agent": "bot", "tool": "datetime", "args": {}}
        return member_a.post("/api/v1/runtime/execute", body, format="json").json()  # type: ignore[no-any-return]

    assert call()["is_error"] is False
    admin.post(reverse("dashboard:policy_agent_save", args=["bot"]), form_data({"deny": ["datetime"]}, 0))
    assert call()["for_llm"] == "tool not allowed by policy: datetime"


def test_an_unchanged_document_makes_no_version(admin, tenant_a):
    save(tenant_a, {"deny": ["exec"]})
    before = (tenant_state(tenant_a), config_version(tenant_a))

    response = admin.post(
        reverse("dashboard:policy_tenant_save"), form_data({"deny": ["exec"]}, 1), follow=True
    )

    assert "Nothing changed: the document is the one in effect." in response.content.decode()
    assert (tenant_state(tenant_a), config_version(tenant_a)) == before


def test_warnings_are_shown_after_saving(admin, tenant_a):
    response = admin.post(
        reverse("dashboard:policy_tenant_save"),
        form_data({"deny": ["exec"], "browser": {"enabled": True}, "allow": ["mcp_nothing__*"]}, 0),
        follow=True,
    )

    body = html.unescape(response.content.decode())
    assert "Policy saved as version 1." in body
    assert "browser is ignored: there is no browser tool." in body
    assert "allow[0]: the pattern 'mcp_nothing__*' matches no tool today." in body
    assert tenant_document(tenant_a) == {"deny": ["exec"], "allow": ["mcp_nothing__*"]}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"deny": ["exce"]}, ["deny[0]: Unknown tool 'exce'; did you mean exec?"]),
        ({"deny": ["bash"]}, ["deny[0]: 'bash' is an alias; policies name tools: use 'exec'."]),
        ({"allow": ["group:fss"]}, ["allow[0]: Unknown group 'group:fss'; did you mean group:fs?"]),
        (
            {"profile": "mini"},
            [
                "profile: Unknown profile 'mini'; use one of full, coding, messaging, minimal; "
                "did you mean minimal?"
            ],
        ),
        (
            {"deny": ["exec", 5], "byProvider": {"openai": {"allow": ["nope"]}}},
            ["deny[1]: Must be a non-empty string.", "byProvider.openai.allow[0]: Unknown tool 'nope'"],
        ),
        (
            {"rate_limit_per_hour": -1},
            ["rate_limit_per_hour: Must be an integer from 0 (no limit) to 1000000."],
        ),
        ({"denny": ["exec"]}, ["denny: Unknown key; did you mean deny?"]),
    ],
)
def test_invalid_documents_are_shown_by_path_and_the_text_is_kept(admin, tenant_a, document, expected):
    save(tenant_a, {"deny": ["cron"]})
    before = tenant_state(tenant_a)
    text = json.dumps(document, indent=1)

    response = admin.post(reverse("dashboard:policy_tenant_save"), form_data(text, 1, note="try"))

    assert response.status_code == 400
    body = response.content.decode()
    errors = path_errors(body)
    assert len(errors) == len(expected), errors
    for message, error in zip(expected, errors, strict=True):
        assert error.startswith(message), (error, message)
    count = len(expected)
    assert f"Not saved: {count} problem{'s' if count > 1 else ''} in the document." in body
    assert textarea(body) == text.strip()
    assert 'name="note" value="try"' in body
    assert 'name="base_version" value="1"' in body
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"deny": ["exec",]}', "Not valid JSON: Expecting value (line 1, column 18)."),
        ('["exec"]', "Must be a JSON object"),
        ("x" * (64 * 1024 + 1), "At most 65536 bytes of JSON."),
    ],
)
def test_malformed_json_is_shown_on_the_field_and_kept(admin, tenant_a, text, message):
    before = tenant_state(tenant_a)

    response = admin.post(reverse("dashboard:policy_tenant_save"), form_data(text, 0))

    assert response.status_code == 400
    body = response.content.decode()
    errors = re.search(r'<ul class="errorlist" id="id_document_error">(.*?)</ul>', body, re.S)
    assert errors
    assert message in html.unescape(errors.group(1))
    assert textarea(body) == text
    assert tenant_state(tenant_a) == before


def test_a_save_on_a_stale_version_is_refused_and_keeps_the_text(admin, tenant_a):
    save(tenant_a, {"deny": ["cron"]})
    opened = admin.get(reverse("dashboard:policy_tenant")).content.decode()
    assert 'name="base_version" value="1"' in opened
    save(tenant_a, {"deny": ["cron", "exec"]}, note="someone else")  # another admin, meanwhile
    before = (tenant_state(tenant_a), config_version(tenant_a))

    response = admin.post(reverse("dashboard:policy_tenant_save"), form_data({"deny": []}, 1))

    assert response.status_code == 409
    body = html.unescape(response.content.decode())
    assert "Not saved: this policy changed since you opened it (now version 2, by system)." in body
    assert "Version 2 (“someone else”) was saved" in body
    assert json.loads(textarea(body)) == {"deny": []}
    assert 'name="base_version" value="1"' in body  # saving again is refused again until reloaded
    assert (tenant_state(tenant_a), config_version(tenant_a)) == before
    assert tenant_document(tenant_a) == {"deny": ["cron", "exec"]}


def test_a_deleted_policy_is_stale_for_an_editor_opened_before(admin, tenant_a):
    save(tenant_a, {"deny": ["cron"]})
    policy_services.policy_delete(Actor.system(tenant_a), policy_services.target("tenant"))

    refused = admin.post(reverse("dashboard:policy_tenant_save"), form_data({"deny": ["exec"]}, 1))
    accepted = admin.post(reverse("dashboard:policy_tenant_save"), form_data({"deny": ["exec"]}, 2))

    assert refused.status_code == 409
    assert accepted.status_code == 302
    assert tenant_document(tenant_a) == {"deny": ["exec"]}
    assert PolicyVersion.objects.for_tenant(tenant_a).order_by("-number").first().number == 3  # type: ignore[union-attr]


def test_a_bad_base_version_is_a_form_error(admin, tenant_a):
    before = tenant_state(tenant_a)
    response = admin.post(reverse("dashboard:policy_tenant_save"), {"document": "{}", "base_version": "x"})
    assert response.status_code == 400
    assert "the version this editor was opened on is missing or malformed" in response.content.decode()
    assert tenant_state(tenant_a) == before


# --- agents and channel groups ------------------------------------------------------------------------


def test_admin_saves_an_agent_policy(admin, tenant_a, bot):
    response = admin.post(
        reverse("dashboard:policy_agent_save", args=["bot"]),
        form_data({"deny": ["exec"], "execApproval": {"security": "deny"}}, 0),
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:policy_agent", args=["bot"])
    row = PolicyDocument.objects.for_tenant(tenant_a).get(scope="agent")
    assert (row.agent_id, row.document) == (bot.pk, {"deny": ["exec"], "execApproval": {"security": "deny"}})
    agent_page = admin.get(reverse("dashboard:agent_edit", args=["bot"])).content.decode()
    assert "security: deny · ask: off" in agent_page


def test_a_tenant_key_in_an_agent_policy_is_refused(admin, tenant_a, bot):
    response = admin.post(
        reverse("dashboard:policy_agent_save", args=["bot"]), form_data({"originDeny": {}}, 0)
    )
    assert response.status_code == 400
    assert path_errors(response.content.decode())[0].startswith("originDeny: Unknown key")
    assert not PolicyDocument.objects.for_tenant(tenant_a).exists()


def test_channel_groups_are_listed_added_and_edited(admin, tenant_a):
    save(tenant_a, {"allow": ["read_file"]}, channel="telegram")
    listed = admin.get(reverse("dashboard:policy_channels")).content.decode()
    assert re.findall(r'<tr data-channel="([^"]+)" data-chat="([^"]*)">', listed) == [("telegram", "")]
    assert "Add a channel-group policy" in listed

    opened = admin.get(reverse("dashboard:policy_channels"), {"channel": "slack", "chat_id": "C42"})
    assert opened.status_code == 302
    assert opened["Location"] == reverse("dashboard:policy_channel", args=["slack"]) + "?chat_id=C42"
    page = admin.get(opened["Location"]).content.decode()
    assert "Policy of channel slack, chat C42" in page
    assert f'action="{reverse("dashboard:policy_channel_save", args=["slack"])}?chat_id=C42"' in page

    saved = admin.post(
        reverse("dashboard:policy_channel_save", args=["slack"]) + "?chat_id=C42",
        form_data({"allow": ["message"]}, 0),
    )
    assert saved.status_code == 302
    assert saved["Location"] == reverse("dashboard:policy_channel", args=["slack"]) + "?chat_id=C42"
    row = PolicyDocument.objects.for_tenant(tenant_a).get(channel="slack")
    assert (row.chat_id, row.document) == ("C42", {"allow": ["message"]})
    listed = admin.get(reverse("dashboard:policy_channels")).content.decode()
    assert re.findall(r'<tr data-channel="([^"]+)" data-chat="([^"]*)">', listed) == [
        ("slack", "C42"),
        ("telegram", ""),
    ]


def test_a_bad_channel_name_is_refused(admin, tenant_a):
    response = admin.get(reverse("dashboard:policy_channels"), {"channel": "   "})
    assert response.status_code == 200
    assert re.search(r'id="id_channel_error">\s*<li>', response.content.decode())
    too_long = admin.get(reverse("dashboard:policy_channel", args=["c" * 101]))
    assert too_long.status_code == 404
    assert not PolicyDocument.objects.for_tenant(tenant_a).exists()


def test_deleting_a_policy_asks_first(admin, tenant_a):
    save(tenant_a, {"allow": ["read_file"]}, channel="telegram")
    url = reverse("dashboard:policy_channel_delete", args=["telegram"])

    confirm = admin.get(url)
    assert confirm.status_code == 200
    assert "Delete the policy of the channel telegram?" in confirm.content.decode()
    assert PolicyDocument.objects.for_tenant(tenant_a).exists()

    done = admin.post(url, follow=True)
    assert done.redirect_chain[-1][0] == reverse("dashboard:policy_channels")
    assert "Policy of the channel telegram deleted (version 2)." in done.content.decode()
    assert not PolicyDocument.objects.for_tenant(tenant_a).exists()
    deletion = PolicyVersion.objects.for_tenant(tenant_a).get(number=2)
    assert (deletion.document, deletion.note) == (None, "deleted")
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="policy.deleted").count() == 1


def test_deleting_a_missing_policy_changes_nothing(admin, tenant_a):
    before = tenant_state(tenant_a)
    response = admin.post(reverse("dashboard:policy_tenant_delete"), follow=True)
    assert "The tenant has no policy." in response.content.decode()
    assert tenant_state(tenant_a) == before


# --- history and rollback -----------------------------------------------------------------------------


def test_history_lists_versions_with_author_time_and_note(viewer, admin, tenant_a):
    save(tenant_a, {"deny": ["cron"]}, note="first")
    admin.post(
        reverse("dashboard:policy_tenant_save"), form_data({"deny": ["cron", "exec"]}, 1, note="second")
    )

    body = viewer.get(reverse("dashboard:policy_tenant_versions")).content.decode()

    assert re.findall(r'<tr data-version="(\d+)">', body) == ["2", "1"]
    second = body[body.index('data-version="2"') : body.index('data-version="1"')]
    assert "admin@a.test" in second
    assert "second" in second
    assert "current" in second
    first = body[body.index('data-version="1"') :]
    assert "first" in first
    assert "system" in first


def test_a_version_shows_its_document_and_diff(viewer, tenant_a):
    save(tenant_a, {"deny": ["cron"], "profile": "coding"})
    second = save(tenant_a, {"deny": ["exec"], "profile": "minimal"})

    body = html.unescape(viewer.get(reverse("dashboard:policy_version", args=[second.pk])).content.decode())

    document = re.search(r"<pre class=\"mono\" data-version-document>(.*?)</pre>", body, re.S)
    assert document
    assert json.loads(document.group(1)) == {"deny": ["exec"], "profile": "minimal"}
    deny = body[body.index('data-path="deny"') :]
    deny = deny[: deny.index("</tr>")]
    assert "\N{MINUS SIGN} cron" in deny
    assert "+ exec" in deny
    profile = body[body.index('data-path="profile"') :]
    assert '"coding"' in profile[: profile.index("</tr>")]
    assert '"minimal"' in profile[: profile.index("</tr>")]
    assert "the current version" in body
    assert "Roll back" not in body  # viewers, and the current version anyway


def test_rollback_asks_then_restores_as_a_new_version(admin, tenant_a):
    first = save(tenant_a, {"deny": ["cron"]})
    save(tenant_a, {"deny": ["exec"]})
    version_page = admin.get(reverse("dashboard:policy_version", args=[first.pk])).content.decode()
    assert reverse("dashboard:policy_version_rollback", args=[first.pk]) in version_page
    before = config_version(tenant_a)

    confirm = admin.get(reverse("dashboard:policy_version_rollback", args=[first.pk]))
    assert "Roll the tenant policy back to version 1?" in confirm.content.decode()
    assert tenant_document(tenant_a) == {"deny": ["exec"]}

    done = admin.post(reverse("dashboard:policy_version_rollback", args=[first.pk]), follow=True)

    assert done.redirect_chain[-1][0] == reverse("dashboard:policy_tenant")
    assert "Rolled back to version 1 (saved as version 3)." in done.content.decode()
    assert tenant_document(tenant_a) == {"deny": ["cron"]}
    latest = PolicyVersion.objects.for_tenant(tenant_a).order_by("-number").first()
    assert latest is not None
    assert (latest.number, latest.note) == (3, "rollback to v1")
    assert config_version(tenant_a) == before + 1
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="policy.updated").count() == 3


def test_rolling_back_to_the_current_document_changes_nothing(admin, tenant_a):
    first = save(tenant_a, {"deny": ["cron"]})
    before = tenant_state(tenant_a)
    done = admin.post(reverse("dashboard:policy_version_rollback", args=[first.pk]), follow=True)
    assert "Nothing changed: version 1 is the policy in effect." in done.content.decode()
    assert tenant_state(tenant_a) == before


def test_a_deleted_agents_version_cannot_be_restored(admin, tenant_a, bot):
    version = save(tenant_a, {"deny": ["exec"]}, agent=bot)
    services.agent_delete(actor=Actor.system(tenant_a), agent=bot)
    before = tenant_state(tenant_a)

    page = admin.get(reverse("dashboard:policy_version", args=[version.pk])).content.decode()
    done = admin.post(reverse("dashboard:policy_version_rollback", args=[version.pk]), follow=True)

    assert "The agent bot no longer exists: this version cannot be restored." in page
    assert "Roll back" not in page
    assert "no longer exists; its policy cannot be restored." in html.unescape(done.content.decode())
    assert tenant_state(tenant_a) == before


# --- live explain -------------------------------------------------------------------------------------


def tool(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in result["tools"] if t["tool"] == name)


def test_explain_shows_what_a_draft_adds_and_removes(admin, tenant_a, bot):
    save(tenant_a, {"deny": ["cron"]})
    before = tenant_state(tenant_a)

    response = explain(admin, {"scope": "tenant"}, '{"deny": ["exec"]}', agent="bot")

    assert response.status_code == 200
    result = response.json()
    assert result["valid"] is True
    assert result["agent"] == "bot"
    assert result["removed"] == ["exec"]
    assert result["added"] == ["cron"]
    assert tool(result, "exec") == {
        "tool": "exec",
        "group": "runtime",
        "allowed": False,
        "decided_by": "deny",
        "trail": [{"step": "deny", "effect": "removed"}],
        "change": "removed",
    }
    assert tool(result, "cron")["allowed"] is True
    assert tool(result, "cron")["change"] == "added"
    assert tool(result, "read_file") == {
        **tool(result, "read_file"),
        "allowed": True,
        "decided_by": "profile",
        "change": "",
    }
    assert "exec" not in result["allowed"]
    assert tenant_state(tenant_a) == before  # nothing saved


def test_explain_uses_the_context(admin, tenant_a, bot):
    draft = {"byProvider": {"openai": {"profile": "minimal"}}}
    plain = explain(admin, {"scope": "tenant"}, draft, agent="bot").json()
    openai = explain(admin, {"scope": "tenant"}, draft, agent="bot", provider="openai").json()
    sub = explain(admin, {"scope": "tenant"}, {}, agent="bot", subagent_depth=1).json()

    assert plain["removed"] == []
    assert openai["allowed"] == ["session_status"]
    assert tool(openai, "exec")["decided_by"] == "provider_profile"
    assert tool(sub, "cron")["decided_by"] == "subagent_deny"
    assert tool(sub, "spawn")["decided_by"] == "leaf_deny"  # depth 1 is the maximum depth
    assert sub["removed"] == []  # the saved policy has the same subagent rules


def test_explain_of_an_agent_or_channel_draft(admin, tenant_a, bot):
    services.agent_create(actor=Actor.system(tenant_a), key="zeta", name="Zeta")

    agent = explain(admin, {"scope": "agent", "agent": "bot"}, {"allow": ["read_file"]}, agent="zeta").json()
    channel = explain(
        admin,
        {"scope": "channel", "channel": "telegram", "chat_id": ""},
        {"allow": ["message"]},
        agent="zeta",
        channel="slack",
    ).json()

    assert agent["agent"] == "bot"  # an agent's draft is explained for that agent
    assert agent["allowed"] == ["read_file"]
    assert tool(agent, "exec")["decided_by"] == "agent_allow"
    assert channel["agent"] == "zeta"
    assert channel["context"]["channel"] == "telegram"  # the draft's own channel
    assert channel["allowed"] == ["message"]
    assert tool(channel, "exec")["decided_by"] == "channel_allow"


def test_explain_reports_an_invalid_draft_by_path(admin, tenant_a, bot):
    bad = explain(admin, {"scope": "tenant"}, {"deny": ["exce"], "profile": 3}).json()
    broken = explain(admin, {"scope": "tenant"}, '{"deny": [').json()

    assert bad["valid"] is False
    assert bad["errors"]["deny[0]"] == ["Unknown tool 'exce'; did you mean exec?"]
    assert "profile" in bad["errors"]
    assert "tools" not in bad
    assert broken == {
        "valid": False,
        "errors": {"document": ["Not valid JSON: Expecting value (line 1, column 11)."]},
        "warnings": [],
        "agent": None,
    }


def test_explain_without_agents_says_so(admin, tenant_a):
    result = explain(admin, {"scope": "tenant"}, {"deny": ["exec"]}).json()
    assert result["valid"] is True
    assert result["agent"] is None
    assert "no agent yet" in result["message"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("not json", "The body must be JSON."),
        ("[]", "The body must be a JSON object."),
        ('{"scope": {"scope": "planet"}, "document": "{}"}', "Unknown scope"),
        ('{"scope": {"scope": "channel", "channel": "a/b"}, "document": "{}"}', "A channel name has"),
        ('{"scope": {"scope": "tenant"}, "document": {"deny": []}}', '"document" must be the draft as text.'),
        (
            '{"scope": {"scope": "tenant"}, "document": "{}", "context": {"subagent_depth": 99}}',
            "subagent_depth",
        ),
        ('{"scope": {"scope": "tenant"}, "document": "{}", "context": {"provider": 5}}', "context.provider"),
    ],
)
def test_explain_refuses_malformed_requests(admin, tenant_a, body, message):
    response = admin.post(reverse("dashboard:policy_explain"), body, content_type="application/json")
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]


def test_explain_refuses_an_oversized_body(admin, tenant_a):
    body = json.dumps({"scope": {"scope": "tenant"}, "document": "x" * (130 * 1024)})
    response = admin.post(reverse("dashboard:policy_explain"), body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "The request may have at most 131072 bytes."


def test_explain_needs_the_csrf_token(tenant_a):
    user = factories.make_user(tenant_a, Role.ADMIN)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post(
        reverse("dashboard:policy_explain"),
        json.dumps({"scope": {"scope": "tenant"}, "document": "{}"}),
        content_type="application/json",
    )
    assert response.status_code == 403


# --- another tenant -----------------------------------------------------------------------------------


def test_another_tenants_objects_are_not_found_and_nothing_changes(outsider, tenant_a, tenant_b, bot):
    version = save(tenant_a, {"deny": ["exec"]}, agent=bot)
    save(tenant_a, {"deny": ["cron"]})
    before_a, before_b = tenant_state(tenant_a), tenant_state(tenant_b)

    responses = [
        outsider.get(reverse("dashboard:policy_agent", args=["bot"])),
        outsider.get(reverse("dashboard:policy_agent_versions", args=["bot"])),
        outsider.post(reverse("dashboard:policy_agent_save", args=["bot"]), form_data({}, 1)),
        outsider.post(reverse("dashboard:policy_agent_delete", args=["bot"])),
        outsider.get(reverse("dashboard:policy_version", args=[version.pk])),
        outsider.get(reverse("dashboard:policy_version_rollback", args=[version.pk])),
        outsider.post(reverse("dashboard:policy_version_rollback", args=[version.pk])),
        explain(outsider, {"scope": "agent", "agent": "bot"}, {}),
    ]

    assert [r.status_code for r in responses] == [404] * len(responses)
    assert tenant_state(tenant_a) == before_a
    assert tenant_state(tenant_b) == before_b


def test_an_outsiders_own_policy_pages_show_only_their_tenant(outsider, tenant_a, tenant_b, bot):
    save(tenant_a, {"deny": ["exec"]}, note="tenant A's secret note")
    save(tenant_a, {"allow": ["read_file"]}, channel="a-only")

    tenant_page = outsider.get(reverse("dashboard:policy_tenant")).content.decode()
    history = outsider.get(reverse("dashboard:policy_tenant_versions")).content.decode()
    channels = outsider.get(reverse("dashboard:policy_channels")).content.decode()
    result = explain(outsider, {"scope": "tenant"}, {"deny": ["cron"]}).json()
    saved = outsider.post(reverse("dashboard:policy_tenant_save"), form_data({"deny": ["cron"]}, 0))

    assert "No policy yet" in tenant_page
    assert json.loads(textarea(tenant_page)) == {}
    assert "secret note" not in history
    assert "a-only" not in channels
    assert result["agent"] is None  # tenant A's agent is not B's
    assert saved.status_code == 302
    assert tenant_document(tenant_b) == {"deny": ["cron"]}
    assert tenant_document(tenant_a) == {"deny": ["exec"]}
