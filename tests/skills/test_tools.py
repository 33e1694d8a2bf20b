"""skill_search, use_skill and publish_skill, called the way agent loops call them:
POST /api/v1/runtime/execute."""

from __future__ import annotations

import os

import pytest

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.skills import services
from apps.skills.models import Skill, SkillActivation, SkillFile, SkillUse
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.toolkit.workspace import workspace_for

pytestmark = pytest.mark.django_db


def skill_md(name: str, description: str, triggers: str = "", body: str = "") -> str:
    lines = [f"name: {name}", f"description: {description}"]
    if triggers:
        lines.append(f"triggers: [{triggers}]")
    return "---\n" + "\n".join(lines) + "\n---\n" + (body or f"# {name}\n\nSteps of {name}.\n")


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def call(client, tool, args, user_id="", session_key=""):
    body = {
        "agent": "bot",
        "tool": tool,
        "args": args,
        "context": {"user_id": user_id, "session_key": session_key},
    }
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def add(tenant: Tenant, content: str, agent: Agent | None = None, enabled: bool = True) -> Skill:
    return services.skill_create(actor=Actor.system(tenant), content=content, agent=agent, enabled=enabled)


@pytest.fixture
def corpus(tenant_a: Tenant, agent: Agent) -> None:
    add(
        tenant_a,
        skill_md(
            "k8s-deploy",
            "Deploy a service to a Kubernetes cluster with kubectl and Helm.",
            "deploy to kubernetes",
            "# Deploying\n\nBuild the image, push it, then helm upgrade the release in the cluster.\n",
        ),
    )
    add(
        tenant_a,
        skill_md(
            "release-notes",
            "Write release notes from merged pull requests.",
            "release notes, changelog",
            "# Release notes\n\nGroup the pull requests by label; mention the deploy date.\n",
        ),
    )
    add(tenant_a, skill_md("sql-review", "Review SQL migrations for locks and long transactions."))
    add(tenant_a, skill_md("pdf-forms", "Fill PDF forms from a spreadsheet."))
    add(tenant_a, skill_md("old-deploy", "Deploy to kubernetes the old way.", "deploy"), enabled=False)


def test_an_empty_catalog_says_how_skills_are_added(member_a, agent):
    body = call(member_a, "skill_search", {"query": "deploy"})
    assert body["is_error"] is False
    assert body["for_llm"].startswith("No skills are available to this agent yet.")
    assert "publish_skill" in body["for_llm"]
    assert "/api/v1/skills/" in body["for_llm"]


def test_search_ranks_the_skill_that_fits_first(member_a, corpus):
    body = call(member_a, "skill_search", {"query": "deploying to a kubernetes cluster"})
    assert body["is_error"] is False, body
    lines = body["for_llm"].splitlines()
    assert lines[0] == "2 skills found; load one with use_skill(name):"
    assert lines[1].startswith(
        "- k8s-deploy: Deploy a service to a Kubernetes cluster with kubectl and Helm."
    )
    assert lines[2].startswith("- release-notes: ")  # "deploy" only in its body
    assert "old-deploy" not in body["for_llm"]  # disabled: invisible to tools
    notes = call(member_a, "skill_search", {"query": "changelog for the release", "limit": 1})
    assert notes["for_llm"].splitlines()[1].startswith("- release-notes: ")
    assert len(notes["for_llm"].splitlines()) == 2


def test_a_query_nothing_matches_says_so(member_a, corpus):
    body = call(member_a, "skill_search", {"query": "bake bread"})
    assert body["is_error"] is False
    assert body["for_llm"].startswith("No skill matches 'bake bread' (4 skills available). Try other words")
    assert body["for_llm"].endswith("a directory with a SKILL.md, registered with publish_skill.")


def test_bad_search_arguments_are_errors(member_a, corpus):
    assert call(member_a, "skill_search", {"query": "   "})["is_error"] is True
    assert call(member_a, "skill_search", {"query": "x" * 501})["is_error"] is True
    assert call(member_a, "skill_search", {"query": "deploy", "limit": 0})["is_error"] is True


def test_an_agents_own_skill_shadows_the_global_one_and_other_agents_do_not_see_it(
    member_a, tenant_a, agent, corpus
):
    own = add(
        tenant_a,
        skill_md(
            "k8s-deploy", "Our own way to deploy to kubernetes.", body="# Own\n\nUse the own pipeline.\n"
        ),
        agent=agent,
    )
    found = call(member_a, "skill_search", {"query": "kubernetes"})
    assert "- k8s-deploy: Our own way to deploy to kubernetes." in found["for_llm"]
    assert "kubectl and Helm" not in found["for_llm"]
    loaded = call(member_a, "use_skill", {"name": "k8s-deploy"})
    assert "Use the own pipeline." in loaded["for_llm"]
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    body = {"agent": "other", "tool": "use_skill", "args": {"name": "k8s-deploy"}}
    other = member_a.post("/api/v1/runtime/execute", body, format="json").json()
    assert "helm upgrade" in other["for_llm"]
    assert own.pk not in SkillUse.objects.for_tenant(tenant_a).filter(agent__key="other").values_list(
        "skill_id", flat=True
    )


