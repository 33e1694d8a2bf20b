"""Who may use Toolgate's MCP endpoint, and what it refuses before the MCP layer: API keys (401),
agents of other tenants (404, the same as a missing one, nothing changed), roles (viewers list, members
call), and hostile input (query parameters, body size, Host and Origin, tool names)."""

from __future__ import annotations

import asyncio
from io import StringIO
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command
from mcp.shared.exceptions import MCPError

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.tenants.actors import Actor
from apps.tenants.models import ApiKey, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api.tenant_state import tenant_state
from tests.mcp.endpoint_client import (
    INITIALIZE,
    call_tool,
    endpoint,
    list_tools,
    post,
    rest,
    rest_tools,
    session,
    text,
)

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "datetime", "arguments": {}}}


@pytest.fixture
def keys(tenant_a: Tenant, tenant_b: Tenant) -> dict[str, str]:
    """Tenant A's agent ``bot`` and a key per role; tenant B's agent ``other`` and its owner's key."""
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    services.agent_create(actor=Actor.system(tenant_b), key="other", name="Other")
    roles = {"viewer": Role.VIEWER, "member": Role.MEMBER, "admin": Role.ADMIN, "owner": Role.OWNER}
    made = {name: factories.make_api_key(tenant_a, role, name=name) for name, role in roles.items()}
    made["outsider"] = factories.make_api_key(tenant_b, Role.OWNER, name="outsider")
    return made


