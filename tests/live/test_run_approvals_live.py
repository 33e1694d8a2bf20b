"""A run on a real django-q2 cluster that asks for an approval: the worker parks it and is free (a second
run is worked meanwhile), an admin's decision through the API lets the cluster run the call and go on,
and the run's events reach a websocket client on daphne."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.accounts import services as tenant_services
from apps.llm import services as llm_services
from apps.policy import services as policy_services
from apps.policy.approval_models import PendingApproval
from apps.runs.models import Run
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from apps.toolkit.workspace import workspace_for
from tests import factories
from tests.live.wsclient import event_of, open_socket
from tests.llm.fake_provider import KEY, PUBLIC_IP, chat_answer
from tests.processes import wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def script(request: dict[str, Any]) -> dict[str, Any]:
    """The "exec" session asks to run a command, then answers with what it read; others answer at once."""
    messages = request["messages"]
    if messages[-1]["role"] == "tool":
        return chat_answer(f"Read: {messages[-1]['content'].strip()}")
    if "exec" in messages[-1]["content"]:
        command = {"command": "touch approved.txt && echo made-it"}
        return chat_answer(
            "",
            tool_calls=[
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "exec", "arguments": json.dumps(command)},
                }
            ],
        )
    return chat_answer("Quick answer.")


def test_a_waiting_run_frees_its_worker_and_goes_on_after_the_decision(
    provider_processes, live, daphne, sockets, settings, tenant_a
):
    processes, fake = provider_processes
    processes.extra_env["Q_WORKERS"] = "1"  # one worker: a waiting run must not hold it
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    system = Actor.system(tenant_a)
    agent = tenant_services.agent_create(actor=system, key="bot", name="Bot")
    llm_services.provider_create(
        actor=system, name="main", base_url=fake.base_url, api_key=KEY, models={"chat": "fake-chat"}
    )
    target = policy_services.target("tenant")
    policy_services.policy_save(system, target, {"execApproval": {"security": "full", "ask": "on-miss"}})
    fake.chat = script
    raw = factories.make_api_key(tenant_a, Role.MEMBER)
    member = factories.key_client(raw)
    admin = factories.key_client(factories.make_api_key(tenant_a, Role.ADMIN))
    sock = sockets.enter_context(open_socket(live.ws_url, api_key=raw))
    assert sock.recv()["type"] == "hello"
    sock.subscribe(["runs"])
    processes.qcluster()

    def start(session_key: str, message: str) -> str:
        body = {"session_key": session_key, "message": message, "user_id": "alice", "wait": False}
        response = member.post("/api/v1/agents/bot/runs", body, format="json")
        assert response.status_code == 202, response.content
        return str(response.json()["id"])

    waiting_id = start("s-exec", "Please exec the command.")
    parked = sock.wait_for(lambda m: event_of(m, topic="runs", type="run.waiting", id=waiting_id), timeout=60)
    approval_id = parked["event"]["data"]["approval"]
    assert parked["event"]["data"]["tool"] == "exec"
    # The cluster has one worker: a second run is worked while the first waits.
    quick_id = start("s-quick", "Anything new?")
    quick = wait_until(
        lambda: Run.objects.for_tenant(tenant_a).filter(pk=quick_id, status="completed").first()
    )
    assert quick.output == "Quick answer."
    assert Run.objects.for_tenant(tenant_a).get(pk=waiting_id).status == "waiting"
    assert PendingApproval.objects.for_tenant(tenant_a).get(pk=approval_id).status == "pending"

    decided = admin.post(f"/api/v1/approvals/{approval_id}/decide", {"decision": "allow-once"}, format="json")
    assert decided.status_code == 200, decided.content

    done = sock.wait_for(lambda m: event_of(m, topic="runs", type="run.finished", id=waiting_id), timeout=60)
    assert done["event"]["data"]["status"] == "completed"
    run = member.get(f"/api/v1/runs/{waiting_id}/").json()
    assert (run["status"], run["tool_calls"]) == ("completed", 1)
    assert run["output"].startswith("Read: made-it")
    assert (workspace_for(tenant=tenant_a, agent=agent, user_id="alice") / "approved.txt").exists()