def test_another_tenants_skills_are_never_found(member_a, outsider, agent, corpus, tenant_b):
    tenant_services.agent_create(actor=Actor.system(tenant_b), key="bot", name="B's bot")
    body = call(outsider, "skill_search", {"query": "kubernetes deploy"})
    assert body["for_llm"].startswith("No skills are available to this agent yet.")
    used = call(outsider, "use_skill", {"name": "k8s-deploy"})
    assert used["is_error"] is True
    assert "helm" not in used["for_llm"]


def test_use_skill_records_activates_and_returns_the_body_and_files(member_a, tenant_a, agent):
    skill, _ = services.skill_publish(
        actor=Actor.system(tenant_a),
        agent=agent,
        content=skill_md("pdf-forms", "Fill PDF forms.", body="# PDF forms\n\nRun scripts/fill.py.\n"),
        files=[("scripts/fill.py", "print('fill')\n"), ("reference.md", "Field names.")],
        published_from="skills/pdf-forms",
    )
    body = call(member_a, "use_skill", {"name": "pdf-forms"}, user_id="alice", session_key="chat-1")
    assert body["is_error"] is False, body
    text = body["for_llm"]
    assert text.startswith("Skill pdf-forms loaded.")
    assert "# PDF forms\n\nRun scripts/fill.py." in text
    assert "description:" not in text  # the frontmatter is not part of it
    assert "- reference.md (12 characters)" in text
    assert "- scripts/fill.py (14 characters)" in text

    use = SkillUse.objects.for_tenant(tenant_a).get()
    assert (use.skill_id, use.skill_name, use.agent_id, use.user_id, use.session_key, use.how) == (
        skill.pk,
        "pdf-forms",
        agent.pk,
        "alice",
        "chat-1",
        "manual",
    )
    activation = SkillActivation.objects.for_tenant(tenant_a).get()
    assert (activation.skill_id, activation.user_id, activation.session_key, activation.manual) == (
        skill.pk,
        "alice",
        "chat-1",
        True,
    )
    assert activation.last_used_turn is None  # counted from the next turn the loop reports
    assert (
        AuditEvent.objects.for_tenant(tenant_a).filter(verb="skill.used", target_id=str(skill.pk)).count()
        == 1
    )

    file = call(member_a, "use_skill", {"name": "pdf-forms", "file": "scripts/fill.py"})
    assert file["for_llm"] == "print('fill')\n"
    missing = call(member_a, "use_skill", {"name": "pdf-forms", "file": "nope.md"})
    assert missing["is_error"] is True
    assert "reference.md, scripts/fill.py" in missing["for_llm"]


def test_an_unknown_skill_names_close_matches(member_a, corpus):
    body = call(member_a, "use_skill", {"name": "release-note"})
    assert body["is_error"] is True
    assert body["for_llm"].startswith("unknown skill 'release-note'. Did you mean 'release-notes'?")
    assert "skill_search" in body["for_llm"]
    far = call(member_a, "use_skill", {"name": "zzz"})
    assert far["for_llm"] == "unknown skill 'zzz'. Use skill_search to find skills by what they do."
    disabled = call(member_a, "use_skill", {"name": "old-deploy"})
    assert disabled["is_error"] is True


# --- publish_skill ------------------------------------------------------------------------------------


@pytest.fixture
def workspace(tenant_a: Tenant, agent: Agent):
    return workspace_for(tenant=tenant_a, agent=agent, user_id="")


def write(member_a, path: str, content: str) -> None:
    assert call(member_a, "write_file", {"path": path, "content": content})["is_error"] is False


def test_publish_registers_a_workspace_directory_and_updates_it(member_a, tenant_a, agent, workspace):
    write(
        member_a, "skills/deploy/SKILL.md", skill_md("deploy", "Deploy the app.", "ship it", "# Deploy v1\n")
    )
    write(member_a, "skills/deploy/scripts/run.sh", "#!/bin/sh\necho deploy\n")
    write(member_a, "skills/deploy/README.md", "Read me.")
    (workspace / "skills" / "deploy" / ".hidden").write_text("skip me")

    body = call(member_a, "publish_skill", {"path": "skills/deploy"})
    assert body["is_error"] is False, body
    assert body["for_llm"].startswith("Published the skill deploy from skills/deploy with 2 other files.")
    assert "Skipped hidden entries: .hidden." in body["for_llm"]
    skill = Skill.objects.for_tenant(tenant_a).get()
    assert (skill.name, skill.agent_id, skill.source, skill.published_from, skill.version) == (
        "deploy",
        agent.pk,
        "publish",
        "skills/deploy",
        1,
    )
    assert skill.triggers == ["ship it"]
    files = dict(SkillFile.objects.for_tenant(tenant_a).values_list("path", "content"))
    assert files == {"README.md": "Read me.", "scripts/run.sh": "#!/bin/sh\necho deploy\n"}
    assert (
        AuditEvent.objects.for_tenant(tenant_a).filter(verb="skill.created", target_id=str(skill.pk)).exists()
    )

    write(member_a, "skills/deploy/SKILL.md", skill_md("deploy", "Deploy the app, v2.", body="# Deploy v2\n"))
    (workspace / "skills" / "deploy" / "README.md").unlink()
    again = call(member_a, "publish_skill", {"path": "skills/deploy/SKILL.md"})  # the file names its folder
    assert again["for_llm"].startswith(
        "Updated (version 2) the skill deploy from skills/deploy with 1 other file."
    )
    skill.refresh_from_db()
    assert (skill.version, skill.description) == (2, "Deploy the app, v2.")
    assert list(SkillFile.objects.for_tenant(tenant_a).values_list("path", flat=True)) == ["scripts/run.sh"]
    assert "# Deploy v2" in call(member_a, "use_skill", {"name": "deploy"})["for_llm"]


