"""Every dashboard page in headless Chromium, at desktop (1440 px) and phone (390 px) width: it loads with
no console error, no horizontal overflow, and no serious or critical axe-core violation. The pages come
from the URL resolver: a route without parameters is visited as it is, a route with parameters needs an
entry in ``PARAMS`` (built from objects made here), so a new page cannot be left out. Routes that are not
HTML pages on GET (POST-only actions, JSON) are recognised by a test-client GET before the browser starts.
Screenshots of the Overview and the approval inbox at both widths are kept in
``$TOOLGATE_ARTIFACTS_DIR/screenshots`` (default ``test-artifacts/``).

axe-core comes from ``scripts/axe-deps.sh`` (``make system-deps``); without it this test fails.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from playwright.sync_api import Browser, Page, expect, sync_playwright

from apps.audit.models import AuditEvent
from apps.mcp_grants.models import AgentGrant, MCPServer, UserGrant
from apps.policy import approval_services
from apps.policy.approval_models import ApprovalRule
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api import isolation_approvals as approvals
from tests.api.isolation_context_files import make_context_files
from tests.api.isolation_custom_tools import make_custom_tools
from tests.api.isolation_knowledge import make_graph
from tests.api.isolation_llm import make_provider
from tests.api.isolation_mcp import make_mcp
from tests.api.isolation_memory import make_memory
from tests.api.isolation_messaging import make_channel
from tests.api.isolation_policy import CHANNEL
from tests.api.isolation_policy import _version as make_policy_version
from tests.api.isolation_runs import make_cron_job, make_run
from tests.api.isolation_sandbox import make_sandbox_container
from tests.api.isolation_secure_cli import make_secure_cli
from tests.api.isolation_sessions import make_session
from tests.api.isolation_skills import make_skills
from tests.api.isolation_support import _api_key, _membership
from tests.api.isolation_teams import make_board
from tests.browser.browser import CHROMIUM, CHROMIUM_ARGS, log_in

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / ".tools" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
ARTIFACTS = Path(os.environ.get("TOOLGATE_ARTIFACTS_DIR", ROOT / "test-artifacts"))
WIDTHS = {"desktop": (1440, 900), "phone": (390, 844)}
SCREENSHOTS = {"overview": "dashboard:home", "approvals": "dashboard:approvals"}
Objects = dict[str, str]

# Every dashboard route with parameters, and its parameters from the objects made in ``_objects``.
PARAMS: dict[str, Callable[[Objects], dict[str, str]]] = {}


def _params(*names: str, **kwargs: str) -> None:
    def make(objects: Objects) -> dict[str, str]:
        return {param: objects[name] for param, name in kwargs.items()}

    for name in names:
        PARAMS[name] = make


_params("agent_edit", "agent_delete", "policy_agent", "policy_agent_save", key="agent")
_params("policy_agent_delete", "policy_agent_versions", "sandbox_agent", key="agent")
_params("agent_mcp", "agent_mcp_read", "agent_mcp_prompt", key="agent")
_params("api_key_revoke", id="api_key")
_params("member_role", "member_remove", id="membership")
_params(
    "policy_channel",
    "policy_channel_save",
    "policy_channel_delete",
    "policy_channel_versions",
    channel="channel",
)
_params("policy_version", "policy_version_rollback", id="policy_version")
_params("approval_decide", "approval_allow_always", "approval_deny", id="approval")
_params("approval_rule_revoke", id="rule")
_params("team_board", "team_settings", "team_member_add", "team_archive", "team_task_create", id="team")
_params("team_escalations", "team_audit", id="team")
_params("team_member_remove", id="team", key="team_member")
_params("team_task", "team_task_assign", "team_task_cancel", "team_task_comment", id="team", task_id="task")
_params("team_task_retry", id="team", task_id="task_failed")
_params("team_task_approve", "team_task_reject", id="team", task_id="task_review")
_params("team_escalation_retry", "team_escalation_resolve", id="team", escalation_id="escalation")
_params("mcp_server", "mcp_server_edit", "mcp_server_enable", "mcp_server_delete", id="server")
_params("mcp_credential_create", "mcp_server_test", "mcp_server_refresh", id="server")
_params("mcp_agent_grant_create", "mcp_user_grant_create", id="server")
_params("mcp_credential_edit", "mcp_credential_delete", id="server", user_id="mcp_user")
_params(
    "mcp_agent_grant_edit",
    "mcp_agent_grant_enable",
    "mcp_agent_grant_delete",
    id="server",
    grant_id="agent_grant",
)
_params(
    "mcp_user_grant_edit",
    "mcp_user_grant_enable",
    "mcp_user_grant_delete",
    id="server",
    grant_id="user_grant",
)
_params("mcp_request_review", id="mcp_request")
_params(
    "custom_tool",
    "custom_tool_edit",
    "custom_tool_enable",
    "custom_tool_delete",
    "custom_tool_test",
    id="tool",
)
_params(
    "secure_cli", "secure_cli_edit", "secure_cli_enable", "secure_cli_delete", "secure_cli_test", id="cli"
)
_params("secure_cli_grant_create", "secure_cli_credential_create", id="cli")
_params("secure_cli_grant_edit", "secure_cli_grant_delete", id="cli", key="cli_agent")
_params("secure_cli_credential_edit", "secure_cli_credential_delete", id="cli", user_id="cli_user")
_params("sandbox_container_stop", id="container")
_params("context_files", key="ctx_agent")
_params("context_file", "context_file_save", "context_file_delete", key="ctx_agent", name="ctx_file")
_params("context_file_bootstrap_reset", key="ctx_agent", user_id="ctx_user")
_params("context_file_user_delete", key="ctx_agent", user_id="ctx_user", name="ctx_user_file")
_params("memory", "memory_document", "memory_document_save", "memory_document_delete", key="memory_agent")
_params("knowledge", "knowledge_entity_create", key="kg_agent")
_params("knowledge_entity", "knowledge_entity_edit", "knowledge_entity_delete", key="kg_agent", pk="entity")
_params("knowledge_relation_add", key="kg_agent", pk="entity")
_params("knowledge_relation_delete", key="kg_agent", pk="relation")
_params("skill", "skill_edit", "skill_enable", "skill_delete", id="skill")
_params("provider_edit", "provider_test", "provider_delete", id="provider")
_params("channel_edit", "channel_test", "channel_messages", "channel_delete", id="msg_channel")
_params("runs_detail", "runs_cancel", id="run")
_params("runs_session", "runs_session_archive", "runs_session_unarchive", "runs_session_delete", id="session")
_params("cron_job", "cron_edit", "cron_enabled", "cron_run", "cron_delete", id="cron")
_params("tool_call_detail", id="tool_call")
_params("audit_event", id="audit_event")
# Platform staff's pages (the admin persona is staff here: tenant roles get 404 there).
_params("platform_tenant_suspend", "platform_tenant_resume", "platform_tenant_quota", slug="tenant_slug")


def _routes(entries: list[Any], namespace: str | None = None) -> list[tuple[str, bool]]:
    """(route name, has parameters) of every route in the dashboard namespace."""
    found: list[tuple[str, bool]] = []
    for entry in entries:
        if isinstance(entry, URLResolver):
            found += _routes(entry.url_patterns, entry.namespace or namespace)
        elif isinstance(entry, URLPattern) and namespace == "dashboard" and entry.name:
            found.append((entry.name, bool(entry.pattern.converters)))
    return found


def _a_tool_call(tenant: Tenant, agent_key: str) -> str:
    from apps.runtime import pipeline
    from apps.toolkit import gateway

    agent = Agent.objects.for_tenant(tenant).get(key=agent_key)
    request = gateway.CallRequest(agent=agent, tool="datetime", args={"timezone": "UTC"})
    return str(uuid.UUID(pipeline.execute(actor=Actor.system(tenant), request=request).call_id))


def _objects(tenant: Tenant) -> Objects:
    """One of everything a dashboard page can show, in ``tenant``."""
    agent = approvals._agent(tenant)
    pending = approvals._pending(tenant, agent)
    decided = approvals._pending(tenant, agent, command="touch another-file")
    approval_services.approval_decide(actor=Actor.system(tenant), approval=decided, decision="allow-always")
    board = make_board(tenant, name="Board")
    mcp = make_mcp(tenant, prefix="page")
    server = MCPServer.objects.for_tenant(tenant).get(name=mcp["server"])
    cli = make_secure_cli(tenant, prefix="page")
    ctx = make_context_files(tenant, prefix="page")
    graph = make_graph(tenant, prefix="page")
    objects = {
        "agent": "a-secret-agent",  # made with the policy version's policies
        "policy_version": make_policy_version(tenant)["pk"],
        "channel": CHANNEL,
        "api_key": _api_key(tenant)["pk"],
        "membership": _membership(tenant)["pk"],
        "approval": str(pending.pk),
        "team": board["team"],
        "team_member": board["member"],
        "task": board["task_pending"],
        "task_failed": board["task_failed"],
        "task_review": board["task_review"],
        "escalation": board["escalation"],
        "server": str(server.pk),
        "mcp_user": mcp["user"],
        "agent_grant": str(AgentGrant.objects.for_tenant(tenant).get(server=server).pk),
        "user_grant": str(UserGrant.objects.for_tenant(tenant).get(server=server).pk),
        "mcp_request": mcp["request"],
        "tool": make_custom_tools(tenant, prefix="page")["tool"],
        "cli": cli["binary"],
        "cli_agent": cli["agent"],
        "cli_user": cli["user"],
        "container": str(make_sandbox_container(tenant, prefix="page").pk),
        "ctx_agent": ctx["key"],
        "ctx_user": ctx["user_id"],
        "ctx_file": "SOUL.md",
        "ctx_user_file": "USER.md",
        "memory_agent": make_memory(tenant, prefix="page")["key"],
        "kg_agent": graph["key"],
        "entity": graph["entity"],
        "relation": graph["relation"],
        "skill": make_skills(tenant, prefix="page")["skill"],
        "provider": make_provider(tenant, name="page-provider")["pk"],
        "msg_channel": make_channel(tenant, name="page-channel")["pk"],
        "run": make_run(tenant, prefix="page")["pk"],
        "session": make_session(tenant, prefix="page")["pk"],
        "cron": make_cron_job(tenant, prefix="page")["pk"],
    }
    objects["rule"] = str(ApprovalRule.objects.for_tenant(tenant).get().pk)
    objects["tool_call"] = _a_tool_call(tenant, objects["agent"])
    objects["audit_event"] = str(AuditEvent.objects.for_tenant(tenant).order_by("-created_at")[0].pk)
    objects["tenant_slug"] = tenant.slug
    return objects


def _pages(client: Client, objects: Objects) -> list[str]:
    """The URL of every dashboard route that answers a GET with an HTML page."""
    routes = _routes(get_resolver().url_patterns)
    missing = sorted(name for name, has_params in routes if has_params and name not in PARAMS)
    assert not missing, f"dashboard routes with parameters and no entry in PARAMS: {missing}"
    pages: list[str] = []
    for name, has_params in routes:
        url = reverse(f"dashboard:{name}", kwargs=PARAMS[name](objects) if has_params else None)
        response = client.get(url)
        assert response.status_code < 500, f"GET {url}: {response.status_code}"
        html = response.status_code == 200 and response["Content-Type"].startswith("text/html")
        if html and b"<html" in response.content:  # not a fragment a live page reads
            pages.append(url)
    return pages


AXE_RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations
    .filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => `${v.impact} ${v.id}: ${v.help}\\n` +
      v.nodes.slice(0, 5).map(n => `      ${n.target.join(' ')}: ${n.failureSummary.replace(/\\n/g, ' ')}`)
        .join('\\n'));
}"""

