"""policy_export and policy_import: a tenant's whole policy as a JSON file and back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.policy import services as policy
from apps.policy.models import PolicyVersion
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests import factories
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db

BUNDLE = {
    "format": 1,
    "tenant": {"profile": "coding", "deny": ["exec"], "browser": {"enabled": False}},
    "agents": {"bot": {"alsoAllow": ["exec"]}},
    "channels": [{"channel": "tg", "chat_id": "", "allow": ["group:web"]}],
}


@pytest.fixture
def tenant() -> Tenant:
    tenant = factories.make_tenant("acme")
    services.agent_create(actor=Actor.system(tenant), key="bot", name="Bot")
    return tenant


def _export(*args: str) -> str:
    out = StringIO()
    call_command("policy_export", "--tenant", "acme", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def _import(*args: str, stdin: str | None = None) -> str:
    out = StringIO()
    call_command(
        "policy_import", "--tenant", "acme", *args, stdout=out, stdin=StringIO(stdin) if stdin else None
    )
    return out.getvalue()


def test_export_prints_the_policy_with_a_stable_key_order(tenant):
    assert json.loads(_export()) == {"format": 1, "tenant": {}, "agents": {}, "channels": []}
    system = Actor.system(tenant)
    policy.policy_save(system, policy.target("tenant"), {"scrub_credentials": False, "allow": ["group:fs"]})
    policy.policy_save(system, policy.target("channel", channel="tg", chat_id="9"), {"allow": ["tts"]})

    text = _export()

    assert text == _export()
    assert text.endswith("}\n")
    assert json.loads(text) == {
        "format": 1,
        "tenant": {"scrub_credentials": False, "allow": ["group:fs"]},
        "agents": {},
        "channels": [{"channel": "tg", "chat_id": "9", "allow": ["tts"]}],
    }
    assert text.index('"agents"') < text.index('"channels"') < text.index('"format"') < text.index('"tenant"')
    assert text.index('"allow"') < text.index('"scrub_credentials"')


def test_export_to_a_file(tenant, tmp_path):
    target = tmp_path / "policy.json"
    assert _export("--output", str(target)) == ""
    assert json.loads(target.read_text()) == policy.policy_export(tenant)
    with pytest.raises(CommandError, match="Cannot write"):
        _export("--output", str(tmp_path / "missing" / "policy.json"))


def test_unknown_tenant():
    with pytest.raises(CommandError, match="No tenant with slug 'acme'"):
        _export()
    with pytest.raises(CommandError, match="No tenant with slug 'acme'"):
        _import("-", stdin="{}")


def test_import_from_a_file_applies_everything_as_the_system_actor(tenant, tmp_path):
    source = tmp_path / "policy.json"
    source.write_text(json.dumps(BUNDLE))
    config = tenant.config_version

    output = _import(str(source))

    assert output.splitlines() == [
        "warning: tenant: browser is ignored: there is no browser tool.",
        "changed: tenant, agent bot, channel tg",
    ]
    exported = policy.policy_export(tenant)
    assert exported["tenant"] == {"profile": "coding", "deny": ["exec"]}
    assert exported["agents"] == {"bot": {"alsoAllow": ["exec"]}}
    assert exported["channels"] == [{"channel": "tg", "chat_id": "", "allow": ["group:web"]}]
    authors = set(PolicyVersion.objects.for_tenant(tenant).values_list("author_kind", "note"))
    assert authors == {("system", "import")}
    imported = AuditEvent.objects.for_tenant(tenant).get(verb="policy.imported")
    assert imported.actor_kind == "system"
    assert Tenant.objects.get(pk=tenant.pk).config_version > config

    assert _import(str(source)).splitlines()[-1] == "Nothing changed in tenant acme."


def test_import_from_standard_input_and_export_round_trip(tenant):
    _import("-", stdin=json.dumps(BUNDLE))
    exported = _export()
    policy.policy_delete(Actor.system(tenant), policy.target("channel", channel="tg"))

    assert _import("-", stdin=exported).splitlines() == ["changed: channel tg"]
    assert _export() == exported


def test_dry_run_reports_and_changes_nothing(tenant):
    policy.policy_save(Actor.system(tenant), policy.target("channel", channel="old"), {"allow": ["tts"]})
    before = tenant_state(tenant)

    output = _import("--dry-run", "-", stdin=json.dumps(BUNDLE))

    assert output.splitlines() == [
        "warning: tenant: browser is ignored: there is no browser tool.",
        "would change: tenant, agent bot, channel tg, channel old",
        "Dry run: nothing was changed.",
    ]
    assert tenant_state(tenant) == before


def test_invalid_input_lists_every_error_and_changes_nothing(tenant, tmp_path):
    before = tenant_state(tenant)
    bundle = {
        "format": 1,
        "tenant": {"deny": ["bash"], "profile": "tiny"},
        "agents": {"ghost": {}},
        "channels": [{"channel": "tg", "deny": ["exec"]}],
    }
    with pytest.raises(CommandError) as caught:
        _import("-", stdin=json.dumps(bundle))
    assert str(caught.value).splitlines() == [
        "The policy is invalid; nothing was changed:",
        "  tenant.deny[0]: 'bash' is an alias; policies name tools: use 'exec'.",
        "  tenant.profile: Unknown profile 'tiny'; use one of full, coding, messaging, minimal",
        "  agents.ghost: No agent with this key in this tenant.",
        "  channels[0].deny: Unknown key; a channel policy takes allow.",
    ]
    with pytest.raises(CommandError, match="The policy is invalid") as caught:
        _import("--dry-run", "-", stdin=json.dumps(bundle))
    with pytest.raises(CommandError, match=r"policy must be a JSON object"):
        _import("-", stdin="[1, 2]")
    with pytest.raises(CommandError, match="is not valid JSON"):
        _import("-", stdin='{"format": 1,')
    with pytest.raises(CommandError, match="Cannot read"):
        _import(str(tmp_path / "absent.json"))
    (tmp_path / "latin1.json").write_bytes(b'{"x": "\xe9"}')
    with pytest.raises(CommandError, match="is not UTF-8 text"):
        _import(str(tmp_path / "latin1.json"))
    assert tenant_state(tenant) == before


def _manage(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TOOLGATE_DB_NAME=connection.settings_dict["NAME"], LOG_LEVEL="WARNING")
    return subprocess.run(
        [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=settings.BASE_DIR,
        timeout=60,
        check=False,
    )


@pytest.mark.django_db(transaction=True)
def test_the_commands_exit_non_zero_on_invalid_input(tenant):
    bad = _manage("policy_import", "--tenant", "acme", "-", stdin=json.dumps({"tenant": {"allow": ["nope"]}}))
    assert bad.returncode != 0
    assert "tenant.allow[0]: Unknown tool 'nope'" in bad.stderr
    assert policy.policy_export(tenant)["tenant"] == {}

    good = _manage("policy_import", "--tenant", "acme", "-", stdin=json.dumps(BUNDLE))
    assert good.returncode == 0, good.stderr
    assert "changed: tenant, agent bot, channel tg" in good.stdout
    exported = _manage("policy_export", "--tenant", "acme")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["agents"] == {"bot": {"alsoAllow": ["exec"]}}
