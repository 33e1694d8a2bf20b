"""Stdio MCP servers may not be given env names that make the loader, a shell or an interpreter load or
run code of the registrant's choosing (LD_PRELOAD, NODE_OPTIONS, PYTHONPATH, BASH_FUNC_*, GIT_CONFIG_* …):
refused with a 400 naming the variable and why, at creation and update, through the API (every persona)
and the dashboard, and in users' own credentials; nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.mcp_grants import validation
from apps.mcp_grants.models import MCPServer
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from apps.toolkit.processes import ENV_STRIP_NAMES
from tests import factories
from tests.api.personas import error
from tests.api.tenant_state import tenant_state
from tests.dashboard.personas import login
from tests.mcp.support import make_server

pytestmark = pytest.mark.django_db

SERVERS = "/api/v1/mcp/servers/"

REFUSED = [
    ("LD_PRELOAD", "dynamic loader"),
    ("LD_LIBRARY_PATH", "dynamic loader"),
    ("LD_AUDIT", "dynamic loader"),
    ("LD_BIND_NOW", "dynamic loader"),
    ("ld_preload", "dynamic loader"),
    ("DYLD_INSERT_LIBRARIES", "dynamic loader"),
    ("GCONV_PATH", "dynamic loader"),
    ("NODE_OPTIONS", "interpreter"),
    ("NODE_PATH", "interpreter"),
    ("PYTHONPATH", "interpreter"),
    ("PYTHONSTARTUP", "interpreter"),
    ("PYTHONHOME", "interpreter"),
    ("PYTHONINSPECT", "interpreter"),
    ("PYTHONWARNINGS", "interpreter"),
    ("PERL5OPT", "interpreter"),
    ("PERL5LIB", "interpreter"),
    ("RUBYOPT", "interpreter"),
    ("RUBYLIB", "interpreter"),
    ("JAVA_TOOL_OPTIONS", "interpreter"),
    ("_JAVA_OPTIONS", "interpreter"),
    ("DOTNET_STARTUP_HOOKS", "interpreter"),
    ("PHPRC", "interpreter"),
    ("BASH_ENV", "shell"),
    ("ENV", "shell"),
    ("IFS", "shell"),
    ("BASH_FUNC_ls", "shell"),
    ("GIT_CONFIG_COUNT", "git"),
    ("GIT_CONFIG_KEY_0", "git"),
    ("GIT_CONFIG_GLOBAL", "git"),
    ("GIT_SSH_COMMAND", "git"),
    ("NPM_CONFIG_NODE_OPTIONS", "package runner"),
    ("GOFLAGS", "package runner"),
    ("RUSTC_WRAPPER", "package runner"),
    ("HOSTALIASES", "host name lookups"),
    ("PATH", "which program runs"),
]
ALLOWED = {
    "GITHUB_TOKEN": "ghp-token",
    "NODE_ENV": "production",
    "API_KEY": "k",
    "PATH": "env:PATH",
    "HOME": "env:HOME",
    "LOG_LEVEL": "debug",
}


def stdio(**env: str) -> dict[str, Any]:
    return {"transport": "stdio", "command": "npx", "args": ["-y", "some-mcp-server"], "env": env}


# --- the rule --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "why"), REFUSED, ids=[n for n, _ in REFUSED])
def test_each_injection_variable_is_refused_naming_it_and_why(name, why):
    [message] = validation.check_server(stdio(**{name: "/tmp/x.so"}))["env"]
    assert message.startswith(f"{name} is not allowed: it ")
    assert why in message


def test_every_name_the_exec_tool_strips_is_refused_too():
    for name in ENV_STRIP_NAMES:
        assert validation.env_name_refusal(name, "x") is not None, name


def test_harmless_names_and_credentials_are_accepted():
    assert validation.check_server(stdio(**ALLOWED)) == {}


def test_every_refused_name_is_reported_at_once():
    errors = validation.check_server(stdio(LD_PRELOAD="a", NODE_OPTIONS="b", TOKEN="ok"))["env"]
    assert [e.split(" ", 1)[0] for e in errors] == ["LD_PRELOAD", "NODE_OPTIONS"]


# --- through the API ---------------------------------------------------------------------------------


@pytest.mark.parametrize("persona", ["admin_a", "owner_a"])
def test_registration_with_an_injection_variable_is_400_and_stores_nothing(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    before = tenant_state(tenant_a)

    response = client.post(SERVERS, {"name": "evil", **stdio(LD_PRELOAD="/tmp/x.so")}, format="json")

    refused = error(response, 400, "invalid")
    assert refused["message"].startswith("env: LD_PRELOAD is not allowed: it makes the dynamic loader")
    assert refused["details"]["env"] == [
        "LD_PRELOAD is not allowed: it makes the dynamic loader load a library of its choosing into the "
        "server's processes."
    ]
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize("persona", ["viewer_a", "member_a"])
def test_below_admin_the_answer_is_403_whatever_the_env(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    before = tenant_state(tenant_a)

    response = client.post(SERVERS, {"name": "evil", **stdio(NODE_OPTIONS="--require x")}, format="json")

    error(response, 403, "permission_denied")
    assert tenant_state(tenant_a) == before


def test_an_update_adding_an_injection_variable_is_400_and_changes_nothing(admin_a, tenant_a):
    make_server(tenant_a, "local", [], env={"TOKEN": "t0k3n-value"})
    before = tenant_state(tenant_a)

    response = admin_a.patch(SERVERS + "local/", {"env": {"TOKEN": "x", "PYTHONPATH": "/w"}}, format="json")

    refused = error(response, 400, "invalid")
    assert refused["details"]["env"] == [
        "PYTHONPATH is not allowed: it makes an interpreter load or run code of its choosing (options, "
        "start-up files, module paths)."
    ]
    assert tenant_state(tenant_a) == before
    assert (
        admin_a.patch(SERVERS + "local/", {"env": {"TOKEN": "x", **ALLOWED}}, format="json").status_code
        == 200
    )


def test_another_tenants_server_is_404_with_nothing_changed(outsider, tenant_a):
    make_server(tenant_a, "local", [])
    before = tenant_state(tenant_a)

    response = outsider.patch(SERVERS + "local/", {"env": {"LD_PRELOAD": "/tmp/x.so"}}, format="json")

    error(response, 404, "not_found")
    assert tenant_state(tenant_a) == before


def test_a_users_own_env_is_held_to_the_same_rule(admin_a, tenant_a):
    make_server(tenant_a, "local", [])
    before = tenant_state(tenant_a)

    response = admin_a.put(SERVERS + "local/credentials/u1/", {"env": {"BASH_ENV": "/w/rc"}}, format="json")

    refused = error(response, 400, "invalid")
    assert refused["details"]["env"] == [
        "BASH_ENV is not allowed: it changes what a shell started by the server runs."
    ]
    assert tenant_state(tenant_a) == before


# --- through the dashboard ----------------------------------------------------------------------------


@pytest.fixture
def admin(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.ADMIN, email="admin@a.test"))


def server_form(**fields: Any) -> dict[str, Any]:
    return {
        "transport": "stdio",
        "command": "npx",
        "args": "",
        "timeout_sec": "60",
        "settings": "{}",
        **fields,
    }


def test_the_dashboard_refuses_it_when_adding_and_editing(admin, tenant_a):
    server = make_server(tenant_a, "local", [])
    before = tenant_state(tenant_a)

    created = admin.post(
        reverse("dashboard:mcp_server_create"), server_form(name="evil", env="LD_PRELOAD=/tmp/x.so")
    )
    edited = admin.post(
        reverse("dashboard:mcp_server_edit", args=[server.pk]),
        server_form(env="TOKEN=ok\nGIT_CONFIG_COUNT=1"),
    )

    assert created.status_code == edited.status_code == 200
    assert "LD_PRELOAD is not allowed: it makes the dynamic loader" in created.content.decode()
    assert "GIT_CONFIG_COUNT is not allowed: it makes git run programs" in edited.content.decode()
    assert tenant_state(tenant_a) == before
    assert not MCPServer.objects.for_tenant(tenant_a).filter(name="evil").exists()
