"""Registration validation of MCP servers (B §3.3): stdio commands, args, env references, and URLs
through the SSRF guard."""

from __future__ import annotations

import pytest

from apps.mcp_grants import validation
from apps.toolkit.ssrf import AddressPolicy


def fake_resolver(host: str, port: int) -> list[str]:
    answers = {
        "mcp.example.com": ["93.184.216.34"],
        "evil.test": ["127.0.0.1"],
        "mixed.test": ["93.184.216.34", "10.0.0.1"],
        "meta.test": ["169.254.169.254"],
    }
    if host not in answers:
        raise OSError("no such host")
    return answers[host]


STRICT = AddressPolicy(resolver=fake_resolver)  # no test allowances


def stdio(command: str = "npx", args: list[str] | None = None, env: dict[str, str] | None = None):
    return {"transport": "stdio", "command": command, "args": args or [], "env": env or {}}


def http(url: str):
    return validation.check_server({"transport": "streamable-http", "url": url}, policy=STRICT)


@pytest.mark.parametrize(
    "command",
    ["npx", "node", "python3", "uvx", "uv", "deno", "bun", "/usr/bin/python3", "/opt/venv/bin/python"],
)
def test_allowed_commands(command):
    assert validation.check_server(stdio(command)) == {}


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("bash", "not an allowed command"),
        ("sh", "not an allowed command"),
        ("curl", "not an allowed command"),
        ("/bin/sh", "not an allowed command"),
        ("npx; rm -rf /", "metacharacters"),
        ("npx|sh", "metacharacters"),
        ("npx&&id", "metacharacters"),
        ("$(id)", "metacharacters"),
        ("`id`", "metacharacters"),
        ("node\nrm", "line breaks"),
        ("/usr/../bin/python3", "'..'"),
        ("bin/python3", "absolute path"),
        ("python3 -c x", "one program"),
        ("", "needs a command"),
    ],
)
def test_refused_commands(command, fragment):
    errors = validation.check_server(stdio(command))
    assert fragment in errors["command"][0]


@pytest.mark.parametrize(
    "args",
    [
        ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"],
        ["-m", "mcp_server_time", "--local-timezone=UTC"],
        ["mcp-server-fetch"],
        ["run", "--allow-net", "server.ts"],
    ],
)
def test_accepted_args(args):
    assert validation.check_server(stdio(args=args)) == {}


@pytest.mark.parametrize(
    ("arg", "fragment"),
    [
        ("--eval", "runs inline code"),
        ("--eval=process.exit()", "metacharacters"),
        ("--eval=require", "runs inline code"),
        ("-e", "runs inline code"),
        ("-c", "runs inline code"),
        ("--require", "runs inline code"),
        ("-r", "runs inline code"),
        ("--import", "runs inline code"),
        ("--import=./x.mjs", "runs inline code"),
        ("import child_process", "child_process"),
        ("SUBPROCESS.run", "subprocess"),
        ("__import__", "__import__"),
        ("exec(1)", "metacharacters"),
        ("a;b", "metacharacters"),
        ("a|b", "metacharacters"),
        ("x>y", "metacharacters"),
        ("${HOME}", "metacharacters"),
        ("../../etc/passwd", "'..'"),
        ("line\nbreak", "line breaks"),
        ("x" * 5000, "at most"),
    ],
)
def test_refused_args(arg, fragment):
    errors = validation.check_server(stdio(args=["ok", arg]))
    assert errors["args"][0].startswith("[1]: ")
    assert fragment in errors["args"][0]


def test_args_are_bounded_and_typed():
    assert "at most 64" in validation.check_server(stdio(args=["a"] * 65))["args"][0]
    assert "string" in validation.check_server(stdio(args=[1]))["args"][0]  # type: ignore[list-item]
    assert (
        "list" in validation.check_server({"transport": "stdio", "command": "npx", "args": "-y"})["args"][0]
    )


@pytest.mark.parametrize("ref", sorted(validation.ENV_REFERENCES))
def test_env_references_allowed(ref):
    assert validation.check_server(stdio(env={"X": f"env:{ref}", "TOKEN": "s3cr3t"})) == {}


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"X": "env:AWS_SECRET_ACCESS_KEY"}, "may not be referenced"),
        ({"X": "env:FIELD_ENCRYPTION_KEY"}, "may not be referenced"),
        ({"X": "env:DATABASE_URL"}, "may not be referenced"),
        ({"X": "env:home"}, "may not be referenced"),
        ({"1BAD": "v"}, "not starting with a digit"),
        ({"A-B": "v"}, "letters, digits"),
        ({"X": 3}, "string"),
        ({"X": "a\x00b"}, "NUL"),
    ],
)
def test_refused_env(env, fragment):
    assert fragment in validation.check_server(stdio(env=env))["env"][0]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/mcp",
        "http://localhost/mcp",
        "http://10.0.0.5/sse",
        "http://192.168.1.1/",
        "http://172.16.3.4/",
        "http://169.254.169.254/latest/meta-data/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://[::1]/mcp",
        "http://[::ffff:127.0.0.1]/mcp",
        "http://[fd00::1]/mcp",
        "http://2130706433/mcp",
        "http://0x7f000001/mcp",
        "http://0/mcp",
        "file:///etc/passwd",
        "ftp://example.com/mcp",
        "gopher://example.com/",
        "http://user:pw@example.com/mcp",
        "http://evil.test/mcp",
        "https://mixed.test/mcp",
        "http://meta.test/latest",
        "",
    ],
)
def test_ssrf_urls_refused(url):
    errors = http(url)
    assert "url" in errors, url


@pytest.mark.parametrize(
    "url",
    [
        "https://mcp.example.com/mcp",
        "http://93.184.216.34:8080/sse",
        "https://not-yet-registered.test/mcp",  # checked again when connecting
    ],
)
def test_public_urls_accepted(url):
    assert http(url) == {}


def test_transport_fields_do_not_mix():
    errors = validation.check_server({"transport": "sse", "url": "https://a.example/", "command": "npx"})
    assert "no command" in errors["command"][0]
    errors = validation.check_server({**stdio(), "url": "https://a.example/"})
    assert "no URL" in errors["url"][0]
    assert "transport" in validation.check_server({"transport": "websocket"})


def test_other_fields_bounded():
    errors = validation.check_server(
        {
            **stdio(),
            "headers": {"X-Bad\n": "v", "Authorization": "a\r\nInjected: 1"},
            "tool_prefix": "Bad Prefix",
            "timeout_sec": 0,
            "settings": {"x": "y" * 20000},
            "api_key": "a\nb",
        }
    )
    assert set(errors) == {"headers", "tool_prefix", "timeout_sec", "settings", "api_key"}
    assert len(errors["headers"]) == 2