def rpc_error(response: httpx.Response, status: int, code: str) -> str:
    """The JSON-RPC error of a refused request, which must have ``status`` and Toolgate's ``code``."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["data"]["code"] == code
    message: str = body["error"]["message"]
    return message


def both_states(*tenants: Tenant) -> list[dict[str, Any]]:
    return [tenant_state(tenant) for tenant in tenants]


@pytest.mark.parametrize("role", ["viewer", "member", "admin", "owner"])
def test_every_role_of_the_tenant_lists_the_agents_tools(base, keys, role):
    assert list_tools(endpoint(base), keys[role]) == rest_tools(base, keys[role])


@pytest.mark.parametrize("role", ["member", "admin", "owner"])
def test_members_and_up_call_tools(base, tenant_a, keys, role):
    result = call_tool(endpoint(base), keys[role], "datetime", {"timezone": "UTC"})
    assert not result.is_error
    assert "UTC" in text(result)
    assert ToolCall.objects.for_tenant(tenant_a).get().actor_id == str(
        ApiKey.objects.for_tenant(tenant_a).get(name=role).pk
    )


def test_a_viewer_lists_but_cannot_call_and_nothing_runs(base, tenant_a, tenant_b, keys):
    before = both_states(tenant_a, tenant_b)

    async def go() -> None:
        async with session(endpoint(base), keys["viewer"]) as client:
            assert (await client.list_tools()).tools
            with pytest.raises(MCPError) as refused:
                await client.call_tool("write_file", {"path": "x.txt", "content": "x"})
            assert (
                str(refused.value)
                == "Calling tools needs the member role or higher; this API key has the viewer role."
            )
            assert refused.value.data == {"code": "permission_denied"}

    asyncio.run(go())
    assert both_states(tenant_a, tenant_b) == before


def test_without_a_valid_api_key_the_answer_is_401(base, tenant_a, keys):
    url = endpoint(base)
    message = rpc_error(post(url, INITIALIZE), 401, "not_authenticated")
    assert "Authorization: Bearer <api key>" in message
    assert post(url, INITIALIZE).headers["www-authenticate"] == 'Bearer realm="toolgate"'

    basic = post(url, INITIALIZE, headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert rpc_error(basic, 401, "authentication_failed") == "Use 'Authorization: Bearer <api key>'."
    malformed = post(url, INITIALIZE, key="not-a-key")
    assert rpc_error(malformed, 401, "authentication_failed").startswith("Malformed API key")
    scheme, prefix, secret = keys["member"].split("_", 2)
    wrong = post(url, INITIALIZE, key=f"{scheme}_{prefix}_{'x' * len(secret)}")
    assert rpc_error(wrong, 401, "authentication_failed") == "Invalid, revoked or expired API key."

    revoked = ApiKey.objects.for_tenant(tenant_a).get(name="member")
    with rest(base, keys["owner"]) as client:
        assert client.delete(f"/api/v1/api-keys/{revoked.pk}/").status_code == 200
    assert post(url, INITIALIZE, key=keys["member"]).status_code == 401
    assert post(url, CALL, key=keys["member"]).status_code == 401
    assert not ToolCall.objects.for_tenant(tenant_a).exists()


def test_the_sdk_client_is_told_why_it_cannot_connect(base, keys):
    async def go(key: str | None, agent: str = "bot") -> None:
        async with session(endpoint(base, agent=agent), key):
            pass

    def error_of(key: str | None, agent: str = "bot") -> MCPError:
        with pytest.raises(BaseExceptionGroup) as failed:  # raised out of the client's task groups
            asyncio.run(go(key, agent))
        found = failed.value.subgroup(lambda exc: isinstance(exc, MCPError))
        assert found is not None, failed.value
        while isinstance(found, BaseExceptionGroup):
            found = found.exceptions[0]
        assert isinstance(found, MCPError)
        return found

    missing = error_of(None)
    assert (
        str(missing) == "Authentication credentials were not provided: use 'Authorization: Bearer <api key>'."
    )
    assert missing.data == {"code": "not_authenticated", "details": {}}
    assert error_of(keys["outsider"]).data == {"code": "not_found", "details": {}}
    assert str(error_of(keys["member"], agent="other")) == "No agent with this key."


def test_another_tenants_agent_answers_404_like_a_missing_one_and_nothing_changes(
    base, tenant_a, tenant_b, keys
):
    before = both_states(tenant_a, tenant_b)
    missing = post(endpoint(base, agent="nobody"), CALL, key=keys["owner"])
    theirs = post(endpoint(base, agent="other"), CALL, key=keys["owner"])
    assert (
        rpc_error(theirs, 404, "not_found")
        == rpc_error(missing, 404, "not_found")
        == "No agent with this key."
    )
    assert theirs.content == missing.content

    outsider = post(endpoint(base), CALL, key=keys["outsider"])
    assert rpc_error(outsider, 404, "not_found") == "No agent with this key."
    assert tenant_a.slug not in outsider.text
    assert post(endpoint(base), INITIALIZE, key=keys["outsider"]).status_code == 404
    assert both_states(tenant_a, tenant_b) == before


def test_the_call_scope_in_the_query_string_is_validated(base, tenant_a, keys):
    key = keys["member"]
    unknown = post(endpoint(base, query="user_id=u1&verbose=1"), INITIALIZE, key=key)
    assert rpc_error(unknown, 400, "invalid") == "Invalid query parameter verbose: Unknown field."
    deep = post(endpoint(base, query="subagent_depth=9"), INITIALIZE, key=key)
    assert "subagent_depth" in rpc_error(deep, 400, "invalid")
    assert rpc_error(deep, 400, "invalid") == deep.json()["error"]["message"]
    assert deep.json()["error"]["data"]["details"] == {
        "subagent_depth": ["Ensure this value is less than or equal to 5."]
    }
    style = post(endpoint(base, query="style=fancy"), INITIALIZE, key=key)
    assert "style" in rpc_error(style, 400, "invalid")
    long_allow = post(endpoint(base, query="tool_allow=" + "a," * 6000), INITIALIZE, key=key)
    assert rpc_error(long_allow, 400, "invalid")
    assert post(endpoint(base, query="session_key=" + "s" * 201), CALL, key=key).status_code == 400
    many = post(endpoint(base, query="a&" * 1500), CALL, key=key)
    assert rpc_error(many, 400, "invalid") == "The query string has too many parameters."
    longest = post(endpoint(base, query="user_id=" + "u" * 13000), CALL, key=key)
    assert rpc_error(longest, 400, "invalid") == "The query string is longer than 12288 characters."
    assert not ToolCall.objects.for_tenant(tenant_a).exists()


def test_bodies_over_the_limit_are_refused_before_they_are_read(base, tenant_a, keys):
    huge = {
        **CALL,
        "params": {"name": "datetime", "arguments": {"pad": "x" * settings.MAX_REQUEST_BODY_BYTES}},
    }
    response = post(endpoint(base), huge, key=keys["member"])
    assert response.status_code == 413
    assert not ToolCall.objects.for_tenant(tenant_a).exists()


def test_host_and_origin_are_checked_against_the_served_hosts(base, keys):
    key = keys["member"]
    url = endpoint(base)
    assert post(url, INITIALIZE, key=key, headers={"Host": "evil.example"}).status_code == 421
    assert post(url, INITIALIZE, key=key, headers={"Origin": "http://evil.example"}).status_code == 403
    local = post(url, INITIALIZE, key=key, headers={"Origin": "http://localhost:3000"})
    assert local.status_code == 200, local.text
    assert post(url, INITIALIZE, key=key, headers={"Content-Type": "text/plain"}).status_code == 400


def test_hostile_tool_calls_are_bounded(base, tenant_a, keys):
    async def go() -> None:
        async with session(endpoint(base), keys["member"]) as client:
            with pytest.raises(MCPError) as long_name:
                await client.call_tool("x" * 201, {})
            assert str(long_name.value) == "Tool name is longer than 200 characters."
            nested = await client.call_tool("datetime", {"timezone": {"deep": [[[["UTC"]]]]}})
            assert nested.is_error
            assert text(nested).startswith("Invalid arguments for datetime")

    asyncio.run(go())
    assert list(ToolCall.objects.for_tenant(tenant_a).values_list("decision", flat=True)) == ["invalid"]


def test_each_response_carries_a_request_id_that_the_tool_call_keeps(base, tenant_a, keys):
    response = post(endpoint(base), CALL, key=keys["member"], headers={"X-Request-ID": "mcp-trace-0001"})
    assert response.status_code == 200, response.text
    assert response.headers["x-request-id"] == "mcp-trace-0001"
    assert ToolCall.objects.for_tenant(tenant_a).get().request_id == "mcp-trace-0001"


def test_post_and_the_update_stream_are_served_after_authentication(base, keys):
    url = endpoint(base)
    with httpx.Client(timeout=30) as client:
        anonymous = client.get(url, headers={"Accept": "text/event-stream"})
        assert rpc_error(anonymous, 401, "not_authenticated")
        authorized = {"Authorization": f"Bearer {keys['member']}"}
        for method, accept in (("GET", "application/json"), ("DELETE", "text/event-stream"), ("PUT", "*/*")):
            response = client.request(method, url, headers={"Accept": accept, **authorized})
            assert rpc_error(response, 405, "method_not_allowed").startswith(
                "Only POST, and GET of the update stream (Accept: text/event-stream), are served"
            )
            assert response.headers["allow"] == "GET, POST"
        # GET with an SSE Accept is the key's update stream (resource subscriptions): it opens.
        with client.stream("GET", url, headers={"Accept": "text/event-stream", **authorized}) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"] == "text/event-stream"
            assert next(stream.iter_lines()) == ": updates"


def test_the_tenants_request_quota_counts_mcp_requests_like_rest_ones(base, tenant_a, keys):
    call_command("set_quota", "tenant-a", "api_requests_per_minute", "3", stdout=StringIO())
    url = endpoint(base)

    assert [post(url, INITIALIZE, key=keys["member"]).status_code for _ in range(3)] == [200, 200, 200]
    refused = post(url, CALL, key=keys["member"])

    message = rpc_error(refused, 429, "quota_exceeded")
    assert "api_requests_per_minute" in message
    assert refused.json()["error"]["data"]["details"]["quota"] == "api_requests_per_minute"
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert not ToolCall.objects.for_tenant(tenant_a).exists()  # nothing ran
    with rest(base, keys["viewer"]) as client:  # one count for the tenant, whatever the door
        assert client.get("/api/v1/me/").status_code == 429
    assert post(endpoint(base, "other"), INITIALIZE, key=keys["outsider"]).status_code == 200