@pytest.mark.parametrize("path", ["../../etc", "/etc", "../other-agent", ".ssh"])
def test_publish_refuses_paths_outside_the_workspace(member_a, tenant_a, agent, path):
    body = call(member_a, "publish_skill", {"path": path})
    assert body["is_error"] is True
    assert "access denied" in body["for_llm"] or "not found" in body["for_llm"]
    assert not Skill.objects.for_tenant(tenant_a).exists()


def test_publish_refuses_symlinks_inside_and_as_the_directory(member_a, tenant_a, agent, workspace, tmp_path):
    write(member_a, "skills/linked/SKILL.md", skill_md("linked", "Has a link."))
    outside = tmp_path / "secret.txt"
    outside.write_text("host secret")
    os.symlink(outside, workspace / "skills" / "linked" / "notes.md")
    body = call(member_a, "publish_skill", {"path": "skills/linked"})
    assert body["is_error"] is True
    assert body["for_llm"] == (
        "skills/linked/notes.md is a symlink; publish_skill does not follow symlinks. "
        "Put the file itself there."
    )
    os.symlink(tmp_path, workspace / "skills" / "outside")
    escaped = call(member_a, "publish_skill", {"path": "skills/outside"})
    assert escaped["is_error"] is True
    assert "access denied" in escaped["for_llm"]
    assert "host secret" not in escaped["for_llm"] + body["for_llm"]
    assert not Skill.objects.for_tenant(tenant_a).exists()


def test_publish_refuses_what_is_not_a_skill(member_a, tenant_a, agent, workspace):
    write(member_a, "skills/empty/notes.md", "no SKILL.md here")
    body = call(member_a, "publish_skill", {"path": "skills/empty"})
    assert body["for_llm"].startswith("no SKILL.md in skills/empty.")

    write(member_a, "skills/bad/SKILL.md", "---\nname: Bad Name\ndescription: d\n---\n")
    bad = call(member_a, "publish_skill", {"path": "skills/bad"})
    assert bad["is_error"] is True
    assert bad["for_llm"].startswith("skills/bad/SKILL.md: name: 'Bad Name' is not a valid skill name")

    write(member_a, "skills/many/SKILL.md", skill_md("many", "Many files."))
    for number in range(21):
        write(member_a, f"skills/many/f{number:02}.md", "x")
    many = call(member_a, "publish_skill", {"path": "skills/many"})
    assert many["for_llm"] == "skills/many holds more than 20 files besides SKILL.md; a skill has at most 20."

    write(member_a, "skills/big/SKILL.md", skill_md("big", "Big file."))
    write(member_a, "skills/big/data.md", "x" * 64_001)
    big = call(member_a, "publish_skill", {"path": "skills/big"})
    assert (
        big["for_llm"]
        == "skills/big/SKILL.md: files: data.md has 64001 characters; a skill file holds at most 64000."
    )

    write(member_a, "skills/binary/SKILL.md", skill_md("binary", "Has a binary."))
    (workspace / "skills" / "binary" / "blob.bin").write_bytes(b"\x00\x01\x02")
    binary = call(member_a, "publish_skill", {"path": "skills/binary"})
    assert binary["for_llm"].startswith("skills/binary/blob.bin is a binary file")

    assert call(member_a, "publish_skill", {"path": "skills/missing"})["for_llm"].startswith(
        "directory not found"
    )
    assert call(member_a, "publish_skill", {"path": "skills/big/data.md"})["for_llm"].startswith(
        "skills/big/data.md is a file"
    )
    assert not Skill.objects.for_tenant(tenant_a).exists()


def test_publish_refuses_hardlinks(member_a, tenant_a, agent, workspace):
    write(member_a, "skills/linked/SKILL.md", skill_md("linked", "Has a hardlink."))
    write(member_a, "elsewhere.md", "shared text")
    os.link(workspace / "elsewhere.md", workspace / "skills" / "linked" / "copy.md")
    body = call(member_a, "publish_skill", {"path": "skills/linked"})
    assert body["is_error"] is True
    assert body["for_llm"].startswith("access denied: hardlinked file (link count 2)")
    assert not Skill.objects.for_tenant(tenant_a).exists()
