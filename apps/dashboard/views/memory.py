"""An agent's memory documents (MEMORY.md, memory.md, memory/…; every user's and the global ones):
everyone reads them with their index status; administrators create, replace and delete them.

The agent is found inside the tenant the page acts in: another tenant's is 404 whatever the method.
Changes go through ``apps.memory.services`` (audited, published on the ``memory`` topic; a Markdown
document is indexed again in the background).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import add_service_error
from apps.dashboard.views.confirm import confirm_action
from apps.memory import selectors, services
from apps.memory.access import access_document
from apps.memory.models import MAX_DOCUMENT_CHARS, MAX_PATH_CHARS, MemoryDocument
from apps.memory.search import SearchError, hybrid_search
from apps.memory.selectors import PathError
from apps.memory.services import MAX_USER_ID_CHARS
from apps.tenants.access import access_agent
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role

PAGE_SIZE = 50


class MemoryDocumentForm(forms.Form):
    path = forms.CharField(
        max_length=MAX_PATH_CHARS,
        label="Path",
        help_text="MEMORY.md, memory.md or memory/<name>, e.g. memory/projects.md.",
    )
    user_id = forms.CharField(
        required=False,
        max_length=MAX_USER_ID_CHARS,
        label="User id",
        help_text="The user whose memory it is; empty for the agent's global memory.",
    )
    content = forms.CharField(
        required=False,
        strip=False,
        max_length=MAX_DOCUMENT_CHARS,
        widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false", "class": "mono"}),
        label="Content",
        help_text="Markdown files (.md) are indexed for memory_search.",
    )


def _list_url(agent: Agent) -> str:
    return reverse("dashboard:memory", args=[agent.key])


def _document_url(agent: Agent, path: str, user_id: str, *, route: str = "memory_document") -> str:
    query = urlencode({"path": path, "user": user_id})
    return f"{reverse(f'dashboard:{route}', args=[agent.key])}?{query}"


def _document(request: DashboardRequest, agent: Agent) -> MemoryDocument:
    """The document named by ``?path=&user=``; 404 for a missing one or a path that is not memory."""
    try:
        path = selectors.clean_path(request.GET.get("path", ""))
    except PathError:
        raise Http404("Not a memory path.") from None
    user_id = request.GET.get("user", "")
    if len(user_id) > MAX_USER_ID_CHARS:
        raise Http404("No such user id.")
    return access_document(tenant=request.actor.tenant, agent=agent, user_id=user_id, path=path)


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def document_list(request: DashboardRequest, key: str) -> HttpResponse:
    """The agent's documents by path, then user; ``?user=`` one user's ("-" the global ones), ``?path=``
    a path prefix."""
    agent = access_agent(actor=request.actor, key=key)
    user = request.GET.get("user", "").strip()[:MAX_USER_ID_CHARS]
    prefix = request.GET.get("path", "").strip()[:MAX_PATH_CHARS]
    user_id = None if not user else ("" if user == "-" else user)
    documents = selectors.document_list(
        tenant=request.actor.tenant, agent=agent, user_id=user_id, path_prefix=prefix
    ).order_by("path", "user_id", "id")
    page = Paginator(documents, PAGE_SIZE).get_page(request.GET.get("page"))
    can_edit = request.actor.can(Role.ADMIN)
    query = request.GET.get("q", "").strip()
    as_user = request.GET.get("as_user", "").strip()[:MAX_USER_ID_CHARS]
    search: dict[str, Any] | None = None
    search_error = ""
    if query:
        try:
            result = hybrid_search(
                request.actor.tenant,
                agent,
                query,
                user_id=as_user,
                limit=10,
                lead=selectors.team_lead_of(tenant=request.actor.tenant, agent=agent),
            )
        except SearchError as error:
            search_error = f"{str(error).capitalize()}."
        else:
            owner = {hit.document_id: hit for hit in result.hits}
            found = selectors.documents_by_id(tenant=request.actor.tenant, ids=list(owner))
            search = {
                "mode_label": "full text and vectors" if result.mode == "hybrid" else "full text only",
                "warning": result.warning,
                "hits": [
                    (
                        hit,
                        _document_url(found[hit.document_id].agent, hit.path, found[hit.document_id].user_id),
                    )
                    for hit in result.hits
                    if hit.document_id in found
                ],
            }
    return render(
        request,
        "dashboard/memory/list.html",
        {
            "agent": agent,
            "page": page,
            "rows": [(row, _document_url(agent, row.path, row.user_id)) for row in page],
            "user": user,
            "prefix": prefix,
            "can_edit": can_edit,
            "form": MemoryDocumentForm(initial={"path": "memory/"}) if can_edit else None,
            "query": query,
            "as_user": as_user,
            "search": search,
            "search_error": search_error,
        },
    )


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def document_detail(request: DashboardRequest, key: str) -> HttpResponse:
    """One document: its text (an editor for administrators), index status and chunk count."""
    agent = access_agent(actor=request.actor, key=key)
    document = _document(request, agent)
    form = None
    if request.actor.can(Role.ADMIN):
        initial = {"path": document.path, "user_id": document.user_id, "content": document.content}
        form = MemoryDocumentForm(initial=initial)
    return _detail(request, agent, document, form, status=200)


def _detail(
    request: DashboardRequest,
    agent: Agent,
    document: MemoryDocument,
    form: MemoryDocumentForm | None,
    *,
    status: int,
) -> HttpResponse:
    chunks = selectors.chunk_count(tenant=request.actor.tenant, document=document)
    return render(
        request,
        "dashboard/memory/detail.html",
        {
            "agent": agent,
            "document": document,
            "size": len(document.content.encode("utf-8", errors="surrogatepass")),
            "chunks": chunks,
            "form": form,
            "can_edit": request.actor.can(Role.ADMIN),
            "delete_url": _document_url(
                agent, document.path, document.user_id, route="memory_document_delete"
            ),
        },
        status=status,
    )


@dashboard_view(Role.ADMIN, methods=("POST",))
def document_save(request: DashboardRequest, key: str) -> HttpResponse:
    """Create or replace a document (indexed again); a refusal shows on the form with nothing saved."""
    agent = access_agent(actor=request.actor, key=key)
    form = MemoryDocumentForm(request.POST)
    if form.is_valid():
        try:
            document, created = services.document_write(
                actor=request.actor,
                agent=agent,
                user_id=form.cleaned_data["user_id"].strip(),
                path=form.cleaned_data["path"].strip(),
                content=form.cleaned_data["content"].replace("\r\n", "\n"),
                reindex=True,
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            verb = "created" if created else "saved"
            messages.success(request, f"{document.path} of {agent.key} {verb}.")
            return redirect(_document_url(agent, document.path, document.user_id))
    return render(
        request,
        "dashboard/memory/form.html",
        {"agent": agent, "form": form},
        status=400,
    )


@dashboard_view(Role.ADMIN)
def document_delete(request: DashboardRequest, key: str) -> HttpResponse:
    """Ask for confirmation (GET), then delete a document with its search chunks (POST)."""
    agent = access_agent(actor=request.actor, key=key)
    document = _document(request, agent)
    whose = f"the user {document.user_id}" if document.user_id else "the agent's global memory"

    def perform() -> tuple[str, str]:
        services.document_delete(actor=request.actor, agent=agent, document=document)
        return f"{document.path} of {whose} deleted.", _list_url(agent)

    return confirm_action(
        request,
        title=f"Delete {document.path} of {whose} ({agent.key})?",
        body=(
            "The agent forgets what it saved there and memory_search no longer finds it. "
            "This cannot be undone."
        ),
        action=f"Delete {document.path}",
        back=_document_url(agent, document.path, document.user_id),
        perform=perform,
    )
