"""Move the policy values out of the tenant and agent settings into policy documents.

Until now these settings keys decided an agent's tools and how they run; the tool policy is their only
home from now on (the settings validator refuses them):

* tenant ``tool_profile`` -> ``profile``, ``scrub_credentials``, ``rate_limit_per_hour``,
  ``exec_approvals`` -> ``execApproval``, ``origin_deny`` -> ``originDeny``,
  ``tools.exec.deny_groups`` -> ``shellDenyGroups`` of the tenant's policy;
* agent ``exec_approvals`` -> ``execApproval``, ``tools.exec.deny_groups`` -> ``shellDenyGroups`` of the
  agent's policy; an agent ``tool_profile`` other than ``full`` becomes the agent's ``allow`` list (the
  profile's entries, e.g. minimal -> ["session_status"]; intersected with an allow list the agent's
  policy already has). An agent's profile used to replace the tenant's; as an allow list it can only
  narrow it, so an agent that named a wider profile than its tenant's (``full`` included) now gets the
  tenant's.
* An agent's ``rate_limit_per_hour``, ``scrub_credentials`` and ``origin_deny`` are dropped: the policy
  has them for the tenant only (the engine never read them per agent either).

A value already present in a policy document wins over the one from the settings (as it did when the
engine read both). Each document that changes gets a version (note "moved from settings", author
"system"); the keys are removed from the settings, and every tenant touched gets a new
``config_version`` so no cached policy outlives the move. Going backwards leaves the documents in place
and puts nothing back into the settings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import migrations
from django.db.models import F, Max

NOTE = "moved from settings"

# The profiles and groups as they were when the settings were moved (apps/tools/catalog.py).
PROFILES: dict[str, tuple[str, ...]] = {
    "coding": (
        "group:fs",
        "group:runtime",
        "group:sessions",
        "group:memory",
        "group:web",
        "group:knowledge",
        "group:media_gen",
        "group:media_read",
        "group:skills",
    ),
    "messaging": ("group:messaging", "group:web", "group:sessions", "group:media_read", "skill_search"),
    "minimal": ("session_status",),
}
TENANT_KEYS = {
    "tool_profile": "profile",
    "scrub_credentials": "scrub_credentials",
    "rate_limit_per_hour": "rate_limit_per_hour",
    "exec_approvals": "execApproval",
    "origin_deny": "originDeny",
}
AGENT_DROPPED = ("rate_limit_per_hour", "scrub_credentials", "origin_deny")


# The built-in tools and their groups as they were when the settings were moved (apps/tools/catalog.py),
# frozen here so that the migration does not depend on the code of today.
CATALOG: frozenset[str] = frozenset(
    (
        "create_audio",
        "create_forum_topic",
        "create_image",
        "create_video",
        "credentialed_exec",
        "cron",
        "datetime",
        "edit",
        "exec",
        "glob",
        "knowledge_graph_search",
        "list_files",
        "memory_get",
        "memory_search",
        "message",
        "openai_compat_call",
        "publish_skill",
        "read_audio",
        "read_document",
        "read_file",
        "read_image",
        "read_video",
        "search",
        "session_status",
        "sessions_history",
        "sessions_list",
        "sessions_send",
        "skill_search",
        "spawn",
        "team_message",
        "team_tasks",
        "tts",
        "use_skill",
        "web_fetch",
        "web_search",
        "workspace_dir",
        "write_file",
    )
)
GROUPS: dict[str, tuple[str, ...]] = {
    "automation": ("cron", "datetime"),
    "fs": ("edit", "glob", "list_files", "read_file", "search", "write_file"),
    "knowledge": ("knowledge_graph_search", "skill_search"),
    "media_gen": ("create_audio", "create_image", "create_video", "tts"),
    "media_read": ("read_audio", "read_document", "read_image", "read_video"),
    "memory": ("memory_get", "memory_search"),
    "messaging": ("create_forum_topic", "message"),
    "runtime": ("credentialed_exec", "exec"),
    "sessions": ("session_status", "sessions_history", "sessions_list", "sessions_send", "spawn"),
    "skills": ("publish_skill", "use_skill"),
    "teams": ("team_message", "team_tasks"),
    "web": ("web_fetch", "web_search"),
    "toolgate": tuple(sorted(CATALOG)),
}


def _expand(specs: list[str]) -> set[str]:
    """Built-in tool names ``specs`` select (the catalog above; only used to intersect two lists)."""
    result: set[str] = set()
    for spec in specs:
        if spec.startswith("group:"):
            group = spec[len("group:") :]
            result |= set(GROUPS.get("toolgate" if group == "goclaw" else group, ()))
        elif "*" in spec:
            pattern = re.compile(".*".join(re.escape(p) for p in spec.split("*")) + r"\Z", re.DOTALL)
            result |= {name for name in CATALOG if pattern.match(name)}
        elif spec in CATALOG:
            result.add(spec)
    return result


def _flatten(document: Mapping[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in (document or {}).items():
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _diff(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, Any]:
    """The version diff in the form apps.policy.documents.diff writes it."""
    old, new = _flatten(before), _flatten(after)
    changes: dict[str, Any] = {}
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        if isinstance(a, list | None) and isinstance(b, list | None) and (a is not None or b is not None):
            changes[path] = {
                "added": [x for x in b or [] if x not in (a or [])],
                "removed": [x for x in a or [] if x not in (b or [])],
            }
        else:
            changes[path] = {"from": a, "to": b}
    return changes


def _deny_groups(settings: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The exec deny groups of ``settings`` and the settings without them (empty objects dropped)."""
    tools = settings.get("tools")
    if not isinstance(tools, dict) or not isinstance(tools.get("exec"), dict):
        return None, settings
    if "deny_groups" not in tools["exec"]:
        return None, settings
    exec_settings = {k: v for k, v in tools["exec"].items() if k != "deny_groups"}
    groups = tools["exec"]["deny_groups"]
    new_tools = {k: v for k, v in tools.items() if k != "exec"}
    if exec_settings:
        new_tools["exec"] = exec_settings
    rest = {k: v for k, v in settings.items() if k != "tools"}
    if new_tools:
        rest["tools"] = new_tools
    return (dict(groups) if isinstance(groups, dict) else None), rest