OVERFLOW = """() => {
  const width = window.innerWidth;
  if (document.documentElement.scrollWidth <= width) return null;
  const wide = [...document.querySelectorAll('body *')]
    .filter(n => n.getBoundingClientRect().right > width + 1
      && n.parentElement.getBoundingClientRect().right <= width + 1)  // where the overflow starts
    .slice(0, 4)
    .map(n => {
      const classes = typeof n.className === 'string' && n.className.trim()
        ? '.' + n.className.trim().split(/\\s+/).join('.') : '';
      return `${n.tagName.toLowerCase()}${classes} (right ${Math.round(n.getBoundingClientRect().right)})`;
    });
  return `scrollWidth ${document.documentElement.scrollWidth} > ${width}: ${wide.join(', ')}`;
}"""


def _check_navigation(page: Page, *, narrow: bool) -> None:
    """On a phone the sections fold behind the Menu button, which opens and closes them; on a desktop the
    button is not there and the sections are."""
    toggle = page.get_by_role("button", name="Menu")
    sections = page.get_by_role("navigation", name="Sections")
    if not narrow:
        expect(toggle).to_be_hidden()
        expect(sections).to_be_visible()
        return
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(sections).to_be_hidden()
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(sections.get_by_role("link", name="Overview")).to_be_visible()
    toggle.click()
    expect(sections).to_be_hidden()


