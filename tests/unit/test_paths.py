"""resolve_path (SPEC B §8 + Nebo's sensitive paths + PathDenyable) and the workspace layout, on real
files, symlinks and hardlinks in a temporary directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.tenants.models import Agent
from apps.toolkit.workspace import (
    PathError,
    open_parent,
    open_read,
    resolve_path,
    safe_user_dir,
    workspace_for,
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A workspace with every kind of trap in it, next to an 'outside' directory with a secret."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    (tmp_path / "ws-evil").mkdir()  # shares the workspace's name as a prefix
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "a.md").write_text("hello")
    (ws / "deep" / "dir").mkdir(parents=True)
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]")
    (ws / ".github").mkdir()
    os.symlink(outside, ws / "link_out")  # absolute symlink out
    os.symlink("../outside", ws / "rel_out")  # relative symlink out
    os.symlink("/nonexistent-toolgate-target/x", ws / "broken_out")
    os.symlink("missing_inside", ws / "broken_in")
    os.symlink("loop_b", ws / "loop_a")
    os.symlink("loop_a", ws / "loop_b")
    os.symlink("self_loop", ws / "self_loop")
    os.symlink("notes", ws / "in_link")  # a directory symlink that stays inside
    os.symlink("notes/a.md", ws / "file_link")
    os.symlink("/", ws / "deep" / "dir" / "root")  # a symlinked directory in the middle of a path
    os.link(outside / "secret.txt", ws / "hard")  # a hardlink to a file outside
    (ws / "hard_in").write_text("x")
    os.link(ws / "hard_in", ws / "hard_in2")
    return ws


def _resolve(ws: Path, path: str, denied: tuple[str, ...] = ()) -> Path:
    return resolve_path(path, workspace=ws, denied_prefixes=denied)


# --- accepted ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("notes/a.md", "notes/a.md"),
        ("./notes/a.md", "notes/a.md"),
        ("notes//a.md", "notes/a.md"),
        ("notes/../notes/a.md", "notes/a.md"),
        ("notes/./../notes/a.md", "notes/a.md"),
        ("", "."),
        (".", "."),
        ("notes/new.md", "notes/new.md"),  # missing file in an existing directory
        ("new/deep/nested/file.txt", "new/deep/nested/file.txt"),  # missing nested target
        ("\u2025/etc/passwd", "\u2025/etc/passwd"),  # a "two dot leader" is a name, not ".."
        ("..\uff0f..\uff0fetc", "..\uff0f..\uff0fetc"),  # fullwidth solidus is not a separator
        ("caf\u00e9/na\u00efve.txt", "caf\u00e9/na\u00efve.txt"),
        ("...", "..."),  # three dots is a plain name
        (".github/workflows/ci.yml", ".github/workflows/ci.yml"),  # not under the denied ".git/"
        (".kube/config.bak", ".kube/config.bak"),  # sensitive entries match whole components
        ("my.ssh.notes", "my.ssh.notes"),
    ],
)
def test_accepted_paths_resolve_inside_the_workspace(tree, path, expected):
    resolved = _resolve(tree, path, (".git/",))
    assert resolved == (tree / expected if expected != "." else tree)


def test_absolute_path_inside_the_workspace_is_accepted(tree):
    assert _resolve(tree, str(tree / "notes" / "a.md")) == tree / "notes" / "a.md"


def test_absolute_path_through_an_aliased_workspace_is_accepted(tree, tmp_path):
    alias = tmp_path / "alias"
    os.symlink(tree, alias)  # the workspace as configured may itself sit behind a symlink
    assert _resolve(alias, str(alias / "notes" / "a.md")) == tree / "notes" / "a.md"
    assert _resolve(alias, "notes/a.md") == tree / "notes" / "a.md"


# --- refused ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "message"),
    [
        # traversal
        ("../outside/secret.txt", "path outside workspace"),
        ("../../../../../../etc/passwd", "path outside workspace"),
        ("notes/../../outside", "path outside workspace"),
        ("notes/../..", "path outside workspace"),
        ("..", "path outside workspace"),
        # absolute escapes
        ("/etc/passwd", "path outside workspace"),
        ("/", "path outside workspace"),
        # symlink escapes
        ("link_out/secret.txt", "path outside workspace"),
        ("link_out", "path outside workspace"),
        ("rel_out/secret.txt", "path outside workspace"),
        ("deep/dir/root/etc/passwd", "path outside workspace"),  # directory link in the middle
        ("broken_out", "broken symlink target outside workspace"),
        ("broken_out/child/new.txt", "broken symlink target outside workspace"),
        ("loop_a", "symlink loop"),
        ("loop_b/x", "symlink loop"),
        ("self_loop/x/y", "symlink loop"),
        # symlinks that stay inside are refused too (they can be re-pointed between check and use)
        ("in_link/a.md", "mutable symlink component"),
        ("file_link", "mutable symlink component"),
        ("broken_in", "broken symlink"),
        # hardlinks
        ("hard", "hardlinked file"),
        ("hard_in", "hardlinked file"),
        ("hard_in2", "hardlinked file"),
        # a file used as a directory
        ("notes/a.md/x", "is a file, not a directory"),
        # sensitive paths, even inside the workspace
        (".ssh/id_rsa", "sensitive path (.ssh"),
        ("project/.aws/credentials", "sensitive path (.aws"),
        (".gnupg/pubring.kbx", "sensitive path (.gnupg"),
        (".kube/config", "sensitive path (.kube/config"),
        (".docker/config.json", "sensitive path (.docker/config.json"),
        (".npmrc", "sensitive path (.npmrc"),
        (".password-store/bank.gpg", "sensitive path (.password-store"),
        (".config/gcloud/credentials.db", "sensitive path (.config/gcloud"),
        (".azure/accessTokens.json", "sensitive path (.azure"),
        (".mozilla/firefox/profile/logins.json", "sensitive path (.mozilla"),
        (".config/google-chrome/Default/Cookies", "sensitive path (.config/google-chrome"),
        ("Library/Keychains/login.keychain-db", "sensitive path (library/keychains"),
        (".bashrc", "sensitive path (.bashrc"),
        ("home/.zshrc", "sensitive path (.zshrc"),
        (".bash_profile", "sensitive path (.bash_profile"),
        (".zprofile", "sensitive path (.zprofile"),
        (".profile", "sensitive path (.profile"),
        (".netrc", "sensitive path (.netrc"),
        (".SSH/id_rsa", "sensitive path (.ssh"),  # case-insensitive file systems
        (".\uff53\uff53\uff48/id_rsa", "sensitive path (.ssh"),  # fullwidth look-alike of .ssh
        # malformed text
        ("notes/a\x00.md", "NUL byte"),
        ("notes/a\n.md", "control or invisible"),
        ("notes/\u202etxt.exe", "control or invisible"),  # right-to-left override
        ("notes/\u200ba.md", "control or invisible"),  # zero-width space
        ("x" * 256, "longer than 255 bytes"),
        ("/".join(["d" * 200] * 25), "longer than 4096 bytes"),
        ("~/.ssh/id_rsa", "'~'"),
        ("~", "'~'"),
    ],
)
def test_refused_paths(tree, path, message):
    with pytest.raises(PathError) as refused:
        _resolve(tree, path)
    assert message in str(refused.value)


def test_a_sibling_sharing_the_workspace_prefix_is_outside(tree, tmp_path):
    with pytest.raises(PathError, match="path outside workspace"):
        _resolve(tree, str(tmp_path / "ws-evil" / "x"))


def test_refusals_never_show_the_host_path_or_the_link_target(tree):
    for path in ("link_out/secret.txt", "broken_out", "../outside/secret.txt", "hard"):
        with pytest.raises(PathError) as refused:
            _resolve(tree, path)
        assert str(tree) not in str(refused.value)
        assert "nonexistent-toolgate-target" not in str(refused.value)


@pytest.mark.parametrize(
    ("path", "denied"),
    [
        (".git/config", (".git/",)),
        (".git", (".git/",)),
        ("./notes/../.git/hooks/pre-commit", (".git/",)),
        ("MEMORY/notes.md", ("memory/",)),  # folded like the file system may fold
        ("memory/deep/new.md", ("./memory",)),  # prefixes are normalised
        ("config.json", ("config.json",)),
        ("a/b/c.txt", ("a/b",)),
        # "**/" denies at every depth: a repository planted in a sub-directory
        (".git/config", ("**/.git/",)),
        ("sub/.git/config", ("**/.git/",)),
        ("sub/dir/.git/hooks/pre-commit", ("**/.git/",)),
        ("./x/.git/hooks/post-checkout", ("**/.git/",)),
        ("x/.GIT/config", ("**/.git/",)),
        ("sub/.git", ("**/.git/",)),
    ],
)
def test_denied_prefixes_refuse(tree, path, denied):
    with pytest.raises(PathError, match="is restricted"):
        _resolve(tree, path, denied)


def test_denied_prefixes_are_relative_to_the_workspace_and_match_whole_components(tree):
    assert _resolve(tree, "config.json.bak", ("config.json",)) == tree / "config.json.bak"
    assert _resolve(tree, "src/.git/x", (".git/",)) == tree / "src/.git/x"
    assert _resolve(tree, "memory.md", ("memory/",)) == tree / "memory.md"
    # at any depth, still whole components
    assert _resolve(tree, "src/.github/x", ("**/.git/",)) == tree / "src/.github/x"
    assert _resolve(tree, "src/my.git/x", ("**/.git/",)) == tree / "src/my.git/x"
    assert _resolve(tree, "src/.gitignore", ("**/.git/",)) == tree / "src/.gitignore"


def test_a_workspace_that_does_not_exist_refuses_everything(tmp_path):
    with pytest.raises(PathError, match="workspace is not available"):
        _resolve(tmp_path / "missing", "a.txt")


# --- opening: what was checked is what is used ------------------------------------------------------


def test_open_parent_refuses_a_directory_swapped_for_a_symlink_after_the_check(tree, tmp_path):
    (tree / "sub").mkdir()
    resolved = _resolve(tree, "sub/new.txt")
    (tree / "sub").rmdir()
    os.symlink(tmp_path / "outside", tree / "sub")  # the race an agent with exec could win
    with pytest.raises(PathError, match="mutable symlink"):
        open_parent(resolved, workspace=tree, create=True)
    assert not (tmp_path / "outside" / "new.txt").exists()


def test_open_read_refuses_a_file_swapped_for_a_symlink_or_hardlink_after_the_check(tree, tmp_path):
    resolved = _resolve(tree, "notes/a.md")
    (tree / "notes" / "a.md").unlink()
    os.symlink(tmp_path / "outside" / "secret.txt", tree / "notes" / "a.md")
    with pytest.raises(PathError, match="mutable symlink"):
        open_read(resolved, workspace=tree)
    (tree / "notes" / "a.md").unlink()
    os.link(tmp_path / "outside" / "secret.txt", tree / "notes" / "a.md")
    with pytest.raises(PathError, match="hardlinked"):
        open_read(resolved, workspace=tree)


# --- workspaces ---------------------------------------------------------------------------------------


@pytest.fixture
def root(settings, tmp_path: Path) -> Path:
    settings.TOOLGATE_WORKSPACE_ROOT = tmp_path / "workspaces"
    return tmp_path / "workspaces"


def _agent(tenant, key: str = "helper", type: str = Agent.Type.OPEN) -> Agent:
    return services.agent_create(actor=Actor.system(tenant), key=key, name=key.title(), type=type)


@pytest.mark.django_db
def test_layout_uses_tenant_and_agent_ids(root, tenant_a):
    agent = _agent(tenant_a)
    assert workspace_for(tenant=tenant_a, agent=agent, user_id="") == (
        root.resolve() / "tenants" / str(tenant_a.pk) / "agents" / str(agent.pk) / "workspace"
    )
    user_ws = workspace_for(tenant=tenant_a, agent=agent, user_id="alice")
    assert (
        user_ws.parent == root.resolve() / "tenants" / str(tenant_a.pk) / "agents" / str(agent.pk) / "users"
    )
    assert user_ws.name.startswith("alice-")
    assert user_ws.is_dir()


@pytest.mark.django_db
def test_two_tenants_never_share_a_directory(root, tenant_a, tenant_b):
    ws_a = workspace_for(tenant=tenant_a, agent=_agent(tenant_a), user_id="same-user")
    ws_b = workspace_for(tenant=tenant_b, agent=_agent(tenant_b), user_id="same-user")
    assert ws_a != ws_b
    assert ws_a.parents[3].name == str(tenant_a.pk)  # tenants/<tenant id>/agents/<id>/users/<user>
    assert not ws_a.is_relative_to(ws_b.parents[3])
    assert not ws_b.is_relative_to(ws_a.parents[3])
    (ws_a / "f.txt").write_text("a")
    with pytest.raises(PathError, match="outside workspace"):
        resolve_path(str(ws_a / "f.txt"), workspace=ws_b)


@pytest.mark.django_db
def test_a_renamed_slug_keeps_the_workspace(root, tenant_a):
    agent = _agent(tenant_a)
    before = workspace_for(tenant=tenant_a, agent=agent, user_id="u")
    tenant_a.slug = "renamed"
    tenant_a.save()
    assert workspace_for(tenant=tenant_a, agent=agent, user_id="u") == before
    layout = str(before.relative_to(root.resolve()))
    assert "renamed" not in layout
    assert "tenant-a" not in layout


@pytest.mark.django_db
@pytest.mark.parametrize("user_id", ["../../etc", "a/b", "..", ".", "/", "x/../../..", "\x00", "é/../ü", "-"])
def test_hostile_user_ids_are_neutralised(root, tenant_a, user_id):
    agent = _agent(tenant_a)
    ws = workspace_for(tenant=tenant_a, agent=agent, user_id=user_id)
    users = root.resolve() / "tenants" / str(tenant_a.pk) / "agents" / str(agent.pk) / "users"
    assert ws.parent == users  # exactly one level below users/, whatever the id
    assert ws.name not in {".", ".."}
    assert all(ch.isalnum() or ch in "-_" for ch in ws.name)


def test_distinct_user_ids_never_share_a_directory():
    ids = ["a/b", "a_b", "a-b", "a b", "A/B", "a//b", "ab"]
    assert len({safe_user_dir(user_id) for user_id in ids}) == len(ids)


@pytest.mark.django_db
def test_predefined_agents_and_calls_without_a_user_use_the_agent_workspace(root, tenant_a):
    predefined = _agent(tenant_a, "pre", Agent.Type.PREDEFINED)
    assert workspace_for(tenant=tenant_a, agent=predefined, user_id="alice").name == "workspace"
    open_agent = _agent(tenant_a, "open")
    user_ws = workspace_for(tenant=tenant_a, agent=open_agent, user_id="alice")
    agent_ws = workspace_for(tenant=tenant_a, agent=open_agent, user_id="")
    # The agent-level workspace is a sibling of users/, so it cannot reach any user's files.
    assert not user_ws.is_relative_to(agent_ws)
    with pytest.raises(PathError):
        resolve_path("../users", workspace=agent_ws)


@pytest.mark.django_db
def test_workspace_directories_are_private_and_creation_is_idempotent(root, tenant_a):
    agent = _agent(tenant_a)
    ws = workspace_for(tenant=tenant_a, agent=agent, user_id="bob")
    for directory in (ws, ws.parent, ws.parent.parent, root / "tenants" / str(tenant_a.pk)):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert workspace_for(tenant=tenant_a, agent=agent, user_id="bob") == ws


@pytest.mark.django_db
def test_an_agent_of_another_tenant_is_refused(root, tenant_a, tenant_b):
    with pytest.raises(ValueError, match="another tenant"):
        workspace_for(tenant=tenant_a, agent=_agent(tenant_b), user_id="")


@pytest.mark.django_db
def test_a_symlink_planted_in_the_layout_is_refused(root, tenant_a, tmp_path):
    agent = _agent(tenant_a)
    agent_dir = workspace_for(tenant=tenant_a, agent=agent, user_id="").parent
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", agent_dir / "users")
    with pytest.raises(PathError, match="not a directory"):
        workspace_for(tenant=tenant_a, agent=agent, user_id="carol")
