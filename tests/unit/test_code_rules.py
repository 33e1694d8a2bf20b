"""House rules of the layering (issue 19), checked on the source.

* No import of another app inside a function body (outside ``ready()`` and ``if TYPE_CHECKING:``): such
  imports hide a dependency from a reader; import-linter already counts them in the layers. There is no
  exception.
* No ``.objects.`` in views, API modules and agent-tool modules: reads belong in selectors, writes in
  services. Today's exceptions are listed here and may only shrink: when one goes, remove its entry (or
  lower its count); the test fails on a stale entry too, so the list stays exact.
* No private name (``_x``) imported from another app: what an app shares it makes public.
* One home for access rules: every ``access_*`` function (one object inside the actor's tenant, a missing
  one and another tenant's giving the same 404) lives in its app's ``apps/<app>/access.py``, and such a
  module defines nothing public but ``access_*`` functions. This one has no exceptions.
* One home for agent tools: a tool implementation (``@tool(...)`` of ``apps.toolkit.registry``) is
  defined in its app's ``apps/<app>/agent_tools.py``, or, for the gateway's own tools (files, exec, web,
  clock), in ``apps/runtime/tools/``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
APPS = ROOT / "apps"

# ``.objects.`` per view, API and agent-tool module today.
OBJECTS_IN_SURFACE: dict[str, int] = {}


def _modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        if node.module == "apps":
            return [f"apps.{alias.name}" for alias in node.names]
        return [node.module] if node.module else []
    return [alias.name for alias in node.names]


def _walk(
    node: ast.AST, *, where: str, app: str, function: str | None, checking: bool, found: set[str]
) -> None:
    for child in ast.iter_child_nodes(node):
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
        under = checking or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
        if isinstance(child, (ast.Import, ast.ImportFrom)) and function and function != "ready" and not under:
            for module in _modules(child):
                if module.startswith("apps.") and module.split(".")[1] != app:
                    found.add(f"{where} -> {module}")
        _walk(child, where=where, app=app, function=inner, checking=under, found=found)


def _in_function_imports() -> set[str]:
    found: set[str] = set()
    for path in sorted(APPS.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if "migrations" not in relative.parts:
            tree = ast.parse(path.read_text())
            _walk(
                tree, where=str(relative), app=relative.parts[1], function=None, checking=False, found=found
            )
    return found


def _is_surface(relative: Path) -> bool:
    parts, name = relative.parts, relative.stem
    return (
        "api" in parts
        or "views" in parts
        or "views" in name
        or name in ("tools", "tool", "agent_tools")
        or (len(parts) > 3 and parts[1] == "runtime" and parts[2] == "tools")
        or (len(parts) > 3 and parts[2].endswith("_api"))
    )


def _objects_in_surface() -> dict[str, int]:
    counts = {}
    for path in sorted(APPS.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if "migrations" in relative.parts or not _is_surface(relative):
            continue
        count = len(re.findall(r"\.objects\.", path.read_text()))
        if count:
            counts[str(relative)] = count
    return counts


def test_no_cross_app_import_inside_a_function():
    found = sorted(_in_function_imports())
    assert not found, (
        "cross-app imports inside a function body (file -> module): import them at the top of the module, "
        f"or under `if TYPE_CHECKING:` when only a type annotation needs them: {found}"
    )


def test_no_new_orm_query_in_views_api_or_agent_tool_modules():
    found = _objects_in_surface()
    grown = {path: n for path, n in found.items() if n > OBJECTS_IN_SURFACE.get(path, 0)}
    assert not grown, f"read through a selector or write through a service instead: {grown}"
    shrunk = {path: n for path, n in OBJECTS_IN_SURFACE.items() if found.get(path, 0) < n}
    assert not shrunk, f"lower these counts in OBJECTS_IN_SURFACE to what is left: {shrunk}"


def _access_rule_breaches() -> list[str]:
    breaches = []
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for path in sorted(APPS.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if "migrations" in relative.parts:
            continue
        home = len(relative.parts) == 3 and relative.name == "access.py"
        if relative.name == "access.py" and not home:
            breaches.append(f"{relative}: an access module belongs at apps/<app>/access.py")
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, definitions) and node.name.startswith("access_") and not home:
                breaches.append(f"{relative}: {node.name} belongs in apps/{relative.parts[1]}/access.py")
        for statement in tree.body if home else []:
            if isinstance(statement, definitions) and not statement.name.startswith(("access_", "_")):
                breaches.append(f"{relative}: {statement.name} is not an access_* function")
    return breaches


def test_access_functions_live_in_their_apps_access_module_and_nothing_else_does():
    breaches = _access_rule_breaches()
    assert not breaches, f"move or rename (access.py holds access_* functions only): {breaches}"


def _private_names_across_apps() -> list[str]:
    found = []
    for path in sorted(APPS.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if "migrations" in relative.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("apps."):
                if node.module.split(".")[1] == relative.parts[1]:
                    continue
                found += [
                    f"{relative}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    return found


def test_no_private_name_crosses_apps():
    found = _private_names_across_apps()
    assert not found, f"make these public in their app (or keep them inside it): {found}"


def _tool_registrations() -> set[str]:
    found = set()
    for path in sorted(APPS.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if "migrations" in relative.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    call = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if ast.unparse(call) in ("tool", "registry.tool"):
                        found.add(str(relative))
    return found


def test_agent_tools_are_defined_in_their_apps_agent_tools_module():
    found = _tool_registrations()
    assert "apps/runs/agent_tools.py" in found  # the rule sees a registration where there is one
    astray = sorted(
        path
        for path in found
        if not (Path(path).name == "agent_tools.py" and len(Path(path).parts) == 3)
        and not path.startswith("apps/runtime/tools/")
    )
    assert not astray, f"define agent tools in apps/<app>/agent_tools.py: {astray}"
