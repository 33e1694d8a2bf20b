"""Domain tools (STRAP: single tool, resource + action): the catalog presented as a few tools.

Models handle a handful of domain tools better than dozens of flat ones, and the definitions take a
fraction of the prompt. ``file(action: "read", path: ...)`` is the flat ``read_file(path: ...)``. The
listing builds each domain's schema from the flat tools the agent may use; execution translates a
domain call back to the flat tool, which then goes through the pipeline like any other call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from apps.toolkit.results import ToolResult
from apps.tools.catalog import CATALOG, TEAM_MESSAGE_ACTIONS, TEAM_TASK_ACTIONS

FORWARD_ACTION = "*"  # the domain action is also the flat tool's own ``action`` argument


@dataclass(frozen=True)
class Domain:
    name: str
    description: str
    # resource -> action -> flat tool ("" is the resource of a flat domain without resources)
    resources: dict[str, dict[str, str]]


def _pass_through(tool: str, actions: Iterable[str]) -> dict[str, str]:
    return {action: f"{tool}{FORWARD_ACTION}" for action in actions}


DOMAINS: dict[str, Domain] = {
    d.name: d
    for d in (
        Domain(
            "file",
            "Files of the workspace: read, write, edit, list, grep (regex search) and glob.",
            {
                "": {
                    "read": "read_file",
                    "write": "write_file",
                    "edit": "edit",
                    "list": "list_files",
                    "grep": "search",
                    "glob": "glob",
                }
            },
        ),
        Domain(
            "shell",
            "Run commands: a shell command (bash) or a registered CLI with credentials (cli).",
            {"bash": {"exec": "exec"}, "cli": {"run": "credentialed_exec"}},
        ),
        Domain(
            "web",
            "The web: fetch a URL (http) or search (search).",
            {"http": {"fetch": "web_fetch"}, "search": {"query": "web_search"}},
        ),
        Domain(
            "memory",
            "Long-term memory documents: search them or get one.",
            {"": {"search": "memory_search", "get": "memory_get"}},
        ),
        Domain(
            "agent",
            "Sessions, subagents, knowledge, skills, schedules, time, messages, teams and more.",
            {
                "session": {
                    "list": "sessions_list",
                    "history": "sessions_history",
                    "send": "sessions_send",
                    "status": "session_status",
                    "spawn": "spawn",
                },
                "knowledge": {"search": "knowledge_graph_search"},
                "skill": {"search": "skill_search", "use": "use_skill", "publish": "publish_skill"},
                "cron": _pass_through(
                    "cron", ("create", "list", "update", "delete", "enable", "disable", "run", "history")
                ),
                "time": {"now": "datetime"},
                "message": {"send": "message", "create_topic": "create_forum_topic"},
                "team_task": _pass_through("team_tasks", TEAM_TASK_ACTIONS),
                "team_message": _pass_through("team_message", TEAM_MESSAGE_ACTIONS),
                "workspace": {"dir": "workspace_dir"},
                "llm": {"call": "openai_compat_call"},
            },
        ),
        Domain(
            "media",
            "Create or read images, audio, video and documents; text to speech.",
            {
                "image": {"create": "create_image", "read": "read_image"},
                "audio": {"create": "create_audio", "read": "read_audio", "speak": "tts"},
                "video": {"create": "create_video", "read": "read_video"},
                "document": {"read": "read_document"},
            },
        ),
    )
}

_covered = {
    target.rstrip(FORWARD_ACTION)
    for d in DOMAINS.values()
    for r in d.resources.values()
    for target in r.values()
}
assert _covered == set(CATALOG), f"domains must cover the catalog exactly: {sorted(set(CATALOG) ^ _covered)}"


def _target(entry: str) -> tuple[str, bool]:
    return (entry[:-1], True) if entry.endswith(FORWARD_ACTION) else (entry, False)


def _allowed_resources(domain: Domain, allowed: set[str]) -> dict[str, dict[str, str]]:
    result: dict[str, dict[str, str]] = {}
    for resource, actions in domain.resources.items():
        kept = {action: entry for action, entry in actions.items() if _target(entry)[0] in allowed}
        if kept:
            result[resource] = kept
    return result


def domain_names(allowed: Iterable[str]) -> list[str]:
    allowed_set = set(allowed)
    return sorted(name for name, domain in DOMAINS.items() if _allowed_resources(domain, allowed_set))


def definitions(allowed: Iterable[str]) -> list[dict[str, Any]]:
    """``{"name", "description", "parameters"}`` of every domain with at least one allowed action."""
    allowed_set = set(allowed)
    result = []
    for name in sorted(DOMAINS):
        domain = DOMAINS[name]
        resources = _allowed_resources(domain, allowed_set)
        if not resources:
            continue
        named = [r for r in resources if r]
        properties: dict[str, Any] = {}
        required = ["action"]
        if named:
            properties["resource"] = {
                "type": "string",
                "enum": named,
                "description": "What to act on (inferred from the action when unique).",
            }
            if len(named) > 1:
                required.insert(0, "resource")
        actions = sorted({action for acts in resources.values() for action in acts})
        properties["action"] = {"type": "string", "enum": actions}
        # One compact line per resource: action(parameters), "*" marking the required ones. The flat
        # tools' descriptions are not repeated: the parameter descriptions below carry the details.
        lines = [domain.description, "Actions (parameters; * = required):"]
        for resource, acts in resources.items():
            calls = []
            for action, entry in acts.items():
                tool, forwards = _target(entry)
                spec = CATALOG[tool]
                required_params = set(spec.required_parameters)
                params = []
                for prop, schema in spec.parameters.get("properties", {}).items():
                    if forwards and prop == "action":
                        continue
                    params.append(f"{prop}*" if prop in required_params else prop)
                    properties.setdefault(prop, schema)
                calls.append(f"{action}({', '.join(params)})")
            lines.append(("- " + (f"{resource}: " if resource else "")) + " ".join(calls))
        result.append(
            {
                "name": name,
                "description": "\n".join(lines),
                "parameters": {"type": "object", "properties": properties, "required": required},
            }
        )
    return result


def to_flat(
    name: str, args: dict[str, Any], *, allowed: Iterable[str]
) -> tuple[str, dict[str, Any]] | ToolResult | None:
    """Translate a domain call to ``(flat tool, args)``; an error result for a bad resource/action;
    None when ``name`` is not a domain tool."""
    domain = DOMAINS.get(name)
    if domain is None:
        return None
    rest = dict(args)
    action = rest.pop("action", None)
    resource = rest.pop("resource", None)
    allowed_resources = _allowed_resources(domain, set(allowed)) or {}
    if not isinstance(action, str) or not action:
        choices = sorted({a for acts in allowed_resources.values() for a in acts})
        return ToolResult.error(
            f"{name}: 'action' is required; one of: {', '.join(choices) or 'none allowed'}."
        )
    if resource is None:
        # Infer the resource: the domain has a single (or no) resource, or the action names one.
        candidates = [r for r, acts in domain.resources.items() if action in acts]
        if len(candidates) != 1:
            options = ", ".join(sorted(r for r in domain.resources if r)) or "none"
            return ToolResult.error(f"{name}: say which resource to {action!r}: {options}.")
        resource = candidates[0]
    if not isinstance(resource, str) or resource not in domain.resources:
        options = ", ".join(sorted(r for r in domain.resources if r)) or "none"
        return ToolResult.error(f"{name}: unknown resource {resource!r}; use one of: {options}.")
    entry = domain.resources[resource].get(action)
    if entry is None:
        options = ", ".join(sorted(domain.resources[resource]))
        where = f"{resource}/" if resource else ""
        return ToolResult.error(f"{name}: unknown action {where}{action!r}; use one of: {options}.")
    tool, passes = _target(entry)
    if passes:
        rest["action"] = action
    return tool, rest
