"""The credential scrubber (apps/runtime/scrubber.py, SPEC B §7.1 with Part A's rules).

Exact outputs for each pattern and for near-misses, registered values, server addresses, idempotence,
and a comparison with a plain implementation (the ten patterns of the spec, written out here, as ten
re.sub calls, repeated until nothing changes) on thousands of random mixes."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from types import SimpleNamespace

import pytest
from django.test import override_settings

from apps.runtime import scrubber
from apps.runtime.scrubber import Scrubber, scrubber_for, server_addresses

R = "[REDACTED]"
IP = "[SERVER_IP]"

# The spec's patterns, copied from SPEC B §7.1 (not imported: a typo in the module must show here).
SPEC_PATTERNS = [
    re.compile(p, re.ASCII)
    for p in (
        r"sk-[a-zA-Z0-9]{20,}",
        r"sk-ant-[a-zA-Z0-9-]{20,}",
        r"(ghp|gho|ghu|ghs|ghr)_[a-zA-Z0-9]{36}",
        r"AKIA[A-Z0-9]{16}",
        r"(?i)(api[_-]?key|token|secret|password|bearer|authorization)\s*[:=]\s*[\"']?\S{8,}[\"']?",
        r"(?i)(postgres|postgresql|mysql|mongodb|redis|amqp)://[^\s\"']+",
        r"(?i)[A-Z_]*(KEY|SECRET|CREDENTIAL|PRIVATE)[A-Z_]*\s*=\s*[^\[\s]{8,}",
        r"(?i)(DSN|DATABASE_URL|REDIS_URL|MONGO_URI)\s*=\s*[^\[\s]{8,}",
        r"(?i)VIRTUAL_[A-Z_]+\s*=\s*[^\[\s]{4,}",
        r"[a-fA-F0-9]{64,}",
    )
]


def reference_round(text: str, values: list[str], addresses: tuple[str, ...]) -> str:
    for pattern in SPEC_PATTERNS:
        text = pattern.sub(R, text)
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, R)
    for address in addresses:
        text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(address)}(?![0-9A-Za-z])", IP, text)
    return text


def reference(text: str, values: Sequence[str] = (), addresses: tuple[str, ...] = ()) -> str:
    for _ in range(8):
        scrubbed = reference_round(text, list(values), addresses)
        if scrubbed == text:
            break
        text = scrubbed
    return text


@pytest.fixture(autouse=True)
def no_interfaces(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests do not depend on this machine's addresses: interfaces are faked, caches cleared."""
    monkeypatch.setattr(scrubber, "_interface_addresses", lambda: ())
    scrubber._server_addresses.cache_clear()
    with override_settings(TOOLGATE_SERVER_ADDRESSES=[]):
        yield
    scrubber._server_addresses.cache_clear()


OPENAI = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
ANTHROPIC = "sk-ant-api03-" + "Xy9-" * 6 + "zz"
GITHUB = "ghp_" + "a" * 18 + "B" * 18
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
HEX64 = "0123456789abcdef" * 4