def _check_pages(browser: Browser, base: str, email: str, width: str, urls: list[str]) -> list[str]:
    """Visits ``urls`` logged in as ``email`` at ``width``; returns what is wrong, page by page."""
    w, h = WIDTHS[width]
    context = browser.new_context(viewport={"width": w, "height": h}, base_url=base)
    page: Page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    log_in(page, base, email)
    _check_navigation(page, narrow=w < 800)
    failures: list[str] = []
    only = re.compile(os.environ.get("TOOLGATE_EVERY_PAGE_ONLY", ""))  # to look again at a few pages
    for url in filter(only.search, urls):
        errors.clear()
        page.goto(url, wait_until="load")
        page.add_script_tag(path=str(AXE))
        violations = page.evaluate(AXE_RUN)
        overflow = page.evaluate(OVERFLOW)
        if os.environ.get("TOOLGATE_EVERY_PAGE_SHOTS"):  # every page, to look at the layout by eye
            name = re.sub(r"[^A-Za-z0-9]+", "-", url).strip("-") or "home"
            page.screenshot(path=str(ARTIFACTS / "screenshots" / "pages" / f"{name}-{w}.png"), full_page=True)
        for name, route in SCREENSHOTS.items():
            if url == reverse(route) and email.startswith("admin@"):
                page.screenshot(path=str(ARTIFACTS / "screenshots" / f"{name}-{w}.png"), full_page=True)
        problems = [*errors, *(f"axe {v}" for v in violations)]
        if overflow:
            problems.append(f"horizontal overflow: {overflow}")
        if problems:
            failures.append(f"{width} {email} {url}\n    " + "\n    ".join(problems))
    context.close()
    return failures


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
@pytest.mark.timeout(600)  # about 80 pages, each loaded and checked by axe-core
@pytest.mark.parametrize(
    ("role", "width"), [(Role.ADMIN, "desktop"), (Role.ADMIN, "phone"), (Role.MEMBER, "phone")]
)
def test_every_dashboard_page(live, role, width):
    assert AXE.exists(), f"axe-core is missing at {AXE}: run `make system-deps` (scripts/axe-deps.sh)"
    tenant = factories.make_tenant("pages")
    admin = factories.make_user(tenant, Role.ADMIN, email="admin@pages.test")
    # Staff too, so that the platform pages are checked like the rest (a tenant page shows the same).
    type(admin).objects.filter(pk=admin.pk).update(is_staff=True)
    member = factories.make_user(tenant, Role.MEMBER, email="member@pages.test")
    objects = _objects(tenant)
    as_admin, as_member = Client(), Client()
    as_admin.force_login(admin)
    as_member.force_login(member)
    admin_pages = _pages(as_admin, objects)
    member_pages = _pages(as_member, objects)
    assert len(admin_pages) > 60, admin_pages
    assert reverse("dashboard:home") in member_pages
    assert len(member_pages) < len(admin_pages)
    favicon = as_member.get("/favicon.ico")  # asked for by browsers whatever the page links
    assert favicon.status_code == 301, favicon
    assert favicon["Location"].endswith("/favicon.svg"), favicon["Location"]
    user, urls = (admin, admin_pages) if role == Role.ADMIN else (member, member_pages)
    w, _ = WIDTHS[width]
    shots = [ARTIFACTS / "screenshots" / f"{name}-{w}.png" for name in SCREENSHOTS] if user == admin else []
    (ARTIFACTS / "screenshots" / "pages").mkdir(parents=True, exist_ok=True)
    for path in shots:  # a screenshot from an earlier run must not pass for this run's
        path.unlink(missing_ok=True)
    base = live.daphne()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            failures = _check_pages(browser, base, user.email, width, urls)
        finally:
            browser.close()

    assert not failures, f"{len(failures)} page(s) with problems:\n" + "\n".join(failures)
    for path in shots:
        assert path.stat().st_size > 0, path
