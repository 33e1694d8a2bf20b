"""The loading rules, through POST /api/v1/agents/<key>/skills/context (what an agent loop asks once per
turn) and use_skill through POST /api/v1/runtime/execute: TTLs by turns, at most four active with the
least recently used dropped, the 16,000-character budget, and triggers matched in the user's message."""

from __future__ import annotations

import pytest

from apps.accounts import services as tenant_services
from apps.skills import loading, services
from apps.skills.models import Skill, SkillActivation, SkillUse
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api.personas import check_personas, error

pytestmark = pytest.mark.django_db

CONTEXT = "/api/v1/agents/bot/skills/context"


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def add(tenant: Tenant, name: str, triggers: str = "", body: str = "", agent: Agent | None = None) -> Skill:
    content = f"---\nname: {name}\ndescription: The {name} skill.\ntriggers: [{triggers}]\n---\n"
    return services.skill_create(
        actor=Actor.system(tenant), content=content + (body or f"Do {name}."), agent=agent
    )


def context(client, turn: int, message: str = "", session_key: str = "s1", user_id: str = "alice"):
    body = {"session_key": session_key, "user_id": user_id, "turn": turn, "message": message}
    response = client.post(CONTEXT, body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def active(answer) -> dict[str, tuple[bool, int | None]]:
    return {row["name"]: (row["manual"], row["expires_after_turn"]) for row in answer["active"]}


def use(client, name: str, session_key: str = "s1", user_id: str = "alice"):
    body = {
        "agent": "bot",
        "tool": "use_skill",
        "args": {"name": name},
        "context": {"session_key": session_key, "user_id": user_id},
    }
    answer = client.post("/api/v1/runtime/execute", body, format="json").json()
    assert answer["is_error"] is False, answer
    return answer


def test_a_manual_skill_lasts_six_turns_after_its_last_use(member_a, tenant_a, agent):
    add(tenant_a, "deploy", body="# Deploy\n\nShip it.")
    assert context(member_a, 0)["active"] == []
    use(member_a, "deploy")
    first = context(member_a, 3)
    assert first["active"] == [
        {
            "name": "deploy",
            "manual": True,
            "expires_after_turn": 3 + loading.MANUAL_TTL_TURNS,
            "content": "# Deploy\n\nShip it.",
            "truncated_reason": None,
        }
    ]
    assert first["budget"] == {"used": len("# Deploy\n\nShip it."), "limit": 16_000}
    assert active(context(member_a, 9)) == {"deploy": (True, 9)}
    assert context(member_a, 10)["active"] == []
    assert not SkillActivation.objects.for_tenant(tenant_a).exists()  # expired rows are deleted


def test_an_auto_matched_skill_lasts_four_turns_and_a_trigger_renews_it(member_a, tenant_a, agent):
    add(tenant_a, "release-notes", triggers="release notes, changelog")
    answer = context(member_a, 2, "Can you write the Release  Notes for v2?")
    assert answer["hints"] == [
        {"name": "release-notes", "description": "The release-notes skill.", "trigger": "release notes"}
    ]
    assert active(answer) == {"release-notes": (False, 2 + loading.AUTO_TTL_TURNS)}
    assert active(context(member_a, 5, "and the changelog too")) == {"release-notes": (False, 9)}
    assert active(context(member_a, 9, "thanks")) == {"release-notes": (False, 9)}
    assert context(member_a, 10)["active"] == []
    uses = list(SkillUse.objects.for_tenant(tenant_a).values_list("how", "user_id", "session_key"))
    assert uses == [("auto", "alice", "s1")]  # renewing is not a new use


def test_triggers_match_whole_words_only(member_a, tenant_a, agent):
    add(tenant_a, "golang", triggers="go")
    answer = context(member_a, 0, "this looks good, let's gopher around")
    assert answer["hints"] == []
    assert answer["active"] == []
    assert [hint["name"] for hint in context(member_a, 1, "Let's GO!")["hints"]] == ["golang"]


def test_conversations_are_separate(member_a, tenant_a, agent):
    add(tenant_a, "deploy", triggers="deploy")
    context(member_a, 0, "deploy now", session_key="s1")
    assert context(member_a, 0, session_key="s2")["active"] == []
    assert context(member_a, 0, session_key="s1", user_id="bob")["active"] == []
    assert [row["name"] for row in context(member_a, 1, session_key="s1")["active"]] == ["deploy"]


def test_at_most_four_are_active_and_the_least_recently_used_goes(member_a, tenant_a, agent):
    for number in range(5):
        add(tenant_a, f"skill-{number}", triggers=f"word{number}")
    for turn in range(4):
        context(member_a, turn, f"please word{turn}")
    assert set(active(context(member_a, 4))) == {"skill-0", "skill-1", "skill-2", "skill-3"}
    context(member_a, 4, "now word0 again")  # skill-0 used again: skill-1 is the least recently used
    answer = context(member_a, 5, "and word4")
    assert set(active(answer)) == {"skill-0", "skill-2", "skill-3", "skill-4"}
    assert SkillActivation.objects.for_tenant(tenant_a).count() == 4


def test_manual_skills_outlive_auto_ones_used_at_the_same_turn(member_a, tenant_a, agent):
    for number in range(4):
        add(tenant_a, f"auto-{number}", triggers=f"word{number}")
    add(tenant_a, "manual-one")
    use(member_a, "manual-one")
    answer = context(member_a, 0, "word0 word1 word2 word3")
    names = set(active(answer))
    assert "manual-one" in names
    assert len(names) == 4
    assert active(answer)["manual-one"] == (True, loading.MANUAL_TTL_TURNS)


def test_bodies_beyond_the_budget_stay_active_without_content(member_a, tenant_a, agent):
    for name in ("big-a", "big-b", "big-c"):
        add(tenant_a, name, triggers=name.replace("-", " "), body=name[-1] * 7000)
    add(tenant_a, "small", triggers="small", body="tiny")
    context(member_a, 0, "big a")
    context(member_a, 1, "big b")
    answer = context(member_a, 2, "big c and small")
    rows = {row["name"]: row for row in answer["active"]}
    assert set(rows) == {"big-a", "big-b", "big-c", "small"}
    # Most recently used first: big-c and small (turn 2), big-b (turn 1), then big-a does not fit.
    assert [row["name"] for row in answer["active"]] == ["big-c", "small", "big-b", "big-a"]
    assert rows["big-a"]["content"] is None
    assert rows["big-a"]["truncated_reason"] == (
        "not injected: its 7000 characters do not fit the 16000-character budget of the active skills "
        "(1996 left); call use_skill to read it"
    )
    assert rows["big-c"]["content"] == "c" * 7000
    assert answer["budget"] == {"used": 14004, "limit": 16000}


def test_a_disabled_or_deleted_skill_is_no_longer_active(member_a, tenant_a, agent):
    first = add(tenant_a, "first", triggers="first")
    second = add(tenant_a, "second", triggers="second")
    context(member_a, 0, "first and second")
    services.skill_update(actor=Actor.system(tenant_a), skill=first, enabled=False)
    services.skill_delete(actor=Actor.system(tenant_a), skill=second)
    assert context(member_a, 1)["active"] == []
    assert context(member_a, 2, "first")["hints"] == []


def test_an_agents_own_skill_is_matched_instead_of_the_global_one(member_a, tenant_a, agent):
    add(tenant_a, "deploy", triggers="deploy", body="global way")
    add(tenant_a, "deploy", triggers="deploy", body="own way", agent=agent)
    answer = context(member_a, 0, "deploy")
    assert [(row["name"], row["content"]) for row in answer["active"]] == [("deploy", "own way")]


def test_bad_input_is_refused_with_the_field(member_a, agent):
    for body, field in [
        ({"turn": 1}, "session_key"),
        ({"session_key": "s", "turn": -1}, "turn"),
        ({"session_key": "s"}, "turn"),
        ({"session_key": "s", "turn": "x"}, "turn"),
        ({"session_key": "s", "turn": 1, "message": "m" * 32_001}, "message"),
        ({"session_key": "s" * 201, "turn": 1}, "session_key"),
        ({"session_key": "s", "turn": 1, "colour": "red"}, "colour"),
    ]:
        envelope = error(member_a.post(CONTEXT, body, format="json"), 400, "invalid")
        assert field in envelope["details"], (body, envelope)
    error(
        member_a.post("/api/v1/agents/nobody/skills/context", {"session_key": "s", "turn": 0}),
        404,
        "not_found",
    )


def test_personas(request, tenant_a, agent):
    add(tenant_a, "deploy", triggers="deploy", body="the deploy secret")
    check_personas(
        request,
        tenant_a,
        method="post",
        url=CONTEXT,
        body={"session_key": "s1", "turn": 0, "message": "deploy"},
        least="member",
        success=200,
        outsider_status=404,
        never_shown_to_outsider=("the deploy secret",),
    )