# (input, exact output): several positives per pattern, key names consumed as the spec says.
POSITIVES = [
    # 1 OpenAI
    (f"key is {OPENAI} ok", f"key is {R} ok"),
    (f"openai={OPENAI}", f"openai={R}"),
    ("sk-" + "x" * 20, R),
    (f"({OPENAI}),{OPENAI}", f"({R}),{R}"),
    # 2 Anthropic (pattern 1 does not match: "ant" is followed by "-")
    (f"ANTHROPIC {ANTHROPIC} end", f"ANTHROPIC {R} end"),
    ("sk-ant-" + "a-" * 10, R),
    # 3 GitHub: exactly 36 characters, the rest stays
    (f"remote {GITHUB}", f"remote {R}"),
    ("gho_" + "Z" * 36 + "tail", R + "tail"),
    ("ghu_" + "1" * 36 + " ghs_" + "2" * 36 + " ghr_" + "3" * 36, f"{R} {R} {R}"),
    # 4 AWS
    (f"aws {AWS} ", f"aws {R} "),
    ("AKIA" + "Z" * 20, R + "ZZZZ"),
    # 5 key: value, key name consumed with the value
    ("api_key=supersecretvalue123", R),
    ("API-KEY: 'abcdefgh'", R),
    ("apikey = abcdefgh12 and more", f"{R} and more"),
    ("Secret=hunter2hunter2", R),
    ("password:  correct-horse-battery", R),
    ("BEARER=abcdefghijkl", R),
    ("authorization : xyzxyzxyz", R),
    (f"token={OPENAI}", R),  # pattern 1 first, then 5 consumes "token=[REDACTED]"
    ("mytoken=abcdefgh", "my" + R),  # no word boundary in the spec
    # 6 connection strings
    ("postgres://user:pw@db:5432/app", R),
    ("url=postgresql://u@h/db?x=1 rest", f"url={R} rest"),
    ("MYSQL://root@localhost", R),
    ("'mongodb://a:b@c/d'", f"'{R}'"),
    ("redis://:pw@cache:6379/0\n", f"{R}\n"),
    ("amqp://guest:guest@mq//", R),
    # 7 environment-style keys, the whole name consumed
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", R),
    ("private_key = abcdefghij", R),
    ("export GOOGLE_CREDENTIALS=abcdefghijkl", f"export {R}"),
    ("x SSH_PRIVATE_FILE=/home/u/.ssh/id", f"x {R}"),
    # 8 DSN-style
    ("SENTRY_DSN=https://abc@sentry.io/1", "SENTRY_" + R),
    ("DATABASE_URL=sqlite:///tmp/db.sqlite3", R),
    ("mongo_uri = abcdefghi", R),
    # 9 VIRTUAL_*
    ("VIRTUAL_ENV=/srv/app/.venv", R),
    ("virtual_host = abcd", R),
    # 10 hex of 64+ characters
    (HEX64, R),
    (f"sha256 {HEX64.upper()}ff  file.tar.gz", f"sha256 {R}  file.tar.gz"),
    # mixed
    (
        f"Connecting to postgres://app:pw@db/app with {AWS}\nexport API_KEY=abcdefghijk\nok",
        f"Connecting to {R} with {R}\nexport {R}\nok",
    ),
]

NEAR_MISSES = [
    "sk-short",
    "sk-" + "a" * 19,
    "ghp_tooshort",
    "ghp_" + "a" * 35,
    "AKIA1234",
    "AKIA" + "abcdefghijklmnop",  # lower case
    "hello world",
    "summit",
    "the summit of the mountain; task-based workflows",
    HEX64[:63],
    "token: short",
    "password = 1234567",  # 7 characters
    "tokens are counted per request",
    "KEY=short",
    "DSN=1234567",
    "VIRTUAL_ENV=abc",
    "https://example.com/path?q=1",
    "postgres is a database; redis is a cache",
    "def handle(self, token=None, key=0):\n    return {'status': 200, 'ok': True}\n",
    "2026-11-21T22:05:01Z INFO request_id=ab12cd34 status=200 duration_ms=12",
    "Ünïcödé prose — with “quotes” and ✓ marks.",
    "secret_ref: None",
]


@pytest.mark.parametrize(("text", "expected"), POSITIVES)
def test_each_pattern_with_exact_output(text: str, expected: str) -> None:
    assert Scrubber().scrub(text) == expected
    assert reference(text) == expected  # the expectations are the spec's, not this implementation's


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_left_intact(text: str) -> None:
    assert Scrubber().scrub(text) == text


def test_order_of_patterns_matters_where_they_overlap() -> None:
    # 1 runs before 2: the inner "sk-…" goes first and 2 then sees a placeholder, not 20 characters.
    text = "sk-ant-api03-sk-" + "A" * 24
    assert Scrubber().scrub(text) == "sk-ant-api03-" + R
    # 6 before 8: the URL becomes a placeholder, which 8's value ([^\[\s]) does not take.
    assert Scrubber().scrub("DATABASE_URL=postgres://u:p@h/d") == "DATABASE_URL=" + R
    # 7 before 10: the name and the value go together.
    assert Scrubber().scrub(f"SIGNING_KEY={HEX64}") == R


def test_non_ascii_text_keeps_positions() -> None:
    text = "é—✓ token=abcdefghij ünï KEY_X=abcdefghi 密码 " + HEX64 + " fin"
    assert Scrubber().scrub(text) == f"é—✓ {R} ünï {R} 密码 {R} fin"
    # Case-insensitivity is ASCII only, as in upstream's Go regexp: the Kelvin sign is not a "K".
    assert Scrubber().scrub("\u212aEY=abcdefghij") == "\u212aEY=abcdefghij"


def test_idempotent_including_upstreams_two_round_cases() -> None:
    s = Scrubber(["abc123"])
    for text in [
        *(t for t, _ in POSITIVES),
        *NEAR_MISSES,
        "token: abKEY = abcdefgh",  # one upstream round gives "token: [REDACTED]"
        "token: abc123",  # the value is registered, 6 characters: too short for pattern 5 alone
    ]:
        once = s.scrub(text)
        assert s.scrub(once) == once, text
    assert s.scrub("token: abKEY = abcdefgh") == R
    assert s.scrub("token: abc123") == R


