"""How long the credential scrubber takes on 1 MiB of realistic tool output (goal: 20 ms).

Every tool result passes through ``Scrubber.scrub`` (apps/runtime/scrubber.py) before the model sees
it, so its cost is added to every call; 1 MiB is a large but ordinary output (a file read, a command's
log, a fetched page). The text is generated, deterministically, from the kinds of output tools return:
source code, JSON from an API, log lines, shell listings, checksums, prose with some non-ASCII, and an
environment dump, with a few real-looking secrets and server addresses mixed in, so that every stage
of the scrubber finds something to replace (a text without secrets would only measure the scans).

Run alone with ``python -m bench.scrub`` (no database needed) or as part of ``make bench``.
"""

from __future__ import annotations

import os
import random
import statistics
import string
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apps.toolkit.scrubber import Scrubber

GOAL_MS = 20.0
SIZE = 1 << 20

_WORDS = (
    "the",
    "request",
    "returned",
    "a",
    "list",
    "of",
    "items",
    "for",
    "each",
    "tenant",
    "and",
    "the",
    "agent",
    "used",
    "it",
    "to",
    "decide",
    "which",
    "tool",
    "should",
    "run",
    "next",
    "while",
    "the",
    "worker",
    "kept",
    "the",
    "session",
    "open",
    "until",
    "every",
    "result",
    "had",
    "been",
    "written",
    "to",
    "disk",
    "so",
    "that",
    "summit",
    "deploy",
    "cache",
    "value",
    "node",
    "table",
    "index",
    "query",
    "default",
    "build",
    "release",
    "note",
)


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _alnum(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


def _code(rng: random.Random) -> str:
    name = rng.choice(_WORDS)
    return (
        f"def handle_{name}(self, request, token=None, **kwargs):\n"
        f'    """Return the {name} for the {rng.choice(_WORDS)} (see docs/{name}.md)."""\n'
        f"    key = kwargs.get('{name}_key', {rng.randint(0, 999)})\n"
        f"    if self.private and key == {rng.randint(0, 99)}:\n"
        f"        raise ValueError(f'bad {name}: {{key!r}}')\n"
        f"    result = {{'id': {rng.randint(1, 10**6)}, 'secret_ref': None, 'items': [1, 2, 3]}}\n"
        f"    return self.render(result, status=200, timeout=30.0)\n\n"
    )


def _json(rng: random.Random) -> str:
    return (
        f'{{"id": "{_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 12)}", '
        f'"name": "{rng.choice(_WORDS)} {rng.choice(_WORDS)}", "token_count": {rng.randint(1, 9000)}, '
        f'"created_at": "2026-11-{rng.randint(10, 28)}T{rng.randint(10, 23)}:0{rng.randint(0, 9)}:00Z", '
        f'"url": "https://api.example.com/v1/{rng.choice(_WORDS)}/{rng.randint(1, 999)}", '
        f'"tags": ["{rng.choice(_WORDS)}", "{rng.choice(_WORDS)}"], "enabled": true}}\n'
    )


def _log(rng: random.Random, address: str) -> str:
    client = address if rng.random() < 0.05 else f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.7"
    return (
        f"2026-11-21T22:{rng.randint(10, 59)}:{rng.randint(10, 59)}.{rng.randint(100, 999)}Z INFO "
        f"request_id={_hex(rng, 16)} method=GET path=/api/v1/{rng.choice(_WORDS)}/ status=200 "
        f"duration_ms={rng.randint(1, 400)} client={client}:{rng.randint(1024, 65535)}\n"
    )


def _listing(rng: random.Random) -> str:
    return (
        f"-rw-r--r-- 1 app app {rng.randint(100, 99999):>6} Nov 21 22:{rng.randint(10, 59)} "
        f"{rng.choice(_WORDS)}_{rng.randint(1, 99)}.py\n"
        f"commit {_hex(rng, 40)}\nAuthor: Dev <dev@example.com>\n"
        f"{_hex(rng, 64)}  dist/{rng.choice(_WORDS)}.tar.gz\n"
    )


def _prose(rng: random.Random) -> str:
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(40, 90)))
    return f"{words.capitalize()} — “quoted” café naïve ✓.\n\n"


