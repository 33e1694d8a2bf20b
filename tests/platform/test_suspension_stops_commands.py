"""Suspending a tenant stops the programs its calls are running: a jailed ``exec`` that sleeps is killed
with its whole process group within seconds of ``suspend_tenant`` (run here, while the call runs in
another thread with its own database connection, as it would in another process), and its call answers
why. Another tenant's command running at the same time goes on to its end."""

from __future__ import annotations

import os
import threading
import time
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from apps.accounts import services as accounts
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from apps.toolkit.processes import STOP_CHECK_SECONDS
from tests import factories
from tests.processes import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def processes_running(marker: str) -> list[int]:
    """Pids of live processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat") as stat:
                zombie = stat.read().split(") ", 1)[1][0] == "Z"
        except (OSError, IndexError):
            continue
        if marker in argv and not zombie:
            found.append(int(entry))
    return found


def in_thread(client: Any, command: str, into: dict[str, Any]) -> threading.Thread:
    def call() -> None:
        try:
            response = client.post(
                "/api/v1/runtime/execute",
                {"agent": "bot", "tool": "exec", "args": {"command": command, "timeout": 120}},
                format="json",
            )
            into["status"], into["body"], into["at"] = response.status_code, response.json(), time.monotonic()
        finally:
            connection.close()

    thread = threading.Thread(target=call)
    thread.start()
    return thread


def test_a_running_command_is_killed_when_its_tenant_is_suspended(tenant_a, tenant_b):
    for tenant in (tenant_a, tenant_b):
        accounts.agent_create(actor=Actor.system(tenant), key="bot", name="Bot")
    client_a = factories.key_client(factories.make_api_key(tenant_a, Role.MEMBER))
    client_b = factories.key_client(factories.make_api_key(tenant_b, Role.MEMBER))
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    thread_a = in_thread(client_a, "sleep 47.25 & sleep 47.5; echo never", a)
    thread_b = in_thread(client_b, "sleep 6.75; echo done-b", b)
    wait_until(lambda: processes_running("sleep 47.5") and processes_running("sleep 6.75"), timeout=30)

    suspended_at = time.monotonic()
    out = StringIO()
    call_command("suspend_tenant", "tenant-a", "--reason", "unpaid", stdout=out)
    thread_a.join(30)
    thread_b.join(30)

    assert not thread_a.is_alive()
    assert a["status"] == 200
    assert a["at"] - suspended_at < STOP_CHECK_SECONDS + 3
    assert a["body"]["is_error"] is True
    assert (
        "[command stopped and killed with all its processes: the tenant was suspended]"
        in a["body"]["for_llm"]
    )
    assert "never" not in a["body"]["for_llm"]
    assert wait_until(
        lambda: not processes_running("sleep 47.25") and not processes_running("sleep 47.5"), 10
    )
    # The other tenant's command ran to its end.
    assert b["status"] == 200
    assert b["body"]["is_error"] is False
    assert "done-b" in b["body"]["for_llm"]
