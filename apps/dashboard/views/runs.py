"""Agent runs, their sessions and scheduled jobs.

Members read everything here (runs with their transcripts and subagents, sessions with their whole
history, scheduled jobs with their firings) and cancel runs; administrators archive and delete sessions
and create, change, run and delete scheduled jobs. Destructive actions ask first.

Every object is found inside the tenant the page acts in: another tenant's is 404 whatever the method.
Changes go through ``apps.runs.services``, ``apps.runs.cron`` and ``apps.sessions.services`` (audited,
published on the ``runs`` and ``sessions`` topics); a refusal shows on the form with nothing lost.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import DashboardForm, add_service_error
from apps.dashboard.views.confirm import confirm_action, set_enabled
from apps.runs import cron, selectors, services
from apps.runs.models import CronFiring, CronJob, Run
from apps.sessions import selectors as session_selectors
from apps.sessions import services as session_services
from apps.sessions.access import access_session
from apps.sessions.models import MAX_USER_ID, Session, SessionMessage
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list

PAGE_SIZE = 50
MESSAGES_PER_PAGE = 100
MAX_TRANSCRIPT = 1_000  # messages of one run shown on its page
FOLD_CHARS = 1_500  # longer contents are folded behind their first lines
PREVIEW_CHARS = 120
PLACEHOLDER = uuid.UUID(int=0)  # a run's id in URL templates the page's script fills in
ANY = [("", "any")]


# Access: the tenant's object or 404 (another tenant's included).


def _run(request: DashboardRequest, id: uuid.UUID) -> Run:
    run = selectors.run_get(tenant=request.actor.tenant, id=id)
    if run is None:
        raise Http404("No run with this id.")
    return run


def _session(request: DashboardRequest, id: uuid.UUID) -> Session:
    try:
        return access_session(actor=request.actor, id=id)
    except ServiceError:
        raise Http404("No session with this id.") from None


def _job(request: DashboardRequest, id: uuid.UUID) -> CronJob:
    job = selectors.cron_job_get(tenant=request.actor.tenant, id=id)
    if job is None:
        raise Http404("No scheduled job with this id.")
    return job


def _agent_choices(request: DashboardRequest) -> list[tuple[str, str]]:
    return [(a.key, a.key) for a in agent_list(tenant=request.actor.tenant).order_by("key")]


def _agent(request: DashboardRequest, key: str) -> Agent | None:
    return agent_list(tenant=request.actor.tenant).filter(key=key).first() if key else None


def _folded(text: str) -> dict[str, Any]:
    """A message content as a page shows it: whole when short, else a preview with the rest folded."""
    return {"text": text, "folded": len(text) > FOLD_CHARS, "preview": text[: PREVIEW_CHARS * 3]}


# Runs.


class RunFilterForm(forms.Form):
    agent = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, choices=ANY + list(Run.Status.choices))
    kind = forms.ChoiceField(required=False, choices=ANY + list(Run.Kind.choices))

    def __init__(self, *args: Any, agents: list[tuple[str, str]], **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = ANY + agents  # type: ignore[attr-defined]


@dashboard_view(Role.MEMBER, methods=READ_ONLY)
def run_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's runs, newest first, by agent, status and kind; the first page updates live."""
    form = RunFilterForm(request.GET or None, agents=_agent_choices(request))
    filters = {"agent": "", "status": "", "kind": ""}
    valid = not form.is_bound or form.is_valid()
    if form.is_bound and valid:
        filters = {name: form.cleaned_data[name] for name in filters}
    runs = selectors.run_list(
        tenant=request.actor.tenant,
        agent_key=filters["agent"],
        status=filters["status"],
        kind=filters["kind"],
    )
    page = Paginator(runs if valid else runs.none(), PAGE_SIZE).get_page(request.GET.get("page"))
    live = page.number == 1 and not form.errors
    return render(
        request,
        "dashboard/runs/list.html",
        {
            "form": form,
            "page": page,
            "filtered": any(filters.values()),
            "live": live,
            "live_config": {
                "mode": "list",
                "filters": filters,
                "url": reverse("dashboard:runs_detail", args=[PLACEHOLDER]),
                "session_url": reverse("dashboard:runs_session", args=[PLACEHOLDER]),
            },
        },
    )


