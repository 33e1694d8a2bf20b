"""Runs of the built-in runner against a scripted OpenAI-compatible server: tool calls through the
pipeline, the final-iteration rule, refusals read by the model, failures, cancellation and bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.audit.models import ToolCall
from apps.context_files import services as context_services
from apps.runs.models import Run
from apps.runs.runner import FINAL_ITERATION
from apps.sessions.models import SessionMessage
from apps.tenants.actors import Actor
from apps.toolkit.workspace import workspace_for
from tests.dashboard.conftest import member  # noqa: F401
from tests.llm.fake_provider import chat_answer, scripted
from tests.llm.fake_provider import tool_call as call

pytestmark = pytest.mark.django_db


def start(client, **body: Any):
    payload = {
        "session_key": "chat-1",
        "message": "Write a note and tell me the time.",
        "user_id": "alice",
        **body,
    }
    return client.post("/api/v1/agents/bot/runs", payload, format="json")


def test_a_run_calls_three_tools_through_the_pipeline_and_finishes(member_a, agent, provider, fake, tenant_a):
    fake.chat = scripted(
        chat_answer("", tool_calls=[call("datetime", {})]),
        chat_answer(
            "Saving.",
            tool_calls=[
                call("write_file", {"path": "note.txt", "content": "remember the milk"}),
                call("read_file", {"path": "note.txt"}, 2),
            ],
        ),
        chat_answer("Done: the note says remember the milk."),
    )

    response = start(member_a)

    assert response.status_code == 201, response.content
    run = response.json()
    assert (run["status"], run["iterations"], run["tool_calls"]) == ("completed", 3, 3)
    assert run["output"] == "Done: the note says remember the milk."
    assert (run["input_tokens"], run["output_tokens"], run["model"]) == (33, 21, "fake-chat-2026")
    # Each call went through the pipeline: recorded, and the file really written in alice's workspace.
    recorded = ToolCall.objects.for_tenant(tenant_a).order_by("created_at")
    assert [c.tool for c in recorded] == ["datetime", "write_file", "read_file"]
    assert all(c.session_key == "chat-1" and c.user_id == "alice" for c in recorded)
    ws = workspace_for(tenant=tenant_a, agent=agent, user_id="alice")
    assert (ws / "note.txt").read_text() == "remember the milk"
    # The model was offered the agent's tools and read the results of its calls.
    requests = fake.chat.requests
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= {"datetime", "read_file", "write_file"}
    last = requests[2]["messages"]
    assert last[-1]["role"] == "tool"
    assert "remember the milk" in last[-1]["content"]
    assert last[-1]["tool_call_id"] == "call_read_file_2"
    # The transcript is the session's, in order.
    roles = list(SessionMessage.objects.for_tenant(tenant_a).order_by("seq").values_list("role", "name"))
    assert roles == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "datetime"),
        ("assistant", ""),
        ("tool", "write_file"),
        ("tool", "read_file"),
        ("assistant", ""),
    ]
    assert member_a.get(f"/api/v1/runs/{run['id']}/").json()["status"] == "completed"


def test_the_last_iteration_withdraws_the_tools_and_asks_for_the_answer(
    member_a, agent, provider, fake, tenant_a
):
    fake.chat = scripted(chat_answer("", tool_calls=[call("datetime", {})]))

    run = start(member_a, max_iterations=3).json()

    assert (run["status"], run["iterations"], run["tool_calls"]) == ("completed", 3, 2)
    final = fake.chat.requests[2]
    assert "tools" not in final
    assert final["messages"][-1] == {"role": "user", "content": FINAL_ITERATION}
    assert "tools" in fake.chat.requests[1]


def test_a_refused_call_is_read_by_the_model_and_the_run_goes_on(member_a, agent, provider, fake):
    fake.chat = scripted(
        chat_answer("", tool_calls=[call("no_such_tool", {}), call("read_file", {"path": "x"}, 2)]),
        chat_answer(
            "",
            tool_calls=[
                {"id": "bad", "type": "function", "function": {"name": "datetime", "arguments": "{oops"}}
            ],
        ),
        chat_answer("I could not do it."),
    )
    run = start(member_a).json()
    assert run["status"] == "completed"
    second = fake.chat.requests[1]["messages"]
    assert second[-2]["role"] == "tool"
    assert "no_such_tool" in second[-2]["content"]
    third = fake.chat.requests[2]["messages"]
    assert "not JSON" in third[-1]["content"]


def test_the_system_prompt_is_the_agents_context_files(member_a, agent, provider, fake, tenant_a):
    system = Actor.system(tenant_a)
    context_services.agent_file_save(actor=system, agent=agent, name="SOUL.md", content="You are terse.")
    context_services.user_file_save(
        actor=system, agent=agent, user_id="alice", name="USER.md", content="Alice likes tea."
    )
    fake.chat = scripted(chat_answer("ok"))
    start(member_a)
    prompt = fake.chat.requests[0]["messages"][0]
    assert prompt["role"] == "system"
    assert "## SOUL.md\n\nYou are terse." in prompt["content"]
    assert "## USER.md\n\nAlice likes tea." in prompt["content"]


def test_a_pending_bootstrap_leaves_only_write_file(member_a, agent, provider, fake, tenant_a):
    context_services.agent_file_save(
        actor=Actor.system(tenant_a), agent=agent, name="BOOTSTRAP.md", content="Ask the user's name."
    )
    fake.chat = scripted(chat_answer("Hello! What is your name?"))
    start(member_a)
    request = fake.chat.requests[0]
    assert [t["function"]["name"] for t in request["tools"]] == ["write_file"]
    assert "## BOOTSTRAP.md\n\nAsk the user's name." in request["messages"][0]["content"]


def test_without_a_provider_the_run_fails_and_says_why(member_a, agent):
    run = start(member_a).json()
    assert run["status"] == "failed"
    assert "no provider" in run["error"]
    assert "Providers" in run["error"]


def test_a_provider_error_fails_the_run_without_the_key(member_a, agent, provider, fake):
    from tests.llm.fake_provider import KEY

    def broken(request: dict[str, Any]) -> dict[str, Any]:
        return {"choices": []}

    fake.chat = broken
    run = start(member_a).json()
    assert run["status"] == "failed"
    assert "no choices" in run["error"]
    assert KEY not in json.dumps(run)


def test_a_passing_provider_failure_is_tried_again_twice(member_a, agent, provider, fake, monkeypatch):
    from apps.runs import runner

    monkeypatch.setattr(runner, "RETRY_DELAYS", (0.0, 0.0))
    overloaded = {"__status__": 503, "error": {"message": "overloaded"}}
    fake.chat = scripted(
        overloaded, {"__status__": 429, "error": {"message": "slow down"}}, chat_answer("Fine.")
    )
    run = start(member_a).json()
    assert (run["status"], run["output"]) == ("completed", "Fine.")
    assert len(fake.chat.requests) == 3

    fake.chat = scripted(overloaded)
    run = start(member_a, session_key="chat-2").json()
    assert run["status"] == "failed"
    assert "HTTP 503" in run["error"]
    assert len(fake.chat.requests) == 3  # the first try and two more


def test_a_lasting_provider_failure_is_not_tried_again(member_a, agent, provider, fake, monkeypatch):
    from apps.runs import runner

    monkeypatch.setattr(runner, "RETRY_DELAYS", (0.0, 0.0))
    fake.chat = scripted({"__status__": 400, "error": {"message": "bad request"}})
    run = start(member_a).json()
    assert run["status"] == "failed"
    assert "HTTP 400" in run["error"]
    assert len(fake.chat.requests) == 1


def cancel_after_the_answer(monkeypatch, tenant) -> None:
    """The run is cancelled while the model writes its answer (the request is under way)."""
    from apps.runs import runner

    ask = runner._ask

    def asked(run, *args, **kwargs):
        result = ask(run, *args, **kwargs)
        Run.objects.for_tenant(tenant).filter(pk=run.pk).update(cancel_requested=True)
        return result

    monkeypatch.setattr(runner, "_ask", asked)


def test_a_cancel_asked_for_during_the_final_answer_cancels_the_run(
    member_a, agent, provider, fake, tenant_a, monkeypatch
):
    cancel_after_the_answer(monkeypatch, tenant_a)
    fake.chat = scripted(chat_answer("Here is my analysis."))
    run = start(member_a).json()
    assert (run["status"], run["error"]) == ("cancelled", "cancelled")


def test_calls_a_cancelled_run_left_unanswered_are_answered_for_the_next_run(
    member_a, agent, provider, fake, tenant_a, monkeypatch
):
    cancel_after_the_answer(monkeypatch, tenant_a)
    fake.chat = scripted(chat_answer("", tool_calls=[call("datetime", {}), call("datetime", {}, 2)]))
    assert start(member_a).json()["status"] == "cancelled"
    assert not ToolCall.objects.for_tenant(tenant_a).exists()

    monkeypatch.undo()
    fake.chat = scripted(chat_answer("Hello again."))
    assert start(member_a, message="Are you there?").json()["status"] == "completed"
    sent = fake.chat.requests[-1]["messages"]
    roles = [(m["role"], m.get("tool_call_id")) for m in sent[1:]]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("tool", "call_datetime_1"),
        ("tool", "call_datetime_2"),
        ("user", None),
    ]
    assert sent[3]["content"].startswith("No result: this call was not run")


def test_a_queued_run_is_cancelled_and_a_finished_one_cannot_be(member_a, agent, provider, fake, tenant_a):
    queued = start(member_a, wait=False)
    assert queued.status_code == 202
    run_id = queued.json()["id"]
    assert queued.json()["status"] == "queued"
    cancelled = member_a.post(f"/api/v1/runs/{run_id}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    again = member_a.post(f"/api/v1/runs/{run_id}/cancel")
    assert again.status_code == 409
    # The cancelled run never reaches the model, even if a worker picks it up later.
    from apps.runs import runner

    runner.execute(run_id, tenant_a.pk)
    assert fake.hits == []
    assert Run.objects.for_tenant(tenant_a).get(pk=run_id).status == "cancelled"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"message": ""}, "message"),
        ({"message": "x" * 100_001}, "message"),
        ({"max_iterations": 0}, "max_iterations"),
        ({"max_iterations": 51}, "max_iterations"),
        ({"session_key": ""}, "session_key"),
        ({"wait": "later"}, "wait"),
    ],
)
def test_bad_runs_are_400_by_field_with_nothing_started(
    member_a, agent, provider, fake, tenant_a, body, field
):
    response = start(member_a, **body)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["details"]
    assert not Run.objects.for_tenant(tenant_a).exists()
    assert fake.hits == []


def test_a_session_of_another_user_is_refused(member_a, agent, provider, fake):
    fake.chat = scripted(chat_answer("hi"))
    assert start(member_a).status_code == 201
    response = start(member_a, user_id="bob")
    assert response.status_code == 400
    assert "another user" in response.json()["error"]["message"]


def test_runs_are_listed_by_agent_and_status(member_a, agent, provider, fake):
    fake.chat = scripted(chat_answer("hi"))
    run_id = start(member_a).json()["id"]
    assert [r["id"] for r in member_a.get("/api/v1/agents/bot/runs").json()] == [run_id]
    assert [r["id"] for r in member_a.get("/api/v1/runs/?status=completed").json()["results"]] == [run_id]
    assert member_a.get("/api/v1/runs/?status=failed").json()["results"] == []
    assert member_a.get("/api/v1/runs/not-a-uuid/").status_code == 404


# --- external runners -----------------------------------------------------------------------------------


def test_an_external_runner_claims_a_run_and_reports_its_end(member_a, agent, tenant_a):
    refused = start(member_a, runner="external")
    assert refused.status_code == 400  # an external run is never waited for
    assert "wait" in refused.json()["error"]["details"]
    created = start(member_a, runner="external", wait=False)
    assert created.status_code == 202
    run = created.json()
    assert (run["runner"], run["status"]) == ("external", "queued")
    from apps.runs import runner

    runner.execute(run["id"], tenant_a.pk)  # the built-in runner leaves it alone
    assert Run.objects.for_tenant(tenant_a).get(pk=run["id"]).status == "queued"

    claimed = member_a.post(f"/api/v1/runs/{run['id']}/claim")
    assert claimed.json()["status"] == "running"
    assert member_a.post(f"/api/v1/runs/{run['id']}/claim").status_code == 409
    bad = member_a.post(f"/api/v1/runs/{run['id']}/finish", {"status": "great"}, format="json")
    assert bad.status_code == 400
    finished = member_a.post(
        f"/api/v1/runs/{run['id']}/finish",
        {"status": "completed", "output": "All done.", "iterations": 2, "tool_calls": 1, "output_tokens": 9},
        format="json",
    ).json()
    assert (finished["status"], finished["output"], finished["iterations"], finished["output_tokens"]) == (
        "completed",
        "All done.",
        2,
        9,
    )
    assert finished["finished_at"] is not None
    again = member_a.post(f"/api/v1/runs/{run['id']}/finish", {"status": "failed"}, format="json")
    assert again.status_code == 409


def test_an_external_runner_writes_its_runs_transcript(member_a, agent, tenant_a, member):  # noqa: F811
    run_id = start(member_a, runner="external", wait=False).json()["id"]
    messages = f"/api/v1/runs/{run_id}/messages"
    early = member_a.post(messages, {"role": "assistant", "content": "Too soon."}, format="json")
    assert early.status_code == 409
    assert "claim it first" in early.json()["error"]["message"]
    member_a.post(f"/api/v1/runs/{run_id}/claim")

    wrote = [
        {"role": "user", "content": "What time is it?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "datetime", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "content": "12:00 UTC", "name": "datetime", "tool_call_id": "c1"},
        {"role": "assistant", "content": "It is noon."},
    ]
    for body in wrote:
        response = member_a.post(messages, body, format="json")
        assert response.status_code == 201, response.content
    assert response.json()["source"] == f"run:{run_id}"
    bad = member_a.post(messages, {"role": "tool", "content": "no id"}, format="json")
    assert bad.status_code == 400

    # The run's page shows the transcript its runner wrote.
    page = member.get(f"/runs/{run_id}/")
    assert page.status_code == 200
    shown = [(item["message"].role, item["message"].content) for item in page.context["transcript"]]
    assert shown == [
        ("user", "What time is it?"),
        ("assistant", ""),
        ("tool", "12:00 UTC"),
        ("assistant", "It is noon."),
    ]
    assert page.context["transcript"][1]["calls"][0]["name"] == "datetime"
    assert b"It is noon." in page.content

    member_a.post(
        f"/api/v1/runs/{run_id}/finish", {"status": "completed", "output": "It is noon."}, format="json"
    )
    late = member_a.post(messages, {"role": "assistant", "content": "One more thing."}, format="json")
    assert late.status_code == 409


def test_a_builtin_run_cannot_be_claimed(member_a, agent, tenant_a):
    run_id = start(member_a, wait=False).json()["id"]
    response = member_a.post(f"/api/v1/runs/{run_id}/claim")
    assert response.status_code == 409
    assert "built-in runner" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ('{"timezone": 1e999}', "number"),
        ('{"timezone": NaN}', "NaN"),
        ('{"timezone": "UTC", "timezone": "Europe/Paris"}', "duplicate key"),
        ('{"timezone": "U\\u0000TC"}', "NUL character"),
    ],
)
def test_hostile_model_arguments_are_answered_to_the_model_and_the_run_goes_on(
    member_a, agent, provider, fake, tenant_a, arguments, said
):
    fake.chat = scripted(
        chat_answer(
            "",
            tool_calls=[
                {"id": "odd", "type": "function", "function": {"name": "datetime", "arguments": arguments}}
            ],
        ),
        chat_answer("Done."),
    )
    run = start(member_a).json()
    assert run["status"] == "completed", run
    answer = fake.chat.requests[1]["messages"][-1]
    assert answer["role"] == "tool"
    assert said in answer["content"]
    if said != "NUL character":  # refused before the pipeline: the model is asked to call again
        assert answer["content"].startswith("Error: the model's arguments for datetime are not accepted")