# --- Registered values ---------------------------------------------------------------------------------


def test_registered_values_are_redacted_everywhere() -> None:
    s = Scrubber(["hunter2hunter2"])
    s.register("p@ss w0rd!")
    assert s.scrub("login hunter2hunter2 ok, x=p@ss w0rd!;") == f"login {R} ok, x={R};"
    assert s.scrub("inside-a-wordhunter2hunter2suffix") == f"inside-a-word{R}suffix"


def test_short_values_are_ignored_and_duplicates_kept_once() -> None:
    s = Scrubber(["12345", "", "abcdef"])
    s.register("abcdef")
    s.register("xyz")
    assert s.values == ("abcdef",)
    assert s.scrub("12345 xyz abcdef") == f"12345 xyz {R}"


def test_longest_value_first() -> None:
    s = Scrubber(["secret", "secret-extended"])
    assert s.scrub("a secret-extended b secret") == f"a {R} b {R}"


def test_two_scrubbers_do_not_share_values() -> None:
    a = scrubber_for(["tenant-a-credential"])
    b = scrubber_for(["tenant-b-credential"])
    a.register("tenant-a-runtime-secret")
    text = "tenant-a-credential tenant-b-credential tenant-a-runtime-secret"
    assert a.scrub(text) == f"{R} tenant-b-credential {R}"
    assert b.scrub(text) == f"tenant-a-credential {R} tenant-a-runtime-secret"
    assert Scrubber().scrub(text) == text


def test_values_inside_placeholders_are_ignored() -> None:
    # Otherwise "[REDACTED]" itself would be rewritten on every scrub.
    s = Scrubber(["REDACTED", "SERVER_IP", "[REDACTED]"])
    assert s.values == ()


# --- Server addresses ----------------------------------------------------------------------------------


@override_settings(TOOLGATE_SERVER_ADDRESSES=["203.0.113.7", "toolgate.example.com", " "])
def test_configured_addresses_and_derived_forms() -> None:
    assert set(server_addresses()) == {"203.0.113.7", "3405803783", "203-0-113-7", "toolgate.example.com"}
    text = (
        "inet 203.0.113.7/24; host ip-203-0-113-7.internal; n=3405803783; https://api.toolgate.example.com/v1"
    )
    assert Scrubber().scrub(text) == f"inet {IP}/24; host ip-{IP}.internal; n={IP}; https://api.{IP}/v1"


@override_settings(TOOLGATE_SERVER_ADDRESSES=["10.0.0.5"])
def test_addresses_inside_longer_numbers_are_left() -> None:
    text = "110.0.0.5 10.0.0.55 10.0.0.5a 10.0.0.5 (10.0.0.5) 10.0.0.5."
    assert Scrubber().scrub(text) == f"110.0.0.5 10.0.0.55 10.0.0.5a {IP} ({IP}) {IP}."


@override_settings(TOOLGATE_SERVER_ADDRESSES=["198.51.100.20"])
def test_secret_before_address() -> None:
    # The registered value overlaps the address: it is replaced first, nothing of it is left.
    s = Scrubber(["20-secret-suffix"])
    assert s.scrub("198.51.100.20-secret-suffix") == f"198.51.100.{R}"


