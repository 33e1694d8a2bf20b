"""The disk under the workspaces full: a tool that writes answers a clear error the model can act on,
the call is recorded, and the database (on another disk) goes on serving."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 1 MiB tmpfs mounted for the test (root is needed to mount; the suite runs as root)."""
    where = Path(tempfile.mkdtemp(prefix="toolgate-full-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)
        where.rmdir()


def test_a_full_workspace_disk_gives_a_clear_tool_error_and_the_database_goes_on(
    small_disk: Path, settings, tenant_a: Tenant
):
    settings.TOOLGATE_WORKSPACE_ROOT = str(small_disk)
    services.agent_create(
        actor=Actor.system(tenant_a), key="bot", name="Bot", settings={"sandbox": {"mode": "off"}}
    )
    client = factories.key_client(factories.make_api_key(tenant_a, "member"))

    def write(path: str, size: int) -> dict:  # type: ignore[type-arg]
        body = {"agent": "bot", "tool": "write_file", "args": {"path": path, "content": "x" * size}}
        response = client.post("/api/v1/runtime/execute", body, format="json")
        assert response.status_code == 200, response.content
        return response.json()  # type: ignore[no-any-return]

    assert write("first.txt", 600_000)["is_error"] is False
    full = write("second.txt", 600_000)
    assert full["is_error"] is True
    assert full["for_llm"].startswith("no space is left on the workspace's disk: delete files")
    files = sorted(path.name for path in small_disk.rglob("*") if path.is_file())
    assert files == ["first.txt"], files  # no partial file and no temporary file left behind
    assert ToolCall.objects.for_tenant(tenant_a).count() == 2
    listing = client.get("/api/v1/tool-calls/")
    assert listing.status_code == 200
    assert listing.json()["results"][0]["tool"] == "write_file"