def _tenant_part(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the policy values, the settings without them) of a tenant's settings."""
    moved: dict[str, Any] = {}
    groups, rest = _deny_groups(settings)
    if groups is not None:
        moved["shellDenyGroups"] = groups
    for old, new in TENANT_KEYS.items():
        if old in rest:
            value = rest.pop(old)
            if old == "exec_approvals" and isinstance(value, dict):
                value = {k: v for k, v in value.items() if k in ("security", "ask")}
            moved[new] = value
    return moved, rest


def _agent_part(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the policy values, the settings without them) of an agent's settings."""
    moved: dict[str, Any] = {}
    groups, rest = _deny_groups(settings)
    if groups is not None:
        moved["shellDenyGroups"] = groups
    if isinstance(rest.get("exec_approvals"), dict):
        moved["execApproval"] = {k: v for k, v in rest["exec_approvals"].items() if k in ("security", "ask")}
    rest.pop("exec_approvals", None)
    profile = rest.pop("tool_profile", None)
    if isinstance(profile, str) and profile in PROFILES:
        moved["allow"] = list(PROFILES[profile])
    for key in AGENT_DROPPED:
        rest.pop(key, None)
    return moved, rest


def _merge(current: dict[str, Any], moved: dict[str, Any]) -> dict[str, Any]:
    """``current`` over ``moved``; an allow list from a profile is intersected with the current one."""
    merged = {**moved, **current}
    if "allow" in moved and current.get("allow"):
        kept = _expand(moved["allow"])
        merged["allow"] = sorted(name for name in _expand(current["allow"]) if name in kept)
    return merged


def _save(apps: Any, tenant: Any, scope: str, agent: Any, moved: dict[str, Any]) -> bool:
    """Write ``moved`` into the scope's document with a version; True when the document changed."""
    PolicyDocument = apps.get_model("policy", "PolicyDocument")
    PolicyVersion = apps.get_model("policy", "PolicyVersion")
    rows = PolicyDocument.objects.filter(tenant=tenant, scope=scope)
    rows = rows.filter(agent=agent) if agent is not None else rows
    row = rows.first()
    before = dict(row.document) if row is not None else None
    document = _merge(before or {}, moved)
    if document == before:
        return False
    agent_key = agent.key if agent is not None else ""
    versions = PolicyVersion.objects.filter(
        tenant=tenant, scope=scope, agent_key=agent_key, channel="", chat_id=""
    )
    number = (versions.aggregate(top=Max("number"))["top"] or 0) + 1
    if row is None:
        PolicyDocument.objects.create(
            tenant=tenant, scope=scope, agent=agent, document=document, version=number
        )
    else:
        rows.update(document=document, version=number)
    PolicyVersion.objects.create(
        tenant=tenant,
        scope=scope,
        agent=agent,
        agent_key=agent_key,
        number=number,
        document=document,
        diff=_diff(before, document),
        note=NOTE,
        author_kind="system",
        author_id="system",
        author_label="system",
    )
    return True


def forwards(apps: Any, schema_editor: Any) -> None:
    Tenant = apps.get_model("tenants", "Tenant")
    Agent = apps.get_model("tenants", "Agent")
    for tenant in Tenant.objects.order_by("pk"):
        touched = False
        moved, rest = _tenant_part(dict(tenant.settings or {}))
        if rest != (tenant.settings or {}):
            if moved:
                _save(apps, tenant, "tenant", None, moved)
            Tenant.objects.filter(pk=tenant.pk).update(settings=rest)
            touched = True
        for agent in Agent.objects.filter(tenant=tenant).order_by("key"):
            moved, rest = _agent_part(dict(agent.settings or {}))
            if rest == (agent.settings or {}):
                continue
            if moved:
                _save(apps, tenant, "agent", agent, moved)
            Agent.objects.filter(tenant=tenant, pk=agent.pk).update(settings=rest)
            touched = True
        if touched:
            Tenant.objects.filter(pk=tenant.pk).update(config_version=F("config_version") + 1)


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0005_tenant_config_version"),
        ("policy", "0001_policy_documents"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
