"""The directories of a call's workspace: made on first use with mode 0700 exactly, found again
without change, and refused when a component is a symlink (which would point a tenant's workspace
elsewhere) or when the configured root moves."""

from __future__ import annotations

import os
import stat

import pytest
from django.test import override_settings

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.toolkit.workspace import PathError, workspace_for

pytestmark = pytest.mark.django_db


def test_made_private_found_again_and_a_symlinked_component_refused(tenant_a, tmp_path):
    agent = services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    root = tmp_path / "workspaces"
    with override_settings(TOOLGATE_WORKSPACE_ROOT=str(root)):
        old = os.umask(0o022)
        try:
            first = workspace_for(tenant=tenant_a, agent=agent, user_id="")
        finally:
            os.umask(old)
        assert first.is_dir()
        assert first.is_relative_to(os.path.realpath(root))
        path, modes = first, []
        while path != root:
            modes.append(stat.S_IMODE(os.lstat(path).st_mode))
            path = path.parent
        assert modes == [0o700] * 5
        (first / "kept.txt").write_text("kept")
        assert workspace_for(tenant=tenant_a, agent=agent, user_id="") == first
        assert (first / "kept.txt").read_text() == "kept"

        # A component swapped for a symlink to another directory is refused, not followed.
        agents = first.parent.parent
        elsewhere = tmp_path / "elsewhere"
        (elsewhere / str(agent.pk)).mkdir(parents=True)
        moved = tmp_path / "moved"
        agents.rename(moved)
        os.symlink(elsewhere, agents)
        with pytest.raises(PathError, match="not a directory"):
            workspace_for(tenant=tenant_a, agent=agent, user_id="")

    # Another root (the setting changed): made there, not at the root seen before.
    other = tmp_path / "other-root"
    with override_settings(TOOLGATE_WORKSPACE_ROOT=str(other)):
        assert workspace_for(tenant=tenant_a, agent=agent, user_id="").is_relative_to(os.path.realpath(other))
