"""Subagents through the spawn tool (POST /api/v1/runtime/execute) and the runner: spawn, list, cancel
(id, last, all), steer, every limit, run (sync) against the scripted provider with the subagent deny
lists, and the debounced announcement of results to the parent's session."""

from __future__ import annotations

import time
from typing import Any

import pytest

from apps.runs import runner, subagents
from apps.runs.models import Run
from apps.sessions.models import Session, SessionMessage
from tests.llm.fake_provider import chat_answer

pytestmark = pytest.mark.django_db


def spawn(client, session_key="chat-1", depth=0, **args: Any) -> dict[str, Any]:
    body = {
        "agent": "bot",
        "tool": "spawn",
        "args": args,
        "context": {"session_key": session_key, "user_id": "alice", "subagent_depth": depth},
    }
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def children(tenant, status=None):
    runs = Run.objects.for_tenant(tenant).filter(kind="subagent")
    return runs.filter(status=status) if status else runs


def test_spawn_list_cancel_and_steer_with_the_per_session_limit(member_a, agent, tenant_a):
    ids = []
    for n in range(subagents.MAX_CHILDREN):
        answer = spawn(member_a, task=f"task {n}", label=f"worker {n}")
        assert answer["is_error"] is False, answer
        assert answer["for_llm"].startswith("Spawned subagent ")
        ids.append(answer["for_llm"].split()[2])
    sixth = spawn(member_a, task="one too many")
    assert sixth["is_error"] is True
    assert "5/5 subagents at work" in sixth["for_llm"]
    assert children(tenant_a).count() == 5
    # Each works in its own session under the parent's, as the same user, at depth 1, 20 iterations.
    run = children(tenant_a).get(pk=ids[0])
    assert run.session.parent.key == "chat-1"
    assert run.session.key.startswith("chat-1:sub:")
    assert (run.user_id, run.depth, run.max_iterations, run.label) == ("alice", 1, 20, "worker 0")

    listed = spawn(member_a, action="list")["for_llm"]
    assert listed.startswith("5 subagents of this session:")
    assert all(i in listed for i in ids)

    last = spawn(member_a, action="cancel", id="last")
    assert last["for_llm"] == f"Cancelled 1 subagent: {ids[4]}."
    one = spawn(member_a, action="cancel", id=ids[0])
    assert one["for_llm"] == f"Cancelled 1 subagent: {ids[0]}."
    again = spawn(member_a, action="cancel", id=ids[0])
    assert again["is_error"] is True
    assert "already cancelled" in again["for_llm"]
    assert spawn(member_a, action="cancel", id="nope")["is_error"] is True

    started = time.monotonic()
    steered = spawn(member_a, action="steer", id=ids[1], message="do it differently")
    assert time.monotonic() - started >= subagents.STEER_SETTLE_SECONDS
    assert steered["is_error"] is False, steered
    replacement = children(tenant_a).exclude(pk__in=ids).get()
    assert (replacement.input, replacement.label, replacement.status) == (
        "do it differently",
        "worker 1",
        "queued",
    )
    assert children(tenant_a).get(pk=ids[1]).status == "cancelled"

    everything = spawn(member_a, action="cancel", id="all")
    assert everything["for_llm"].startswith("Cancelled 3 subagents:")
    assert not children(tenant_a).filter(status__in=["queued", "running"]).exists()
    assert "cancelled" in spawn(member_a, action="list")["for_llm"]


def test_the_tenant_wide_limit_and_the_depth_limit(member_a, agent, tenant_a):
    for n in range(subagents.MAX_CONCURRENT):
        session = f"chat-{n // 4}"  # two sessions of four: under the per-session limit
        assert spawn(member_a, session_key=session, task=f"task {n}")["is_error"] is False
    full = spawn(member_a, session_key="chat-9", task="one more")
    assert full["is_error"] is True
    assert (
        f"at capacity ({subagents.MAX_CONCURRENT}/{subagents.MAX_CONCURRENT} in this tenant)"
        in full["for_llm"]
    )
    # A subagent (depth 1, the maximum) is not given spawn at all.
    leaf = spawn(member_a, session_key="chat-9", depth=1, task="nested")
    assert leaf["is_error"] is True
    assert children(tenant_a).count() == subagents.MAX_CONCURRENT


def test_bad_spawn_arguments_are_clear_errors(member_a, agent):
    assert "task is required" in spawn(member_a, task=" ")["for_llm"]
    assert "is not one of" in spawn(member_a, action="explode", task="x")["for_llm"]
    assert "steer needs the id" in spawn(member_a, action="steer", id="all", message="x")["for_llm"]
    no_session = member_a.post(
        "/api/v1/runtime/execute", {"agent": "bot", "tool": "spawn", "args": {"task": "x"}}, format="json"
    ).json()
    assert "no session key" in no_session["for_llm"]


def test_run_waits_for_the_subagent_which_lacks_the_denied_tools(member_a, agent, provider, fake, tenant_a):
    requests: list[dict[str, Any]] = []

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        return chat_answer("The answer is 42.")

    fake.chat = chat
    answer = spawn(member_a, action="run", task="Find the answer.")
    assert answer["is_error"] is False, answer
    assert answer["for_llm"].endswith("The answer is 42.")
    offered = {t["function"]["name"] for t in requests[0]["tools"]}
    assert "read_file" in offered
    assert not offered & {
        "spawn",
        "memory_search",
        "session_status",
        "sessions_send",
        "sessions_list",
        "cron",
    }
    run = children(tenant_a).get()
    assert (run.status, run.announced) == ("completed", True)
    assert not SessionMessage.objects.for_tenant(tenant_a).filter(session__key="chat-1").exists()


