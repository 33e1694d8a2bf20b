"""What a policy document may hold per scope (``documents.check``) and how two of them differ
(``documents.diff``)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.policy.documents import MAX_DOCUMENT_BYTES, PolicyInvalid, check, diff
from apps.policy.universe import Universe
from apps.tools.catalog import CATALOG, GROUPS

MCP_TOOLS = ("mcp_github__create_issue", "mcp_github__list_repos")
UNIVERSE = Universe(
    names=tuple(sorted({*CATALOG, *MCP_TOOLS})),
    groups={
        **{k: frozenset(v) for k, v in GROUPS.items()},
        "mcp": frozenset(MCP_TOOLS),
        "mcp:github": frozenset(MCP_TOOLS),
    },
)


def _errors(scope: str, document: Any) -> dict[str, list[str]]:
    with pytest.raises(PolicyInvalid) as caught:
        check(scope, document, UNIVERSE)
    return caught.value.errors


# --- every key, as stored ----------------------------------------------------------------------------------


def test_a_full_tenant_document_is_stored_as_given():
    document = {
        "profile": "coding",
        "allow": ["group:toolgate", "mcp_github__*"],
        "deny": ["exec", "group:web"],
        "alsoAllow": ["datetime"],
        "byProvider": {
            "openai": {"profile": "minimal", "allow": ["read_file"]},
            "anthropic": {"profile": "full"},
        },
        "shellDenyGroups": {"package_install": False, "network_recon": True},
        "execApproval": {"security": "allowlist", "ask": "on-miss", "allowlist": ["git *", "ls"]},
        "rate_limit_per_hour": 0,
        "scrub_credentials": False,
        "originDeny": {"comm": ["exec"], "skill": ["group:fs"]},
    }
    checked = check("tenant", document, UNIVERSE)
    assert checked.document == document
    assert checked.warnings == []


def test_an_agent_document_takes_the_agent_keys():
    document = {
        "allow": ["group:fs"],
        "deny": ["write_file"],
        "alsoAllow": ["group:mcp:github"],
        "byProvider": {"openai": {"allow": ["read_file"]}},
        "shellDenyGroups": {"destructive_ops": True},
        "execApproval": {"security": "deny"},
    }
    assert check("agent", document, UNIVERSE).document == document


def test_a_channel_document_takes_only_allow():
    assert check("channel", {"allow": ["group:messaging"]}, UNIVERSE).document == {
        "allow": ["group:messaging"]
    }
    assert _errors("channel", {"deny": ["exec"], "profile": "full"}) == {
        "deny": ["Unknown key; a channel policy takes allow."],
        "profile": ["Unknown key; a channel policy takes allow."],
    }


def test_the_empty_document_is_valid_everywhere():
    for scope in ("tenant", "agent", "channel"):
        assert check(scope, {}, UNIVERSE).document == {}


def test_names_are_deduplicated_in_order():
    checked = check("tenant", {"deny": ["tts", "exec", "tts", "group:fs", "group:fs"]}, UNIVERSE)
    assert checked.document == {"deny": ["tts", "exec", "group:fs"]}


# --- keys of other scopes and keys GoClaw has but the engine does not use ----------------------------------


def test_unknown_keys_name_the_scope_and_suggest():
    assert _errors("tenant", {"alow": []}) == {
        "alow": [
            "Unknown key; did you mean allow, alsoAllow?; a tenant policy takes profile, allow, deny, "
            "alsoAllow, byProvider, shellDenyGroups, execApproval, rate_limit_per_hour, scrub_credentials, "
            "originDeny."
        ]
    }
    agent_keys = "allow, deny, alsoAllow, byProvider, shellDenyGroups, execApproval"
    assert _errors("agent", {"originDeny": {}, "rate_limit_per_hour": 5}) == {
        "originDeny": [f"Unknown key; an agent policy takes {agent_keys}."],
        "rate_limit_per_hour": [f"Unknown key; an agent policy takes {agent_keys}."],
    }


@pytest.mark.parametrize(
    ("scope", "key", "reason"),
    [
        ("tenant", "commandKeywordAllowlist", "Toolgate classifies commands itself"),
        ("tenant", "web_fetch", "web_fetch domain lists are not part of the tool policy"),
        ("tenant", "browser", "there is no browser tool"),
        ("tenant", "mcp_servers", "/api/v1/mcp/servers"),
        ("agent", "profile", "only the tenant's profile"),
        ("agent", "wait", "not a policy setting"),
        ("agent", "toolCallPrefix", "not a policy setting"),
        ("agent", "toolPrefix", "not a policy setting"),
    ],
)
def test_ignored_goclaw_keys_are_left_out_with_a_warning(scope, key, reason):
    checked = check(scope, {key: {"anything": 1}, "allow": ["exec"]}, UNIVERSE)
    assert checked.document == {"allow": ["exec"]}
    assert len(checked.warnings) == 1
    assert checked.warnings[0].startswith(f"{key} is ignored: ")
    assert reason in checked.warnings[0]


# --- names -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "path", "message"),
    [
        ("exec", "allow", "Must be a list of tool names, group:<name> references or * patterns."),
        ({"exec": True}, "allow", "Must be a list of tool names"),
        (["exec"] * 1001, "allow", "At most 1000 entries."),
        ([7], "allow[0]", "Must be a non-empty string."),
        (["  "], "allow[0]", "Must be a non-empty string."),
        (["read file"], "allow[0]", "Must be at most 200 printable characters without spaces."),
        (["exec\x00"], "allow[0]", "Must be at most 200 printable characters without spaces."),
        (["x" * 201], "allow[0]", "Must be at most 200 printable characters without spaces."),
        (["group:fss"], "allow[0]", "Unknown group 'group:fss'; did you mean group:fs?"),
        (["group:nothing_like_it"], "allow[0]", "Unknown group 'group:nothing_like_it'"),
        (["web_fetc"], "allow[0]", "Unknown tool 'web_fetc'; did you mean web_fetch, web_search?"),
        (["bash"], "allow[0]", "'bash' is an alias; policies name tools: use 'exec'."),
        (["Bash"], "allow[0]", "'Bash' is an alias; policies name tools: use 'exec'."),
        (["WebFetch"], "allow[0]", "'WebFetch' is an alias; policies name tools: use 'web_fetch'."),
        (["sessions_spawn"], "allow[0]", "'sessions_spawn' is an alias; policies name tools: use 'spawn'."),
        (["Exec"], "allow[0]", "Unknown tool 'Exec'; did you mean exec"),
    ],
)
def test_bad_names(value, path, message):
    errors = _errors("tenant", {"allow": value})
    assert list(errors) == [path]
    assert errors[path][0].startswith(message)


def test_every_bad_name_is_reported_with_its_path():
    errors = _errors("tenant", {"allow": ["exec", "nope", "bash"], "deny": ["group:x"], "alsoAllow": [""]})
    assert list(errors) == ["allow[1]", "allow[2]", "deny[0]", "alsoAllow[0]"]


def test_groups_aliases_and_dynamic_groups():
    checked = check(
        "tenant", {"allow": ["group:goclaw", "group:toolgate", "group:mcp", "group:mcp:github"]}, UNIVERSE
    )
    assert checked.document["allow"] == ["group:goclaw", "group:toolgate", "group:mcp", "group:mcp:github"]
    assert checked.warnings == []


def test_patterns_are_kept_and_warn_only_when_they_match_nothing():
    checked = check(
        "tenant", {"allow": ["mcp_github__*", "read_*"], "deny": ["mcp_slack__*", "Read_*"]}, UNIVERSE
    )
    assert checked.document == {"allow": ["mcp_github__*", "read_*"], "deny": ["mcp_slack__*", "Read_*"]}
    assert checked.warnings == [
        "deny[0]: the pattern 'mcp_slack__*' matches no tool today.",
        "deny[1]: the pattern 'Read_*' matches no tool today.",
    ]


def test_a_pattern_only_treats_star_specially():
    checked = check("tenant", {"allow": ["[a-z]*", "web_?etch*"]}, UNIVERSE)
    assert checked.warnings == [
        "allow[0]: the pattern '[a-z]*' matches no tool today.",
        "allow[1]: the pattern 'web_?etch*' matches no tool today.",
    ]
    assert _errors("tenant", {"allow": ["read_fil?"]}) == {
        "allow[0]": ["Unknown tool 'read_fil?'; did you mean read_file, write_file, read_video?"]
    }


# --- profile, byProvider -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "codng",
            "Unknown profile 'codng'; use one of full, coding, messaging, minimal; did you mean coding?",
        ),
        ("", "Unknown profile ''; use one of full, coding, messaging, minimal"),
        (7, "Unknown profile '7'; use one of full, coding, messaging, minimal"),
        (None, "Unknown profile 'null'; use one of full, coding, messaging, minimal"),
        ("Full", "Unknown profile 'Full'; use one of full, coding, messaging, minimal; did you mean full?"),
    ],
)
def test_bad_profiles(value, message):
    assert _errors("tenant", {"profile": value}) == {"profile": [message]}


def test_by_provider_paths_and_bounds():
    errors = _errors(
        "tenant",
        {
            "byProvider": {
                "openai": {"allow": ["datetime", "nope"], "profile": "tiny", "colour": "red"},
                "": {"allow": []},
                "x" * 101: {},
                "mistral": ["allow"],
            }
        },
    )
    assert errors == {
        "byProvider.openai.allow[1]": ["Unknown tool 'nope'"],
        "byProvider.openai.profile": ["Unknown profile 'tiny'; use one of full, coding, messaging, minimal"],
        "byProvider.openai.colour": ["Unknown key; a provider policy here takes profile, allow."],
        "byProvider.": ["A provider name has 1 to 100 characters."],
        f"byProvider.{'x' * 101}": ["A provider name has 1 to 100 characters."],
        "byProvider.mistral": ["Must be an object."],
    }
    assert _errors("tenant", {"byProvider": ["openai"]}) == {
        "byProvider": ["Must be an object of provider name -> policy."]
    }
    many = {f"p{i}": {"allow": ["exec"]} for i in range(51)}
    assert _errors("tenant", {"byProvider": many}) == {"byProvider": ["At most 50 providers."]}


def test_by_provider_keys_engine_does_not_use_are_warnings():
    tenant = check(
        "tenant", {"byProvider": {"openai": {"allow": ["exec"], "deny": ["tts"], "alsoAllow": []}}}, UNIVERSE
    )
    assert tenant.document == {"byProvider": {"openai": {"allow": ["exec"]}}}
    assert tenant.warnings == [
        "byProvider.openai.deny is ignored: deny lists apply to every provider.",
        "byProvider.openai.alsoAllow is ignored: alsoAllow lists apply to every provider.",
    ]
    agent = check("agent", {"byProvider": {"openai": {"profile": "full", "deny": ["tts"]}}}, UNIVERSE)
    assert agent.document == {"byProvider": {}}  # nothing the engine uses is left for openai
    assert agent.warnings == [
        "byProvider.openai.profile is ignored: only the tenant's byProvider profiles are used.",
        "byProvider.openai.deny is ignored: deny lists apply to every provider.",
    ]


# --- the other values --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        ("full", {"execApproval": ['Must be an object with "security", "ask" and "allowlist".']}),
        ({"security": "all"}, {"execApproval.security": ["Must be one of deny, allowlist, full."]}),
        ({"ask": "sometimes"}, {"execApproval.ask": ["Must be one of off, on-miss, always."]}),
        ({"mode": "x"}, {"execApproval": ["Unknown keys: mode."]}),
        (
            {"allowlist": "git *"},
            {"execApproval.allowlist": ["Must be a list of at most 1000 glob strings (1-500 characters)."]},
        ),
        (
            {"allowlist": [""]},
            {"execApproval.allowlist": ["Must be a list of at most 1000 glob strings (1-500 characters)."]},
        ),
        (
            {"allowlist": ["g" * 501]},
            {"execApproval.allowlist": ["Must be a list of at most 1000 glob strings (1-500 characters)."]},
        ),
        (
            {"allowlist": ["ls"] * 1001},
            {"execApproval.allowlist": ["Must be a list of at most 1000 glob strings (1-500 characters)."]},
        ),
    ],
)
def test_exec_approval_errors(value, errors):
    assert _errors("tenant", {"execApproval": value}) == errors


def test_exec_approval_allowlist_is_deduplicated():
    checked = check("agent", {"execApproval": {"allowlist": ["ls", "git *", "ls"]}}, UNIVERSE)
    assert checked.document == {"execApproval": {"allowlist": ["ls", "git *"]}}


def test_origin_deny():
    assert check("tenant", {"originDeny": {"comm": ["exec"], "app": []}}, UNIVERSE).document == {
        "originDeny": {"comm": ["exec"]}
    }
    assert _errors("tenant", {"originDeny": {"robot": ["exec"], "user": ["bash"]}}) == {
        "originDeny.robot": ["Unknown origin; use one of user, comm, app, skill, system."],
        "originDeny.user[0]": ["'bash' is an alias; policies name tools: use 'exec'."],
    }
    assert _errors("tenant", {"originDeny": ["comm"]}) == {
        "originDeny": ["Must be an object of origin -> list of tool names."]
    }


def test_shell_deny_groups():
    errors = _errors("tenant", {"shellDenyGroups": {"nope": True, "reverse_shell": "no"}})
    [message] = errors["shellDenyGroups"]
    assert "unknown deny group 'nope'" in message
    assert "deny group 'reverse_shell' must be true or false" in message
    [message] = _errors("agent", {"shellDenyGroups": ["reverse_shell"]})["shellDenyGroups"]
    assert message.startswith("shellDenyGroups must be an object")


@pytest.mark.parametrize("value", [-1, 1_000_001, True, 1.5, "10", None])
def test_rate_limit_bounds(value):
    assert _errors("tenant", {"rate_limit_per_hour": value}) == {
        "rate_limit_per_hour": ["Must be an integer from 0 (no limit) to 1000000."]
    }


@pytest.mark.parametrize("value", [0, 1, 1_000_000])
def test_rate_limit_in_bounds(value):
    assert check("tenant", {"rate_limit_per_hour": value}, UNIVERSE).document == {
        "rate_limit_per_hour": value
    }


@pytest.mark.parametrize("value", [1, "true", None])
def test_scrub_credentials_is_a_boolean(value):
    assert _errors("tenant", {"scrub_credentials": value}) == {
        "scrub_credentials": ["Must be true or false."]
    }


# --- the document as a whole -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [[], "allow", 7, None])
def test_a_document_is_an_object(value):
    assert _errors("tenant", value) == {"document": ["Must be a JSON object."]}


def test_a_document_is_bounded():
    assert _errors("agent", {"allow": ["x" * 100] * 700}) == {
        "document": [f"Must be at most {MAX_DOCUMENT_BYTES} bytes of JSON."]
    }


def test_the_error_message_is_the_first_problem_and_every_problem_is_listed():
    with pytest.raises(PolicyInvalid) as caught:
        check("tenant", {"profile": "x", "deny": ["bash"], "scrub_credentials": 1}, UNIVERSE)
    assert str(caught.value) == "profile: Unknown profile 'x'; use one of full, coding, messaging, minimal"
    assert list(caught.value.errors) == ["profile", "deny[0]", "scrub_credentials"]


# --- diff --------------------------------------------------------------------------------------------------


def test_diff_of_equal_documents_is_empty():
    document = {"allow": ["exec"], "byProvider": {"openai": {"profile": "full"}}}
    assert diff(document, dict(document)) == {}
    assert diff(None, None) == {}


def test_diff_from_nothing_and_to_nothing():
    document = {"profile": "coding", "deny": ["exec"], "execApproval": {"security": "deny"}}
    assert diff(None, document) == {
        "deny": {"added": ["exec"], "removed": []},
        "execApproval.security": {"from": None, "to": "deny"},
        "profile": {"from": None, "to": "coding"},
    }
    assert diff(document, None) == {
        "deny": {"added": [], "removed": ["exec"]},
        "execApproval.security": {"from": "deny", "to": None},
        "profile": {"from": "coding", "to": None},
    }


def test_diff_of_lists_keeps_the_order_of_each_side():
    assert diff({"allow": ["a", "b", "c"]}, {"allow": ["c", "d", "a", "e"]}) == {
        "allow": {"added": ["d", "e"], "removed": ["b"]}
    }
    # a reordering alone is a change with nothing added or removed
    assert diff({"allow": ["a", "b"]}, {"allow": ["b", "a"]}) == {"allow": {"added": [], "removed": []}}


def test_diff_walks_nested_objects_by_dotted_path():
    before = {"byProvider": {"openai": {"allow": ["x"], "profile": "full"}}, "rate_limit_per_hour": 150}
    after = {
        "byProvider": {"openai": {"allow": ["x", "y"]}, "anthropic": {"profile": "minimal"}},
        "rate_limit_per_hour": 0,
    }
    assert diff(before, after) == {
        "byProvider.anthropic.profile": {"from": None, "to": "minimal"},
        "byProvider.openai.allow": {"added": ["y"], "removed": []},
        "byProvider.openai.profile": {"from": "full", "to": None},
        "rate_limit_per_hour": {"from": 150, "to": 0},
    }


def test_diff_of_changed_types_and_emptied_objects():
    assert diff({"scrub_credentials": True}, {"scrub_credentials": False}) == {
        "scrub_credentials": {"from": True, "to": False}
    }
    assert diff({"x": 1}, {"x": ["a"]}) == {"x": {"from": 1, "to": ["a"]}}
    assert diff({"originDeny": {"comm": ["exec"]}}, {"originDeny": {}}) == {
        "originDeny": {"from": None, "to": {}},
        "originDeny.comm": {"added": [], "removed": ["exec"]},
    }
