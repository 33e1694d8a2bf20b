"""Concurrent calls of one conversation (an agent loop retrying, or several loops of one user): a
trigger activates a skill once and records one use; concurrent publishes of one skill keep one row."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection

from apps.accounts import services as tenant_services
from apps.skills import loading, services
from apps.skills.models import Skill, SkillActivation, SkillFile, SkillUse
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant

pytestmark = pytest.mark.django_db(transaction=True)

CALLERS = 4


def run_together(work: Callable[[int], object]) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(CALLERS)

    def worker(index: int) -> None:
        try:
            start.wait()
            work(index)
        except BaseException as error:  # reported by the test, in its thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(CALLERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_one_trigger_from_concurrent_calls_activates_once(tenant_a: Tenant):
    system = Actor.system(tenant_a)
    agent = tenant_services.agent_create(actor=system, key="bot", name="Bot")
    services.skill_create(
        actor=system, content="---\nname: deploy\ndescription: d\ntriggers: [deploy]\n---\nx"
    )

    answers: list[loading.SkillContext] = []
    errors = run_together(
        lambda index: answers.append(
            loading.skill_context(
                actor=system, agent=agent, user_id="ann", session_key="s1", turn=3, message="deploy it"
            )
        )
    )

    assert not errors, errors
    assert [[a.name for a in answer.active] for answer in answers] == [["deploy"]] * CALLERS
    assert SkillActivation.objects.for_tenant(tenant_a).count() == 1
    assert list(SkillUse.objects.for_tenant(tenant_a).values_list("how", flat=True)) == ["auto"]


def test_concurrent_publishes_of_one_skill_keep_one_row(tenant_a: Tenant):
    system = Actor.system(tenant_a)
    agent = tenant_services.agent_create(actor=system, key="bot", name="Bot")

    def publish(index: int) -> None:
        services.skill_publish(
            actor=system,
            agent=agent,
            content=f"---\nname: shared\ndescription: version from caller {index}\n---\nbody",
            files=[(f"file-{index}.md", "x")],
            published_from="skills/shared",
        )

    errors = run_together(publish)

    assert not errors, errors
    skill = Skill.objects.for_tenant(tenant_a).get()
    assert skill.version == CALLERS  # created once, then updated by each other caller
    files = list(SkillFile.objects.for_tenant(tenant_a).values_list("path", flat=True))
    assert files == [f"file-{skill.description[-1]}.md"]  # the files of the version that was kept