def _transcript(run: Run) -> list[dict[str, Any]]:
    rows = session_selectors.source_messages(
        tenant=run.tenant, session_id=run.session_id, source=f"run:{run.pk}"
    )[:MAX_TRANSCRIPT]
    return [_message(m) for m in rows]


def _message(message: SessionMessage) -> dict[str, Any]:
    calls = []
    for call in message.tool_calls if isinstance(message.tool_calls, list) else []:
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        arguments = function.get("arguments", call.get("arguments", ""))
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):
                arguments = json.dumps(json.loads(arguments), indent=2, sort_keys=True, ensure_ascii=False)
        else:
            arguments = json.dumps(arguments, indent=2, sort_keys=True, ensure_ascii=False)
        calls.append(
            {
                "id": str(call.get("id", "")),
                "name": str(function.get("name") or call.get("name") or ""),
                "arguments": _folded(str(arguments)),
            }
        )
    return {"message": message, "content": _folded(message.content), "calls": calls}


@dashboard_view(Role.MEMBER, methods=READ_ONLY)
def run_detail(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """One run: its fields, its transcript (the session's messages of this run), its subagents, and
    Cancel while it is queued or running; new messages and status changes show live."""
    run = _run(request, id)
    return render(
        request,
        "dashboard/runs/detail.html",
        {
            "run": run,
            "transcript": _transcript(run),
            "tree": selectors.run_subagent_tree(tenant=request.actor.tenant, run=run),
            "can_cancel": not run.finished,
            "live_config": {
                "mode": "detail",
                "run": str(run.pk),
                "session": str(run.session_id),
                "source": f"run:{run.pk}",
                "url": reverse("dashboard:runs_detail", args=[PLACEHOLDER]),
            },
        },
    )


@dashboard_view(Role.MEMBER)
def run_cancel(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then cancel the run (POST): at once when queued, at its next step
    when running."""
    run = _run(request, id)
    back = reverse("dashboard:runs_detail", args=[run.pk])

    def perform() -> str:
        done = services.run_cancel(actor=request.actor, run=run)
        if done.status == Run.Status.CANCELLED:
            return "Run cancelled."
        return "Cancellation requested: the run stops at its next step."

    return confirm_action(
        request,
        title=f"Cancel this {run.kind} run of {run.agent.key}?",
        body="A queued run is cancelled at once, and so is one waiting for an approval (the approval is "
        "denied); a running one stops before its next model call or tool call. What it already did "
        "stays done.",
        action="Cancel run",
        back=back,
        perform=perform,
    )


# Sessions.


class SessionFilterForm(forms.Form):
    agent = forms.ChoiceField(required=False)
    user = forms.CharField(required=False, max_length=MAX_USER_ID, label="User id")
    status = forms.ChoiceField(required=False, choices=ANY + list(Session.Status.choices))
    q = forms.CharField(required=False, max_length=200, label="Key or label")

    def __init__(self, *args: Any, agents: list[tuple[str, str]], **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = ANY + agents  # type: ignore[attr-defined]


@dashboard_view(Role.MEMBER, methods=READ_ONLY)
def session_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's sessions, most recently active first, by agent, user, status and key or label."""
    form = SessionFilterForm(request.GET or None, agents=_agent_choices(request))
    sessions = session_selectors.session_list(tenant=request.actor.tenant)
    filtered = False
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        filtered = any(data.values())
        sessions = session_selectors.session_list(
            tenant=request.actor.tenant,
            agent=_agent(request, data["agent"]),
            user_id=data["user"].strip() or None,
            status=data["status"] or None,
            query=data["q"].strip(),
        )
    elif form.is_bound:
        sessions = sessions.none()
    page = Paginator(sessions, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "dashboard/runs/sessions.html", {"form": form, "page": page, "filtered": filtered})


@dashboard_view(Role.MEMBER, methods=READ_ONLY)
def session_detail(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """One session: its whole history, 100 messages a page, its parent and child sessions and its runs."""
    session = _session(request, id)
    tenant = request.actor.tenant
    history = session_selectors.history(tenant=tenant, session=session)
    page = Paginator(history, MESSAGES_PER_PAGE).get_page(request.GET.get("page"))
    children = session_selectors.children(tenant=tenant, session=session)
    runs = selectors.run_list(tenant=tenant, session=session)
    return render(
        request,
        "dashboard/runs/session.html",
        {
            "session": session,
            "page": page,
            "history": [_message(m) for m in page],
            "children": children.order_by("-created_at", "id")[:PAGE_SIZE],
            "runs": runs[:PAGE_SIZE],
            "can_edit": request.actor.can(Role.ADMIN),
        },
    )


@dashboard_view(Role.ADMIN)
def session_archive(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then archive the session (POST): it takes no new messages or runs."""
    session = _session(request, id)

    def perform() -> str:
        session_services.session_update(actor=request.actor, session=session, status=Session.Status.ARCHIVED)
        return f"Session {session.key} archived."

    return confirm_action(
        request,
        title=f"Archive the session {session.key} of {session.agent.key}?",
        body="An archived session keeps its history but takes no new messages or runs until it is "
        "re-activated.",
        action="Archive session",
        back=reverse("dashboard:runs_session", args=[session.pk]),
        perform=perform,
    )


@dashboard_view(Role.ADMIN, methods=("POST",))
def session_unarchive(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Re-activate an archived session."""
    session = _session(request, id)
    try:
        session_services.session_update(actor=request.actor, session=session, status=Session.Status.ACTIVE)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Session {session.key} is active again.")
    return redirect("dashboard:runs_session", session.pk)


@dashboard_view(Role.ADMIN)
def session_delete(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then delete the session with its messages and runs (POST)."""
    session = _session(request, id)

    def perform() -> tuple[str, str]:
        session_services.session_delete(actor=request.actor, session=session)
        return f"Session {session.key} deleted.", reverse("dashboard:runs_sessions")

    return confirm_action(
        request,
        title=f"Delete the session {session.key} of {session.agent.key}?",
        body=f"Its {session.message_count} messages and its runs are deleted with it; sessions it spawned "
        "keep theirs. This cannot be undone.",
        action="Delete session",
        back=reverse("dashboard:runs_session", args=[session.pk]),
        perform=perform,
    )


# Scheduled jobs.


class CronJobForm(DashboardForm):
    agent = forms.ChoiceField(help_text="The agent the job starts a run of.")
    name = forms.CharField(max_length=cron.MAX_NAME_CHARS, help_text="Unique among the agent's jobs.")
    schedule = forms.CharField(
        max_length=100,
        help_text="A five-field cron expression (0 9 * * 1-5) or an interval: every 15m, every 2h.",
        widget=forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
    )
    message = forms.CharField(
        max_length=cron.MAX_MESSAGE_CHARS,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text="What the agent is asked at each firing.",
    )
    user_id = forms.CharField(
        required=False,
        max_length=200,
        label="User id",
        help_text="The user the runs act for; empty for none.",
    )
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args: Any, agents: list[tuple[str, str]], job: CronJob | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = agents  # type: ignore[attr-defined]
        if job is not None:  # a job keeps its agent and user
            for name in ("agent", "user_id"):
                self.fields[name].disabled = True
                self.fields[name].help_text = "Set when the job was created."

    @staticmethod
    def initial_for(job: CronJob) -> dict[str, Any]:
        return {
            "agent": job.agent.key,
            "name": job.name,
            "schedule": job.schedule,
            "message": job.message,
            "user_id": job.user_id,
            "enabled": job.enabled,
        }


class CronFilterForm(forms.Form):
    agent = forms.ChoiceField(required=False)

    def __init__(self, *args: Any, agents: list[tuple[str, str]], **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = ANY + agents  # type: ignore[attr-defined]


@dashboard_view(Role.MEMBER, methods=READ_ONLY)
def cron_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's scheduled jobs by agent and name, with their schedule, next and last firing."""
    form = CronFilterForm(request.GET or None, agents=_agent_choices(request))
    valid = not form.is_bound or form.is_valid()
    agent = form.cleaned_data["agent"] if form.is_bound and valid else ""
    jobs = selectors.cron_job_list(tenant=request.actor.tenant, agent_key=agent)
    page = Paginator(jobs if valid else jobs.none(), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "dashboard/runs/cron_list.html",
        {"form": form, "page": page, "filtered": bool(agent), "can_edit": request.actor.can(Role.ADMIN)},
    )


@dashboard_view(Role.ADMIN)
def cron_create(request: DashboardRequest) -> HttpResponse:
    """A new scheduled job; a refusal shows on the form with what was typed kept."""
    agents = _agent_choices(request)
    form = CronJobForm(request.POST if request.method == "POST" else None, agents=agents)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        agent = _agent(request, data["agent"])
        try:
            if agent is None:
                raise ServiceError(
                    ErrorCode.INVALID, "agent: no such agent.", details={"agent": ["No such agent."]}
                )
            job = cron.job_create(
                actor=request.actor,
                agent=agent,
                name=data["name"].strip(),
                schedule=data["schedule"],
                message=data["message"],
                user_id=data["user_id"].strip(),
                enabled=bool(data["enabled"]),
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Scheduled job {job.name} of {agent.key} created.")
            return redirect("dashboard:cron_job", job.pk)
    status = 400 if form.is_bound else 200
    return render(request, "dashboard/runs/cron_form.html", {"form": form, "job": None}, status=status)


@dashboard_view(Role.ADMIN)
def cron_edit(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Change a job's name, schedule, message or state (its agent and user stay)."""
    job = _job(request, id)
    form = CronJobForm(
        request.POST if request.method == "POST" else None,
        agents=[(job.agent.key, job.agent.key)],
        job=job,
        initial=CronJobForm.initial_for(job),
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            cron.job_update(
                actor=request.actor,
                job=job,
                name=data["name"].strip(),
                schedule=data["schedule"],
                message=data["message"],
                enabled=bool(data["enabled"]),
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Scheduled job {data['name'].strip()} saved.")
            return redirect("dashboard:cron_job", job.pk)
    status = 400 if form.is_bound else 200
    return render(request, "dashboard/runs/cron_form.html", {"form": form, "job": job}, status=status)


@dashboard_view(Role.MEMBER, methods=READ_ONLY)
def cron_detail(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """One job and its latest firings (started, skipped or failed; by schedule or run now)."""
    job = _job(request, id)
    firings = selectors.cron_firing_list(tenant=request.actor.tenant, job=job)
    return render(
        request,
        "dashboard/runs/cron_detail.html",
        {"job": job, "firings": firings, "can_edit": request.actor.can(Role.ADMIN)},
    )


@dashboard_view(Role.ADMIN, methods=("POST",))
def cron_enabled(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """POST ``enabled=1|0``: turn the job's schedule on or off."""
    job = _job(request, id)
    if request.POST.get("next") == "list":
        back = reverse("dashboard:cron")
    else:
        back = reverse("dashboard:cron_job", args=[job.pk])
    return set_enabled(
        request,
        back=back,
        label=f"Scheduled job {job.name}",
        update=lambda value: cron.job_update(actor=request.actor, job=job, enabled=value),
    )


@dashboard_view(Role.ADMIN, methods=("POST",))
def cron_run(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Start the job now, in the background; the firing says whether it started."""
    job = _job(request, id)
    firing = cron.fire(str(request.actor.tenant.pk), str(job.pk), manual=True, actor=request.actor)
    if firing is None:
        raise Http404("No scheduled job with this id.")
    if firing.status == CronFiring.Status.STARTED and firing.run_id is not None:
        messages.success(request, f"Scheduled job {job.name} started: run {firing.run_id}.")
    else:
        messages.error(request, f"Scheduled job {job.name} did not start: {firing.detail}.")
    return redirect("dashboard:cron_job", job.pk)


@dashboard_view(Role.ADMIN)
def cron_delete(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then delete the job and its schedule (POST)."""
    job = _job(request, id)

    def perform() -> tuple[str, str]:
        cron.job_delete(actor=request.actor, job=job)
        return f"Scheduled job {job.name} deleted.", reverse("dashboard:cron")

    return confirm_action(
        request,
        title=f"Delete the scheduled job {job.name} of {job.agent.key}?",
        body="Its schedule stops and its firings are deleted; the runs it started and their session stay. "
        "This cannot be undone.",
        action="Delete job",
        back=reverse("dashboard:cron_job", args=[job.pk]),
        perform=perform,
    )
