from __future__ import annotations

from dataclasses import dataclass

from apps.mcp_grants import naming


@dataclass
class Server:
    name: str
    tool_prefix: str = ""


def test_ensure_prefix_examples():
    assert naming.ensure_prefix("", "pg") == "mcp_pg"
    assert naming.ensure_prefix("", "my-server") == "mcp_my_server"
    assert naming.ensure_prefix("gh", "github") == "mcp_gh"
    assert naming.ensure_prefix("mcp_gh", "github") == "mcp_gh"


def test_registered_names():
    assert naming.registered_name(Server("pg"), "query") == "mcp_pg__query"
    assert naming.registered_name(Server("my-server"), "read_file") == "mcp_my_server__read_file"
    assert naming.registered_name(Server("github", "gh"), "list_issues") == "mcp_gh__list_issues"


def test_parse_back_to_server_and_tool():
    pg, gh, other = Server("pg"), Server("github", "gh"), Server("pg-extra")
    servers = [pg, gh, other]
    assert naming.parse("mcp_pg__query", servers) == (pg, "query")
    assert naming.parse("mcp_gh__list_issues", servers) == (gh, "list_issues")
    assert naming.parse("mcp_pg_extra__run__fast", servers) == (other, "run__fast")
    assert naming.parse("mcp_github__list_issues", servers) is None
    assert naming.parse("mcp_pg__", servers) is None
    assert naming.parse("read_file", servers) is None


def test_split():
    assert naming.split("mcp_pg__query") == ("mcp_pg", "query")
    assert naming.split("mcp_my_server__a__b") == ("mcp_my_server", "a__b")
    assert naming.split("mcp_tool_search") is None
    assert naming.split("exec") is None
