"""The credentialed CLIs pages through the Django test client: the list, a binary's page, registering
one (blank or from a preset that fills the form), editing, enabling, disabling and deleting it, agent
grants with overrides, users' own credentials, and the test-run page (a fake ``gh`` that prints its
arguments and its environment, credentials included, really runs).

Personas: a viewer and a member of tenant A (read binaries), an admin and an owner (everything), and
tenant B's owner, the outsider, for whom every one of A's binaries, grants and credentials is 404 with
nothing changed. No credential value appears in any page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.secure_cli import services
from apps.secure_cli.models import SecureCLIAgentGrant, SecureCLIBinary, SecureCLIUserCredential
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.tenant_state import tenant_state
from tests.jail_support import programs_visible_in_jail
from tests.secure_cli.support import GRANT_TOKEN, TOKEN, USER_TOKEN, fake_cli

pytestmark = pytest.mark.django_db

TOKENS = (TOKEN, GRANT_TOKEN, USER_TOKEN)


@pytest.fixture
def gh_path(tmp_path: Path, settings: Any) -> Path:
    next(programs_visible_in_jail(settings, tmp_path))  # as an operator lists the CLIs' directory
    return fake_cli(tmp_path / "bin")


def body(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    page = str(response.content.decode())
    for token in TOKENS:
        assert token not in page
    return page


def make_gh(tenant: Tenant, path: Path | None = None, **fields: Any) -> SecureCLIBinary:
    extra = {"binary_path": str(path)} if path is not None else {}
    return services.binary_create(
        actor=Actor.system(tenant), preset="gh", env={"GH_TOKEN": TOKEN}, **extra, **fields
    )


def binary_form(**fields: Any) -> dict[str, Any]:
    data = {
        "binary_name": "mycli",
        "binary_path": "",
        "description": "My CLI",
        "deny_args": "",
        "deny_verbose": "",
        "timeout_seconds": "30",
        "tips": "",
        "is_global": "on",
        "enabled": "on",
    }
    data.update(fields)
    return data


def grant_form(**fields: Any) -> dict[str, Any]:
    data = {"enabled": "on", "deny_args": "", "deny_verbose": "", "timeout_seconds": "", "tips": ""}
    data.update(fields)
    return data


# --- list and detail ---------------------------------------------------------------------------------------


def test_every_role_has_the_section(viewer, admin):
    for client in (viewer, admin):
        page = body(client.get(reverse("dashboard:home")))
        nav = page[page.index('<nav class="sidenav"') : page.index("</nav>")]
        assert reverse("dashboard:secure_clis") in nav


def test_the_list_shows_reach_state_and_credential_names_live_for_admins(admin, tenant_a, tenant_b):
    gh = make_gh(tenant_a)
    services.binary_create(actor=Actor.system(tenant_b), binary_name="b-secret-cli")
    page = body(admin.get(reverse("dashboard:secure_clis")))
    assert f'data-id="{gh.pk}"' in page
    assert "<code>GH_TOKEN</code>" in page
    assert '<td data-field="scope">global</td>' in page
    assert "b-secret-cli" not in page
    for name in ("secure_cli_edit", "secure_cli_enable", "secure_cli_delete", "secure_cli_test"):
        assert reverse(f"dashboard:{name}", args=[gh.pk]) in page
    for preset in ("gh", "gcloud", "aws", "kubectl", "terraform"):
        assert f"{reverse('dashboard:secure_cli_create')}?preset={preset}" in page
    assert "tool-lists-live.js" in page
    assert '"topic": "secure_cli"' in page


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_binaries_are_read_only_below_admin_and_grants_hidden(request, tenant_a, bot, persona):
    client = request.getfixturevalue(persona)
    gh = make_gh(tenant_a)
    services.grant_set(actor=Actor.system(tenant_a), binary=gh, agent=bot, env={"GH_TOKEN": GRANT_TOKEN})
    services.credential_set(
        actor=Actor.system(tenant_a), binary=gh, user_id="ann", env={"GH_TOKEN": USER_TOKEN}
    )
    listing = body(client.get(reverse("dashboard:secure_clis")))
    detail = body(client.get(reverse("dashboard:secure_cli", args=[gh.pk])))
    for page in (listing, detail):
        assert "gh" in page
        for name in ("secure_cli_edit", "secure_cli_enable", "secure_cli_delete", "secure_cli_test"):
            assert reverse(f"dashboard:{name}", args=[gh.pk]) not in page
        assert reverse("dashboard:secure_cli_create") not in page
        assert "tool-lists-live.js" not in page
    assert "Use --json flag for structured output" in detail
    assert "data-cli-grants" not in detail  # grants and credentials are the administrators'
    assert "ann" not in detail


def test_no_credential_is_in_any_page(admin, tenant_a, bot, gh_path):
    gh = make_gh(tenant_a, gh_path)
    system = Actor.system(tenant_a)
    services.grant_set(actor=system, binary=gh, agent=bot, env={"GH_TOKEN": GRANT_TOKEN})
    services.credential_set(actor=system, binary=gh, user_id="ann", env={"GH_TOKEN": USER_TOKEN})
    pk = gh.pk
    urls = [
        reverse("dashboard:secure_clis"),
        reverse("dashboard:secure_cli", args=[pk]),
        reverse("dashboard:secure_cli_edit", args=[pk]),
        reverse("dashboard:secure_cli_test", args=[pk]),
        reverse("dashboard:secure_cli_grant_edit", args=[pk, "bot"]),
        reverse("dashboard:secure_cli_credential_edit", args=[pk, "ann"]),
    ]
    pages = [body(admin.get(url)) for url in urls]
    # each run with the credential it injects typed into an argument: masked in the page
    for user_id, injected in (("", GRANT_TOKEN), ("ann", USER_TOKEN)):
        pages.append(
            body(
                admin.post(
                    reverse("dashboard:secure_cli_test", args=[pk]),
                    {"agent": "bot", "args": f"api user --note={injected}", "user_id": user_id},
                )
            )
        )
        assert 'value="api user --note=[REDACTED]"' in pages[-1]
    assert "Stored now: GH_TOKEN (values hidden); leave empty to keep them." in pages[2]
    assert "Stored now: GH_TOKEN (values hidden); leave empty to keep them." in pages[4]
    assert "Stored now: GH_TOKEN (values hidden); what you enter replaces them." in pages[5]
    assert "value: [REDACTED]" in pages[-1]


# --- registering and editing ----------------------------------------------------------------------------


def test_a_preset_fills_the_form(admin, tenant_a):
    page = body(admin.get(reverse("dashboard:secure_cli_create") + "?preset=aws"))
    assert 'value="aws"' in page
    assert "iam\\s+" in page
    assert "Use --output json for structured output" in page
    assert 'value="60"' in page
    assert (
        "The aws preset uses: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION (optional)."
        in page
    )
    assert admin.get(reverse("dashboard:secure_cli_create") + "?preset=nope").status_code == 404


def test_registering_from_a_preset(admin, tenant_a, gh_path):
    page = body(admin.get(reverse("dashboard:secure_cli_create") + "?preset=gh"))
    assert 'name="preset"' in page
    response = admin.post(
        reverse("dashboard:secure_cli_create"),
        binary_form(
            preset="gh",
            binary_name="gh",
            binary_path=str(gh_path),
            deny_args="auth\\s+\nrepo\\s+delete",
            deny_verbose="--verbose\n-v",
            env=f"GH_TOKEN={TOKEN}",
            tips="Use --json flag for structured output",
            is_global="",
        ),
    )
    gh = SecureCLIBinary.objects.for_tenant(tenant_a).get()
    assert response["Location"] == reverse("dashboard:secure_cli", args=[gh.pk])
    assert (gh.binary_name, gh.preset, gh.is_global) == ("gh", "gh", False)
    assert gh.deny_args == ["auth\\s+", "repo\\s+delete"]
    assert gh.deny_verbose == ["--verbose", "-v"]
    assert gh.env == {"GH_TOKEN": TOKEN}
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="secure_cli.binary.created")
    assert TOKEN not in json.dumps(event.data)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT env_encrypted FROM {SecureCLIBinary._meta.db_table}")  # noqa: S608
        assert TOKEN not in str(cursor.fetchone())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"binary_name": "Bad Name"}, "lower-case letters"),
        ({"binary_name": "bash"}, "a shell or a wrapper"),
        ({"binary_path": "bin/mycli"}, "an absolute path"),
        ({"binary_path": "/nonexistent/mycli"}, "no executable file at this path"),
        ({"deny_args": "(unclosed"}, "is not a valid regular expression"),
        ({"timeout_seconds": "0"}, "greater than or equal to 1"),
        ({"env": "LD_PRELOAD=/x.so"}, "cannot be set"),
        ({"env": "PATH=/tmp"}, "cannot be set"),
        ({"env": "not a pair"}, "Line 1: write one entry a line"),
        ({"preset": "gh", "binary_name": "gh"}, "the gh preset needs GH_TOKEN"),
    ],
)
def test_an_invalid_registration_is_shown_and_nothing_is_saved(admin, tenant_a, fields, message):
    before = tenant_state(tenant_a)
    page = body(admin.post(reverse("dashboard:secure_cli_create"), binary_form(**fields)))
    assert message in page
    assert tenant_state(tenant_a) == before


def test_a_name_in_use_is_refused_and_typed_credentials_are_not_echoed(admin, tenant_a):
    make_gh(tenant_a)
    before = tenant_state(tenant_a)
    page = body(
        admin.post(
            reverse("dashboard:secure_cli_create"), binary_form(binary_name="gh", env=f"GH_TOKEN={TOKEN}")
        )
    )
    assert "is registered already" in page
    assert tenant_state(tenant_a) == before


def test_editing_keeps_replaces_and_clears_the_credentials(admin, tenant_a):
    gh = make_gh(tenant_a)
    url = reverse("dashboard:secure_cli_edit", args=[gh.pk])
    assert 'value="gh"' in body(admin.get(url))
    base = binary_form(binary_name="gh", deny_args="auth\\s+", timeout_seconds="45")
    assert admin.post(url, base).status_code == 302
    gh.refresh_from_db()
    assert (gh.timeout_seconds, gh.deny_args, gh.env) == (45, ["auth\\s+"], {"GH_TOKEN": TOKEN})
    admin.post(url, {**base, "env": "GH_TOKEN=other-token-value-1"})
    gh.refresh_from_db()
    assert gh.env == {"GH_TOKEN": "other-token-value-1"}
    admin.post(url, {**base, "clear_env": "on"})
    gh.refresh_from_db()
    assert gh.env == {}
    before = tenant_state(tenant_a)
    page = body(admin.post(url, {**base, "timeout_seconds": "99999"}))
    assert "less than or equal to 3600" in page
    assert tenant_state(tenant_a) == before


def test_disabling_enabling_and_deleting(owner, tenant_a, bot):
    gh = make_gh(tenant_a)
    services.grant_set(actor=Actor.system(tenant_a), binary=gh, agent=bot)
    enable = reverse("dashboard:secure_cli_enable", args=[gh.pk])
    assert owner.post(enable, {"enabled": "0", "next": "list"})["Location"] == reverse(
        "dashboard:secure_clis"
    )
    gh.refresh_from_db()
    assert gh.enabled is False
    owner.post(enable, {"enabled": "1"})
    gh.refresh_from_db()
    assert gh.enabled is True
    delete = reverse("dashboard:secure_cli_delete", args=[gh.pk])
    before = tenant_state(tenant_a)
    assert "Delete the credentialed CLI gh?" in body(owner.get(delete))
    assert tenant_state(tenant_a) == before
    assert owner.post(delete)["Location"] == reverse("dashboard:secure_clis")
    assert not SecureCLIBinary.objects.for_tenant(tenant_a).exists()
    assert not SecureCLIAgentGrant.objects.for_tenant(tenant_a).exists()


# --- grants and users' credentials ------------------------------------------------------------------------


def test_granting_with_overrides_and_write_only_credentials(admin, tenant_a, bot):
    gh = make_gh(tenant_a, is_global=False)
    create = reverse("dashboard:secure_cli_grant_create", args=[gh.pk])
    assert '<option value="bot">' in body(admin.get(create))
    response = admin.post(
        create,
        grant_form(agent="bot", deny_args="delete", timeout_seconds="12", env=f"GH_TOKEN={GRANT_TOKEN}"),
    )
    assert response.status_code == 302
    grant = SecureCLIAgentGrant.objects.for_tenant(tenant_a).get()
    assert (grant.agent, grant.deny_args, grant.deny_verbose, grant.timeout_seconds, grant.tips) == (
        bot,
        ["delete"],
        None,
        12,
        None,
    )
    assert grant.env == {"GH_TOKEN": GRANT_TOKEN}
    detail = body(admin.get(reverse("dashboard:secure_cli", args=[gh.pk])))
    assert "timeout 12 s" in detail
    assert '<option value="bot">' not in body(admin.get(create))  # granted already

    edit = reverse("dashboard:secure_cli_grant_edit", args=[gh.pk, "bot"])
    admin.post(edit, grant_form(no_tips="on"))
    grant.refresh_from_db()
    assert (grant.deny_args, grant.timeout_seconds, grant.tips) == (None, None, "")
    assert grant.env == {"GH_TOKEN": GRANT_TOKEN}  # left empty: kept
    assert admin.post(edit, grant_form(enabled="", clear_env="on")).status_code == 302
    grant.refresh_from_db()
    assert (grant.enabled, grant.env) == (False, {})

    before = tenant_state(tenant_a)
    page = body(admin.post(edit, grant_form(tips="x", no_tips="on", deny_args="(bad")))
    assert "Write tips or choose no tips, not both." in page
    assert tenant_state(tenant_a) == before
    assert "is not a valid regular expression" in body(admin.post(edit, grant_form(deny_args="(bad")))
    assert tenant_state(tenant_a) == before

    delete = reverse("dashboard:secure_cli_grant_delete", args=[gh.pk, "bot"])
    assert "It no longer reaches this restricted CLI." in body(admin.get(delete))
    admin.post(delete)
    assert not SecureCLIAgentGrant.objects.for_tenant(tenant_a).exists()
    assert admin.get(edit).status_code == 404


def test_users_credentials_are_write_only(admin, tenant_a):
    gh = make_gh(tenant_a)
    create = reverse("dashboard:secure_cli_credential_create", args=[gh.pk])
    before = tenant_state(tenant_a)
    assert "Enter at least one variable" in body(admin.post(create, {"user_id": "ann", "env": ""}))
    assert "cannot be set" in body(admin.post(create, {"user_id": "ann", "env": "HOME=/x"}))
    assert "no user" in body(admin.post(create, {"user_id": "system", "env": "GH_TOKEN=abc"}))
    assert tenant_state(tenant_a) == before
    assert admin.post(create, {"user_id": "ann@a.test", "env": f"GH_TOKEN={USER_TOKEN}"}).status_code == 302
    stored = SecureCLIUserCredential.objects.for_tenant(tenant_a).get()
    assert (stored.user_id, stored.env) == ("ann@a.test", {"GH_TOKEN": USER_TOKEN})
    detail = body(admin.get(reverse("dashboard:secure_cli", args=[gh.pk])))
    assert "ann@a.test" in detail
    edit = reverse("dashboard:secure_cli_credential_edit", args=[gh.pk, "ann@a.test"])
    assert 'name="user_id"' not in body(admin.get(edit))
    admin.post(edit, {"env": "GH_HOST=github.example"})
    stored.refresh_from_db()
    assert stored.env == {"GH_HOST": "github.example"}
    delete = reverse("dashboard:secure_cli_credential_delete", args=[gh.pk, "ann@a.test"])
    assert "Remove ann@a.test" in body(admin.get(delete))
    admin.post(delete)
    assert not SecureCLIUserCredential.objects.for_tenant(tenant_a).exists()
    assert admin.get(edit).status_code == 404
    assert USER_TOKEN not in json.dumps(
        list(AuditEvent.objects.for_tenant(tenant_a).values_list("data", flat=True))
    )


# --- test run ---------------------------------------------------------------------------------------------


def test_a_test_run_shows_the_scrubbed_output_the_masked_command_and_the_decisions(
    admin, tenant_a, bot, gh_path
):
    gh = make_gh(tenant_a, gh_path)
    url = reverse("dashboard:secure_cli_test", args=[gh.pk])
    form = body(admin.get(url))
    assert "data-run-busy" in form
    assert "tool-test-run.js" in form
    page = body(admin.post(url, {"agent": "bot", "args": f'api "x | y" --note={TOKEN}'}))
    assert "succeeded" in page
    assert "gh api &#x27;x | y&#x27; --note=[REDACTED]" in page
    assert "arg=[x | y]" in page
    assert "value: [REDACTED]" in page
    for step in ("lookup", "operators", "path", "deny_args", "deny_verbose", "env", "timeout", "run"):
        assert f"<strong>{step}</strong>" in page
    assert "GH_TOKEN (binary)" in page
    blocked = body(admin.post(url, {"agent": "bot", "args": "repo delete x"}))
    assert "failed or refused" in blocked
    assert 'class="step-refused">refused</span>' in blocked
    verbose = body(admin.post(url, {"agent": "bot", "args": "api -vv"}))
    assert 'class="step-refused">refused</span>' in verbose
    rows = AuditEvent.objects.for_tenant(tenant_a).filter(verb="secure_cli.binary.tested")
    assert rows.count() == 3
    assert TOKEN not in json.dumps(list(rows.values_list("data", flat=True)))


def test_a_test_run_for_an_agent_without_access(admin, tenant_a, bot):
    mycli = services.binary_create(actor=Actor.system(tenant_a), binary_name="mycli", is_global=False)
    page = body(
        admin.post(reverse("dashboard:secure_cli_test", args=[mycli.pk]), {"agent": "bot", "args": ""})
    )
    assert "requires a secure CLI grant" in page


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"agent": "bot", "args": 'api "unclosed'}, "close every quote"),
        ({"agent": "", "args": "api"}, "This field is required"),
        ({"agent": "nobody", "args": "api"}, "Select a valid choice"),
        ({"agent": "bot", "args": "api", "user_id": "system"}, "empty, or a user id"),
    ],
)
def test_invalid_test_input_is_shown_and_nothing_runs(admin, tenant_a, bot, gh_path, data, message):
    gh = make_gh(tenant_a, gh_path)
    before = tenant_state(tenant_a)
    page = body(admin.post(reverse("dashboard:secure_cli_test", args=[gh.pk]), data))
    assert message in page
    assert "data-run-result" not in page
    assert tenant_state(tenant_a) == before


# --- roles and tenants ------------------------------------------------------------------------------------


def _routes(tenant: Tenant) -> dict[str, tuple[str, str, dict[str, Any] | None]]:
    """Every credentialed CLI route of the dashboard, with a valid request for it."""
    system = Actor.system(tenant)
    bot = tenant_services.agent_create(actor=system, key="bot", name="Bot")
    tenant_services.agent_create(actor=system, key="bot2", name="Bot 2")
    gh = make_gh(tenant)
    services.grant_set(actor=system, binary=gh, agent=bot)
    services.credential_set(actor=system, binary=gh, user_id="ann", env={"GH_TOKEN": USER_TOKEN})
    b = gh.pk
    return {
        "list": ("get", reverse("dashboard:secure_clis"), None),
        "detail": ("get", reverse("dashboard:secure_cli", args=[b]), None),
        "create": ("post", reverse("dashboard:secure_cli_create"), binary_form(binary_name="newcli")),
        "edit": (
            "post",
            reverse("dashboard:secure_cli_edit", args=[b]),
            binary_form(binary_name="gh", tips="t"),
        ),
        "enable": ("post", reverse("dashboard:secure_cli_enable", args=[b]), {"enabled": "0"}),
        "test": (
            "post",
            reverse("dashboard:secure_cli_test", args=[b]),
            {"agent": "bot", "args": "--version"},
        ),
        "grant_create": (
            "post",
            reverse("dashboard:secure_cli_grant_create", args=[b]),
            grant_form(agent="bot2"),
        ),
        "grant_edit": (
            "post",
            reverse("dashboard:secure_cli_grant_edit", args=[b, "bot"]),
            grant_form(timeout_seconds="5"),
        ),
        "grant_delete": ("post", reverse("dashboard:secure_cli_grant_delete", args=[b, "bot"]), None),
        "credential_create": (
            "post",
            reverse("dashboard:secure_cli_credential_create", args=[b]),
            {"user_id": "cid", "env": "GH_TOKEN=cid-token-1234"},
        ),
        "credential_edit": (
            "post",
            reverse("dashboard:secure_cli_credential_edit", args=[b, "ann"]),
            {"env": "GH_TOKEN=ann-token-5678"},
        ),
        "credential_delete": (
            "post",
            reverse("dashboard:secure_cli_credential_delete", args=[b, "ann"]),
            None,
        ),
        "delete": ("post", reverse("dashboard:secure_cli_delete", args=[b]), None),
    }


READ_ROUTES = {"list", "detail"}


@pytest.mark.parametrize("persona", ["viewer", "member"])
def test_below_admin_every_change_is_refused_and_nothing_changes(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    routes = _routes(tenant_a)
    before = tenant_state(tenant_a)
    for name, (method, url, data) in routes.items():
        if name in READ_ROUTES:
            assert client.get(url).status_code == 200, name
            continue
        assert getattr(client, method)(url, data).status_code == 403, name
        assert client.get(url).status_code in {403, 405}, name
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize("persona", ["admin", "owner"])
def test_admins_and_owners_can_do_everything(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    routes = _routes(tenant_a)
    for name, (method, url, data) in routes.items():  # the binary's deletion comes last
        status = getattr(client, method)(url, data).status_code
        assert status in (200, 302), (name, status)
    assert SecureCLIBinary.objects.for_tenant(tenant_a).filter(binary_name="newcli").exists()
    assert not SecureCLIBinary.objects.for_tenant(tenant_a).filter(binary_name="gh").exists()
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="secure_cli.binary.tested").count() == 1
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="secure_cli.grant.created").count() == 2


def test_another_tenants_binaries_are_not_found_and_nothing_changes(outsider, tenant_a, tenant_b):
    routes = _routes(tenant_a)
    before = tenant_state(tenant_a)
    before_b = tenant_state(tenant_b)
    for name, (method, url, data) in routes.items():
        if name in {"list", "create"}:
            continue  # the outsider's own tenant's pages
        for verb in {method, "get"}:
            response = getattr(outsider, verb)(url, data if verb == method else None)
            expected = {404, 405} if verb == "get" and name == "enable" else {404}
            assert response.status_code in expected, (name, verb)
    assert "No credentialed CLIs yet." in body(outsider.get(reverse("dashboard:secure_clis")))
    assert tenant_state(tenant_a) == before
    assert tenant_state(tenant_b) == before_b


def test_the_pages_query_counts_are_bounded(admin, tenant_a, django_assert_max_num_queries):
    system = Actor.system(tenant_a)
    for i in range(6):
        services.binary_create(actor=system, binary_name=f"cli{i}", env={"TOKEN": f"value-{i}-abcdef"})
    gh = make_gh(tenant_a)
    for i in range(5):
        agent = tenant_services.agent_create(actor=system, key=f"a{i}", name=f"A{i}")
        services.grant_set(actor=system, binary=gh, agent=agent)
        services.credential_set(actor=system, binary=gh, user_id=f"u{i}", env={"GH_TOKEN": "x-token-1234"})
    with django_assert_max_num_queries(8):
        assert admin.get(reverse("dashboard:secure_clis")).status_code == 200
    with django_assert_max_num_queries(10):
        assert admin.get(reverse("dashboard:secure_cli", args=[gh.pk])).status_code == 200
