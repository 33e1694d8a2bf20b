"""Reads of the task board: listing filters and order, pages of 30, per-chat and per-user narrowing,
task detail, and full-text search (query building, ranking, prefix matching, the vector hook)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.teams import board, selectors
from apps.teams.models import Task
from apps.teams.selectors import SelectorError
from tests.teams.conftest import Crew, make_crew

pytestmark = pytest.mark.django_db

S = Task.Status


def new(crew: Crew, subject: str = "Write the report", **extra) -> Task:  # type: ignore[no-untyped-def]
    return board.create_task(crew.team, actor=crew.as_lead, subject=subject, **extra)


def force_status(task: Task, status: str) -> None:
    Task.objects.for_tenant(task.tenant).filter(pk=task.pk).update(status=status)


def subjects(page: selectors.TaskPage) -> list[str]:
    return [t.subject for t in page.tasks]


@pytest.fixture
def every_status(crew):
    tasks = {}
    for status in S.values:
        task = new(crew, f"task {status}")
        force_status(task, status)
        tasks[status] = task
    return tasks


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("", {"pending", "in_progress", "blocked", "failed", "in_review", "stale"}),
        ("active", {"pending", "in_progress", "blocked", "failed", "in_review", "stale"}),
        ("completed", {"completed", "cancelled"}),
        ("in_review", {"in_review"}),
        ("all", set(S.values)),
    ],
)
def test_status_filters(crew, every_status, status, expected):
    page = selectors.task_list(team=crew.team, status=status)
    assert {t.status for t in page.tasks} == expected
    assert len(page.tasks) == len(expected)


def test_unknown_status_filter_is_refused(crew):
    with pytest.raises(SelectorError, match="status must be one of"):
        selectors.task_list(team=crew.team, status="done")


def test_order_is_priority_then_age(crew):
    low = new(crew, "low", priority=1)
    high = new(crew, "high", priority=9)
    also_low = new(crew, "also low", priority=1)
    page = selectors.task_list(team=crew.team)
    assert [t.pk for t in page.tasks] == [high.pk, low.pk, also_low.pk]


def test_pages_of_thirty_with_has_more(crew):
    for i in range(61):
        new(crew, f"task {i:02d}")
    first = selectors.task_list(team=crew.team, page=1)
    second = selectors.task_list(team=crew.team, page=2)
    third = selectors.task_list(team=crew.team, page=3)
    assert (len(first.tasks), first.has_more) == (30, True)
    assert (len(second.tasks), second.has_more) == (30, True)
    assert (len(third.tasks), third.has_more) == (1, False)
    assert subjects(first)[0] == "task 00"
    assert subjects(third) == ["task 60"]
    assert not set(subjects(first)) & set(subjects(second))
    with pytest.raises(SelectorError, match="page must be"):
        selectors.task_list(team=crew.team, page=0)


def test_chat_and_user_narrowing(crew):
    new(crew, "chat one, ann", chat_id="c1", user_id="ann")
    new(crew, "chat one, ben", chat_id="c1", user_id="ben")
    new(crew, "chat two, ann", chat_id="c2", user_id="ann")
    assert sorted(subjects(selectors.task_list(team=crew.team, chat_id="c1"))) == [
        "chat one, ann",
        "chat one, ben",
    ]
    assert sorted(subjects(selectors.task_list(team=crew.team, user_id="ann"))) == [
        "chat one, ann",
        "chat two, ann",
    ]
    assert subjects(selectors.task_list(team=crew.team, chat_id="c1", user_id="ben")) == ["chat one, ben"]
    assert len(selectors.task_list(team=crew.team).tasks) == 3


def test_listing_never_shows_another_team_or_tenant(crew, tenant_a, tenant_b):
    new(crew, "ours")
    other = make_crew(tenant_a, "Others")
    board.create_task(other.team, actor=other.as_lead, subject="theirs")
    foreign = make_crew(tenant_b, "Builders")
    board.create_task(foreign.team, actor=foreign.as_lead, subject="foreign")
    assert subjects(selectors.task_list(team=crew.team, status="all")) == ["ours"]


def test_blockers_are_listed_with_the_tasks(crew):
    first = new(crew, "first")
    waiting = new(crew, "waiting", blocked_by=[first.pk])
    page = selectors.task_list(team=crew.team)
    assert set(page.blockers) == {first.pk}
    assert page.blockers[first.pk].subject == "first"
    assert waiting.pk in [t.pk for t in page.tasks]


def test_team_for_agent(crew, tenant_a):
    assert selectors.team_for_agent(tenant=tenant_a, agent=crew.lead) == crew.team
    assert selectors.team_for_agent(tenant=tenant_a, agent=crew.alice) == crew.team
    from apps.accounts import services
    from apps.tenants.actors import Actor

    loner = services.agent_create(actor=Actor.system(tenant_a), key="loner", name="Loner")
    assert selectors.team_for_agent(tenant=tenant_a, agent=loner) is None


# --- detail -------------------------------------------------------------------------------------------------


def test_detail_has_comments_events_attachments_and_a_truncated_result(crew):
    task = new(crew)
    board.claim(crew.team, task.pk, agent=crew.alice, actor=crew.as_alice)
    board.comment(crew.team, task.pk, actor=crew.as_lead, text="looks good")
    board.attach(crew.team, task.pk, path="out/report.md", actor=crew.as_alice)
    board.complete(crew.team, task.pk, result="x" * 9000, actor=crew.as_alice)
    detail = selectors.task_detail(team=crew.team, task_id=task.pk)
    assert detail is not None
    assert detail.result == "x" * 8000 + "…"
    assert [c.content for c in detail.comments] == ["looks good"]
    assert [e.event_type for e in detail.events] == [
        "created",
        "claimed",
        "commented",
        "attachment_added",
        "completed",
    ]
    assert [a.path for a in detail.attachments] == ["out/report.md"]


def test_detail_of_another_team_or_a_bad_id_is_none(crew, tenant_a):
    other = make_crew(tenant_a, "Others")
    theirs = board.create_task(other.team, actor=other.as_lead, subject="theirs")
    assert selectors.task_detail(team=crew.team, task_id=theirs.pk) is None
    assert selectors.task_detail(team=crew.team, task_id="T-001") is None


# --- search -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("deploy api", "deploy:* & api:*"),
        ("  Deploy!!  the (API)?  ", "Deploy:* & the:* & API:*"),
        ("front-end build_step", "front:* & end:* & build_step:*"),
        ("café 2026", "café:* & 2026:*"),
        ("a & b | !c", "a:* & b:* & c:*"),
        ("':* <-> &", ""),
    ],
)
def test_search_terms(query, terms):
    assert selectors.search_terms(query) == terms


def test_search_ranks_better_matches_first_and_matches_prefixes(crew):
    once = new(crew, "Deploy the service", description="staging only")
    twice = new(crew, "Deploy deployment scripts", description="deploy to production, deploy again")
    new(crew, "Write the report")
    result = selectors.task_search(team=crew.team, query="depl")
    assert result.mode == "fts"
    assert result.terms == "depl:*"
    assert [h.task.pk for h in result.hits] == [twice.pk, once.pk]
    assert result.hits[0].score > result.hits[1].score > 0


def test_search_requires_every_word(crew):
    both = new(crew, "Deploy the API", description="gateway")
    new(crew, "Deploy the frontend")
    result = selectors.task_search(team=crew.team, query="deploy api")
    assert [h.task.pk for h in result.hits] == [both.pk]
    assert selectors.task_search(team=crew.team, query="gateway").hits[0].task.pk == both.pk


def test_search_limit_user_filter_and_team_scope(crew, tenant_a):
    for i in range(8):
        new(crew, f"report {i}", user_id="ann" if i % 2 else "ben")
    other = make_crew(tenant_a, "Others")
    board.create_task(other.team, actor=other.as_lead, subject="report elsewhere")
    assert len(selectors.task_search(team=crew.team, query="report").hits) == 5
    anns = selectors.task_search(team=crew.team, query="report", user_id="ann", limit=10).hits
    assert sorted(h.task.subject for h in anns) == ["report 1", "report 3", "report 5", "report 7"]
    assert "report elsewhere" not in [
        h.task.subject for h in selectors.task_search(team=crew.team, query="elsewhere").hits
    ]


def test_search_refuses_empty_queries(crew):
    with pytest.raises(SelectorError, match="query is required"):
        selectors.task_search(team=crew.team, query="   ")
    with pytest.raises(SelectorError, match="no searchable words"):
        selectors.task_search(team=crew.team, query="!!! ???")


def test_search_merges_vector_similarity_when_an_embedding_is_available(crew, monkeypatch):
    text_match = new(crew, "Quarterly report", description="numbers")
    meaning_match = new(crew, "Summarise the finances")
    unrelated = new(crew, "Paint the fence")
    tenant = crew.team.tenant
    Task.objects.for_tenant(tenant).filter(pk=text_match.pk).update(embedding=[0.0, 1.0, 0.0])
    Task.objects.for_tenant(tenant).filter(pk=meaning_match.pk).update(embedding=[1.0, 0.0, 0.0])
    Task.objects.for_tenant(tenant).filter(pk=unrelated.pk).update(embedding=[0.0, 0.0, 1.0])
    new(crew, "Other model's vector")  # no embedding: only full text can find it
    monkeypatch.setattr(selectors, "embed", lambda text: [0.9, 0.1, 0.0])

    result = selectors.task_search(team=crew.team, query="report")
    assert result.mode == "hybrid"
    by_id = {h.task.pk: h for h in result.hits}
    # 0.7 x similarity outweighs 0.3 x the full-text rank.
    assert result.hits[0].task.pk == meaning_match.pk
    assert by_id[text_match.pk].fts_rank == 1.0
    assert by_id[text_match.pk].score == pytest.approx(0.3 + 0.7 * by_id[text_match.pk].similarity)
    assert by_id[unrelated.pk].similarity == pytest.approx(0.0, abs=1e-6)


def test_stale_tasks_list_like_any_other(crew):
    task = new(crew, "old")
    Task.objects.for_tenant(task.tenant).filter(pk=task.pk).update(
        updated_at=timezone.now() - timedelta(hours=3)
    )
    board.mark_stale(task.tenant)
    assert [t.status for t in selectors.task_list(team=crew.team).tasks] == [S.STALE]