def test_results_finishing_together_are_announced_in_one_message(member_a, agent, provider, fake, tenant_a):
    fake.chat = lambda request: chat_answer(f"done: {request['messages'][-1]['content']}")
    spawn(member_a, task="alpha", label="a")
    spawn(member_a, task="beta", label="b")
    for run in children(tenant_a).order_by("created_at"):
        runner.execute(run.pk, tenant_a.pk)  # as the worker would
    parent = Session.objects.for_tenant(tenant_a).get(key="chat-1")

    subagents.announce(str(tenant_a.pk), str(parent.pk))
    subagents.announce(str(tenant_a.pk), str(parent.pk))  # a second, late job finds nothing left

    [message] = SessionMessage.objects.for_tenant(tenant_a).filter(session=parent)
    assert (message.role, message.name, message.source) == ("user", "subagents", "subagent:announce")
    assert "“a” completed]\ndone: alpha" in message.content
    assert "“b” completed]\ndone: beta" in message.content
    assert set(children(tenant_a).values_list("announced", flat=True)) == {True}


def test_finished_subagents_are_archived_after_an_hour(member_a, agent, tenant_a):
    from datetime import timedelta

    from django.utils import timezone

    spawn(member_a, task="old")
    spawn(member_a, task="fresh")
    old, fresh = children(tenant_a).order_by("created_at")
    children(tenant_a).filter(pk=old.pk).update(
        status="completed", finished_at=timezone.now() - timedelta(minutes=61)
    )
    children(tenant_a).filter(pk=fresh.pk).update(status="completed", finished_at=timezone.now())
    assert subagents.archive() == 1
    listed = spawn(member_a, action="list")["for_llm"]
    assert str(fresh.pk) in listed
    assert str(old.pk) not in listed


def test_with_the_external_runner_a_subagent_waits_to_be_claimed(member_a, agent, tenant_a):
    from apps.accounts import services as tenant_services
    from apps.tenants.actors import Actor

    tenant_services.tenant_update(actor=Actor.system(tenant_a), changes={"settings": {"runner": "external"}})
    answer = spawn(member_a, action="run", task="Look it up.")
    assert answer["is_error"] is False
    assert "queued for this agent's external runner" in answer["for_llm"]
    run = children(tenant_a).get()
    assert (run.runner, run.status) == ("external", "queued")
    claimed = member_a.post(f"/api/v1/runs/{run.pk}/claim")
    assert claimed.json()["status"] == "running"


def test_a_parent_run_that_spawned_gets_a_follow_up_run_with_the_results(
    member_a, agent, provider, fake, tenant_a
):
    import json as jsonlib

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        last = request["messages"][-1]
        if last["role"] == "user" and last["content"] == "Plan the trip.":
            spawn_call = {"task": "find flights", "label": "flights"}
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "spawn", "arguments": jsonlib.dumps(spawn_call)},
            }
            return chat_answer("", tool_calls=[call])
        if last["role"] == "tool":
            return chat_answer("A subagent is looking for flights.")
        return chat_answer(f"Done: {last['content'][:40]}")

    fake.chat = chat
    parent = member_a.post(
        "/api/v1/agents/bot/runs", {"session_key": "trip", "message": "Plan the trip."}, format="json"
    ).json()
    assert parent["status"] == "completed", parent
    child = children(tenant_a).get()
    assert child.parent_id is not None
    assert str(child.parent_id) == parent["id"]
    runner.execute(child.pk, tenant_a.pk)  # the worker runs the subagent
    session = Session.objects.for_tenant(tenant_a).get(key="trip")

    subagents.announce(str(tenant_a.pk), str(session.pk))

    follow_up = Run.objects.for_tenant(tenant_a).filter(session=session, status="queued").get()
    assert follow_up.input.startswith("Your subagents have reported")
    announcement = SessionMessage.objects.for_tenant(tenant_a).filter(session=session, name="subagents").get()
    assert "“flights” completed]\nDone: find flights" in announcement.content
    runner.execute(follow_up.pk, tenant_a.pk)
    follow_up.refresh_from_db()
    assert follow_up.status == "completed"


def test_a_revoked_starter_still_gets_the_announcement_but_no_follow_up(tenant_a, agent, provider, fake):
    import json as jsonlib

    from apps.accounts import services as tenant_services
    from apps.tenants.actors import Actor
    from apps.tenants.models import ApiKey
    from apps.tenants.roles import Role
    from tests import factories

    raw = factories.make_api_key(tenant_a, Role.MEMBER)
    client = factories.key_client(raw)

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        last = request["messages"][-1]
        if last["role"] == "user" and last["content"] == "Plan.":
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "spawn", "arguments": jsonlib.dumps({"task": "dig"})},
            }
            return chat_answer("", tool_calls=[call])
        return chat_answer("ok")

    fake.chat = chat
    assert (
        client.post(
            "/api/v1/agents/bot/runs", {"session_key": "s", "message": "Plan."}, format="json"
        ).json()["status"]
        == "completed"
    )
    child = children(tenant_a).get()
    runner.execute(child.pk, tenant_a.pk)
    key = ApiKey.objects.for_tenant(tenant_a).get()  # the only key: the one that started the run
    tenant_services.api_key_revoke(actor=Actor.system(tenant_a), api_key=key)
    session = Session.objects.for_tenant(tenant_a).get(key="s")

    subagents.announce(str(tenant_a.pk), str(session.pk))

    assert SessionMessage.objects.for_tenant(tenant_a).filter(session=session, name="subagents").count() == 1
    assert not Run.objects.for_tenant(tenant_a).filter(session=session, status="queued").exists()