def test_interface_addresses_skip_loopback_and_link_local(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    import psutil

    def addr(family: int, address: str) -> SimpleNamespace:
        return SimpleNamespace(family=family, address=address)

    fake = {
        "lo": [addr(socket.AF_INET, "127.0.0.1"), addr(socket.AF_INET6, "::1")],
        "eth0": [
            addr(socket.AF_INET, "198.51.100.9"),
            addr(socket.AF_INET6, "2001:db8::9"),
            addr(socket.AF_INET6, "fe80::1%eth0"),
            addr(socket.AF_INET, "169.254.10.1"),
            addr(psutil.AF_LINK, "02:fc:00:00:00:01"),
        ],
    }
    monkeypatch.setattr(psutil, "net_if_addrs", lambda: fake)
    monkeypatch.undo()  # restore the real _interface_addresses (the autouse fixture replaced it)…
    monkeypatch.setattr(psutil, "net_if_addrs", lambda: fake)  # …but keep the fake interfaces
    scrubber._interface_addresses.cache_clear()
    scrubber._server_addresses.cache_clear()
    try:
        assert scrubber._interface_addresses() == ("198.51.100.9", "2001:db8::9")
        with override_settings(TOOLGATE_SERVER_ADDRESSES=[]):
            assert set(server_addresses()) == {"198.51.100.9", "3325256713", "198-51-100-9", "2001:db8::9"}
            assert Scrubber().scrub("from 198.51.100.9 and 127.0.0.1") == f"from {IP} and 127.0.0.1"
    finally:
        scrubber._interface_addresses.cache_clear()
        scrubber._server_addresses.cache_clear()


def test_interface_addresses_are_read_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    monkeypatch.undo()
    reads: list[int] = []

    def net_if_addrs() -> dict[str, list[object]]:
        reads.append(1)
        return {}

    monkeypatch.setattr(psutil, "net_if_addrs", net_if_addrs)
    scrubber._interface_addresses.cache_clear()
    scrubber._server_addresses.cache_clear()
    try:
        for _ in range(3):
            Scrubber().scrub("x")
        assert len(reads) == 1
    finally:
        scrubber._interface_addresses.cache_clear()
        scrubber._server_addresses.cache_clear()


# --- Against the plain implementation ------------------------------------------------------------------

FRAGMENTS = [
    *("sk-", "sk-ant-", "ant-", "ghp_", "gho_", "ghr_", "AKIA", "K", "KE", "EY"),
    *("api_key", "api-key", "APIKEY", "token", "Token", "secret", "password", "bearer", "Authorization"),
    *("postgres", "postgresql", "://", "redis", "MySQL", "amqp", "mongodb"),
    *("KEY", "SECRET", "_", "CREDENTIAL", "private", "DSN", "DATABASE_URL", "REDIS_URL", "mongo_uri"),
    *("VIRTUAL_", "VIRTUAL_ENV", ":", "=", " ", "  ", "\n", "\t", '"', "'", "[", "]", R, IP),
    *("abcdefghij", "ABCDEFGHIJKLMNOP", "0123456789", "deadbeef" * 3, "a" * 64, "f" * 30, "abcd", "x"),
    *("é", "—", "密", "\u212a", "summit", "hello world", "-", ".", "/"),
    *("hunter2x", "ab12cd", "10.0.0.5", "167772165", "10-0-0-5", "1.2.3.4", "9"),
]
# Templates where one upstream round is not enough (a placeholder lands in pattern 5's or 6's value).
TWO_ROUND_SEEDS = [
    "token: abKEY = abcdefgh",
    "secret=ab PRIVATE=abcdefghi",
    "token: ab12cd",
    "password: 1.2.3.4",
    "Bearer:x" + HEX64,
    "token: token: abcdefghij",
]


def random_texts(seed: int, count: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        parts = [rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 30))]
        if rng.random() < 0.2:
            parts.insert(rng.randrange(len(parts) + 1), rng.choice(TWO_ROUND_SEEDS))
        yield "".join(parts)


@override_settings(TOOLGATE_SERVER_ADDRESSES=["10.0.0.5", "1.2.3.4"])
def test_same_result_as_the_plain_implementation() -> None:
    values = ["hunter2x", "ab12cd", "x y z w"]
    s = Scrubber(values)
    addresses = server_addresses()
    multi_round = 0
    for text in random_texts(seed=1, count=6000):
        expected = reference(text, values, addresses)
        assert s.scrub(text) == expected, text
        first = reference_round(text, values, addresses)
        multi_round += first != expected
    assert multi_round > 100  # the repeat rounds were exercised


@override_settings(TOOLGATE_SERVER_ADDRESSES=["10.0.0.5"])
def test_same_result_with_a_value_containing_a_bracket() -> None:
    # Such a value can match across a placeholder: every round is then a full one.
    values = ["ab]cdef", "hunter2x"]
    s = Scrubber(values)
    addresses = server_addresses()
    for text in random_texts(seed=2, count=2000):
        text = text.replace("x", "ab]cdef", 1)
        assert s.scrub(text) == reference(text, values, addresses), text


def test_random_texts_are_idempotent() -> None:
    s = Scrubber(["hunter2x", "ab12cd"])
    for text in random_texts(seed=3, count=3000):
        once = s.scrub(text)
        assert s.scrub(once) == once, text


def test_large_realistic_output_matches_the_plain_implementation() -> None:
    from bench.scrub import realistic_output

    text = realistic_output("198.51.100.20", "tenant-cli-Q7w9Zr2Lp4", size=200_000)
    values = ["tenant-cli-Q7w9Zr2Lp4"]
    with override_settings(TOOLGATE_SERVER_ADDRESSES=["198.51.100.20"]):
        expected = reference(text, values, server_addresses())
        assert Scrubber(values).scrub(text) == expected
    assert expected.count(R) > 100
    assert expected.count(IP) > 5


def test_empty_text() -> None:
    assert Scrubber(["abcdef"]).scrub("") == ""