def _env(rng: random.Random, secret: str) -> str:
    return (
        f"PATH=/usr/local/bin:/usr/bin\nHOME=/home/app\nVIRTUAL_ENV=/srv/app/.venv\n"
        f"AWS_SECRET_ACCESS_KEY={_alnum(rng, 40)}\n"
        f"DATABASE_URL=postgres://app:{_alnum(rng, 12)}@db:5432/app\n"
        f"OPENAI={'sk-' + _alnum(rng, 40)}\n"
        f"GITHUB=ghp_{_alnum(rng, 36)} AWS_ID=AKIA{_alnum(rng, 16).upper()}\n"
        f"Authorization: Bearer {_alnum(rng, 32)}\napi_key={_alnum(rng, 24)} tenant_cli={secret}\n"
    )


def realistic_output(address: str, secret: str, size: int = SIZE, seed: int = 7) -> str:
    """About ``size`` characters of mixed tool output; mostly ordinary text, a secret every few KiB."""
    rng = random.Random(seed)  # noqa: S311 (reproducible test data)
    makers: list[tuple[int, Callable[[], str]]] = [
        (30, lambda: _code(rng)),
        (20, lambda: _json(rng)),
        (25, lambda: _log(rng, address)),
        (8, lambda: _listing(rng)),
        (15, lambda: _prose(rng)),
        (1, lambda: _env(rng, secret)),
    ]
    population = [make for weight, make in makers for _ in range(weight)]
    parts: list[str] = []
    total = 0
    while total < size:
        part = rng.choice(population)()
        parts.append(part)
        total += len(part)
    return "".join(parts)[:size]


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _timed(scrubber: Scrubber, text: str, runs: int) -> list[float]:
    samples: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        scrubber.scrub(text)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def run(runs: int = 30) -> list[str]:
    """Measure and return the report lines."""
    from apps.toolkit.scrubber import PATTERNS, REDACTED, Scrubber, server_addresses

    addresses = server_addresses()
    address = addresses[0] if addresses else "192.0.2.10"
    secret = "tenant-cli-" + "Q7w9Zr2Lp4"
    text = realistic_output(address, secret)
    tenant_values = [secret, "another-tenant-credential-1", "db-password-xyz", "short"]
    scrubber = Scrubber(tenant_values)

    scrubbed = scrubber.scrub(text)  # warm-up: compiles and caches what is compiled once
    samples = _timed(scrubber, text, runs)
    # The same output once scrubbed: nothing left to replace, so only the scans remain.
    clean = _timed(scrubber, scrubbed, runs)

    # The same ten patterns as ten plain re.sub calls, for scale (three runs: it is slow).
    naive: list[float] = []
    for _ in range(3):
        started = time.perf_counter()
        out = text
        for pattern in PATTERNS:
            out = pattern.sub(REDACTED, out)
        naive.append((time.perf_counter() - started) * 1000)

    median, p95 = statistics.median(samples), _percentile(samples, 0.95)
    verdict = "within" if p95 <= GOAL_MS else "OVER"
    clean_median, clean_p95 = statistics.median(clean), _percentile(clean, 0.95)
    non_ascii = sum(1 for c in text if ord(c) > 127)
    return [
        f"Scrubber: {len(text):,} characters of generated tool output ({non_ascii:,} non-ASCII), "
        f"{len(tenant_values)} registered values, {len(addresses)} server address forms",
        f"  {scrubbed.count('[REDACTED]'):,} [REDACTED] and {scrubbed.count('[SERVER_IP]'):,} [SERVER_IP] "
        f"in the result",
        f"  {runs} runs: median {median:.2f} ms, p95 {p95:.2f} ms, min {min(samples):.2f} ms — "
        f"{verdict} the {GOAL_MS:g} ms goal",
        f"  the same output already scrubbed (nothing to replace): median {clean_median:.2f} ms, "
        f"p95 {clean_p95:.2f} ms",
        f"  ten plain re.sub calls on the same text: median {statistics.median(naive):.0f} ms",
    ]


if __name__ == "__main__":
    # No database is touched: keep settings from starting the embedded server.
    os.environ.setdefault("TOOLGATE_EMBEDDED_DB_AUTOSTART", "0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    print("\n".join(run()))
