"""The virtual-file hook of the fs tools: an interceptor's paths never reach the disk."""

from __future__ import annotations

import pytest

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.toolkit import registry, vfs
from apps.toolkit.results import ToolResult
from apps.toolkit.workspace import workspace_for
from tests import factories

pytestmark = pytest.mark.django_db


class Notes:
    """Keeps NOTES.md in a dict; refuses LOCKED.md; says where the text came from."""

    name = "notes"

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def handles(self, ctx, path: str) -> bool:
        return path in ("NOTES.md", "LOCKED.md") or path.startswith("notes/")

    def load(self, ctx, path: str):
        if path == "LOCKED.md":
            return ToolResult.error("LOCKED.md cannot be read here.")
        if path not in self.files:
            return ToolResult.error(f"not found: {path}")
        return vfs.Loaded(self.files[path], note="[Source: database]")

    def store(self, ctx, path: str, content: str, *, append: bool) -> ToolResult:
        if path == "LOCKED.md":
            return ToolResult.error("LOCKED.md cannot be written here.")
        self.files[path] = self.files.get(path, "") + content if append else content
        return ToolResult.ok(f"saved {path}")

    def entries(self, ctx) -> list[vfs.VirtualEntry]:
        return [vfs.VirtualEntry(path, len(text), "notes") for path, text in self.files.items()]


@pytest.fixture
def notes():
    interceptor = Notes()
    vfs.register(interceptor, order=50)
    yield interceptor
    vfs.unregister("notes")


@pytest.fixture
def ctx(tenant_a):
    agent = services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    return factories.call_context(tenant_a, agent, workspace_for(tenant=tenant_a, agent=agent, user_id=""))


def call(name, ctx, **args) -> ToolResult:
    return registry._IMPLEMENTATIONS[name](ctx, args)


def test_reads_writes_and_edits_go_to_the_interceptor_not_the_disk(notes, ctx):
    assert call("write_file", ctx, path="NOTES.md", content="one\ntwo\n").for_llm == "saved NOTES.md"
    assert call("write_file", ctx, path="./NOTES.md", content="three\n", append=True).is_error is False
    assert not (ctx.workspace / "NOTES.md").exists()

    read = call("read_file", ctx, path=str(ctx.workspace / "NOTES.md"))
    assert read.for_llm == "     1\tone\n     2\ttwo\n     3\tthree\n\n[Source: database]"
    assert call("read_file", ctx, path="NOTES.md", offset=2, limit=1).for_llm.startswith("     2\ttwo")

    edited = call("edit", ctx, path="NOTES.md", old_string="two", new_string="2")
    assert edited.for_llm == "Edited NOTES.md: replaced 1 occurrence (first at line 2)."
    assert notes.files["NOTES.md"] == "one\n2\nthree\n"
    missing = call("edit", ctx, path="NOTES.md", old_string="four", new_string="4")
    assert missing.is_error is True
    assert "not found" in missing.for_llm


def test_the_interceptor_answers_refusals(notes, ctx):
    assert call("read_file", ctx, path="LOCKED.md").for_llm == "LOCKED.md cannot be read here."
    written = call("write_file", ctx, path="LOCKED.md", content="x")
    assert written.for_llm == "LOCKED.md cannot be written here."
    assert call("edit", ctx, path="LOCKED.md", old_string="a", new_string="b").is_error is True


def test_list_files_shows_virtual_files_at_the_root(notes, ctx):
    call("write_file", ctx, path="NOTES.md", content="hello")
    call("write_file", ctx, path="notes/deep.md", content="deeper")
    (ctx.workspace / "real.txt").write_text("on disk")

    flat = call("list_files", ctx, path=".").for_llm
    assert "NOTES.md  (5 bytes; notes, stored by Toolgate)" in flat
    assert "real.txt  (7 bytes)" in flat
    assert "notes/deep.md" not in flat
    assert "notes/  (stored by Toolgate)" in flat  # the folder is shown, its files by listing it
    assert "notes/deep.md  (6 bytes; notes" in call("list_files", ctx, path=".", recursive=True).for_llm


@pytest.mark.parametrize("path", ["../NOTES.md", "sub/../../NOTES.md", "/etc/NOTES.md", "NOTES.md\x00"])
def test_paths_outside_the_workspace_are_never_virtual(notes, ctx, path):
    assert vfs.interceptor_for(ctx, path) is None


def test_without_an_interceptor_the_disk_serves(ctx):
    assert call("write_file", ctx, path="NOTES.md", content="disk").is_error is False
    assert (ctx.workspace / "NOTES.md").read_text() == "disk"
