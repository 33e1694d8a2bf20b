"""The runs API: start a run of an agent, follow it, cancel it.

Members start runs (agent loops and people with a member key) and read them; a run's tool calls act as
whoever started it. ``wait`` (default true) answers when the run ends; ``wait: false`` answers 202 with
the queued run, which a django-q2 worker runs. Another tenant's run is 404 whatever the method.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django_q.tasks import async_task
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.runs import cron, runner, selectors, services
from apps.runs.api import serializers as s
from apps.runs.models import CronFiring, CronJob, Run
from apps.sessions.api.serializers import MessageInput, MessageOutput
from apps.tenants.access import access_agent
from apps.tenants.api.base import TenantScopedViewSet, TenantViewMixin
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list


def _run(actor: Any, id: str) -> Run:
    run = selectors.run_get(tenant=actor.tenant, id=id)
    if run is None:
        raise ServiceError(ErrorCode.NOT_FOUND, "No run with this id.", status=404)
    return run


class AgentRunsView(TenantViewMixin, APIView):
    """``POST agents/<key>/runs``: start a run of the agent in ``session_key`` answering ``message``.
    ``GET``: the agent's 50 latest runs (``runs/?agent=<key>`` pages through all)."""

    read_role = Role.MEMBER
    write_role = Role.MEMBER

    @extend_schema(responses={200: s.RunOutput(many=True)})
    def get(self, request: Request, key: str) -> Response:
        agent = access_agent(actor=self.actor, key=key)
        runs = selectors.run_list(tenant=self.actor.tenant, agent=agent)[:50]
        return Response(s.RunOutput(runs, many=True).data)

    @extend_schema(request=s.RunCreateInput, responses={201: s.RunOutput, 202: s.RunOutput})
    def post(self, request: Request, key: str) -> Response:
        agent = access_agent(actor=self.actor, key=key)
        data = s.RunCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        wait = values.pop("wait")
        if wait and values["runner"] == Run.Runner.EXTERNAL:
            message = "an external run is claimed and run by your runner: start it with wait false."
            raise ServiceError(ErrorCode.INVALID, f"wait: {message}", details={"wait": [message]})
        run = services.run_create(actor=self.actor, agent=agent, **values)
        if run.runner == Run.Runner.EXTERNAL:
            return Response(s.RunOutput(run).data, status=status.HTTP_202_ACCEPTED)
        if wait:  # to its end, or until a tool call waits for an approval (202: it goes on later)
            runner.execute(run.pk, run.tenant_id)
            run = _run(self.actor, str(run.pk))
            done = status.HTTP_201_CREATED if run.finished else status.HTTP_202_ACCEPTED
            return Response(s.RunOutput(run).data, status=done)
        tenant_id, run_id = str(run.tenant_id), str(run.pk)
        transaction.on_commit(lambda: async_task("apps.runs.tasks.execute_run", tenant_id, run_id))
        return Response(s.RunOutput(run).data, status=status.HTTP_202_ACCEPTED)


class RunViewSet(TenantScopedViewSet):
    """``GET runs/`` (filters ``agent``, ``status``, ``session``; newest first; paginated), ``GET
    runs/<id>/`` and ``POST runs/<id>/cancel`` (a queued run is cancelled at once, a running one at its
    next step; a finished one is 409)."""

    model = Run
    serializer_class = s.RunOutput
    read_role = Role.MEMBER
    write_role = Role.MEMBER
    run: Run

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if "pk" in kwargs:
            self.run = _run(self.actor, kwargs["pk"])

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset.none()
        filters = s.RunFilterInput(data=self.request.query_params.dict())
        filters.is_valid(raise_exception=True)
        params = filters.validated_data
        agent = None
        if params.get("agent"):
            agent = agent_list(tenant=self.actor.tenant).filter(key=params["agent"]).first()
            if agent is None:
                message = "no such agent in this tenant."
                raise ServiceError(ErrorCode.INVALID, f"agent: {message}", details={"agent": [message]})
        return selectors.run_list(
            tenant=self.actor.tenant,
            agent=agent,
            status=params.get("status") or "",
            session=params.get("session") or None,
        )

    @extend_schema(parameters=[s.RunFilterInput])
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.RunOutput(page, many=True).data)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(s.RunOutput(self.run).data)

    @extend_schema(request=None, responses={200: s.RunOutput})
    def claim(self, request: Request, pk: str) -> Response:
        run = services.run_claim(actor=self.actor, run=self.run)
        return Response(s.RunOutput(_run(self.actor, str(run.pk))).data)

    @extend_schema(request=s.RunFinishInput, responses={200: s.RunOutput})
    def finish(self, request: Request, pk: str) -> Response:
        data = s.RunFinishInput(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.run_finish(actor=self.actor, run=self.run, **data.validated_data)
        return Response(s.RunOutput(_run(self.actor, str(run.pk))).data)

    @extend_schema(request=MessageInput, responses={201: MessageOutput})
    def messages(self, request: Request, pk: str) -> Response:
        """An external runner adds a message of the run it works to its transcript (the run's session,
        marked as the run's: the run's page shows it)."""
        data = MessageInput(data=request.data)
        data.is_valid(raise_exception=True)
        message = services.run_message_append(actor=self.actor, run=self.run, **data.validated_data)
        return Response(MessageOutput(message).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: s.RunOutput})
    def cancel(self, request: Request, pk: str) -> Response:
        run = services.run_cancel(actor=self.actor, run=self.run)
        return Response(s.RunOutput(_run(self.actor, str(run.pk))).data)


class CronJobViewSet(TenantScopedViewSet):
    """Scheduled jobs of the tenant's agents. ``GET|POST cron/`` (filter ``agent``), ``GET|PATCH|DELETE
    cron/<id>/``, ``POST cron/<id>/run`` (start it now, in the background) and ``GET cron/<id>/firings/``
    (newest first). Members read; administrators create, change, run and delete."""

    model = CronJob
    serializer_class = s.CronJobOutput
    read_role = Role.MEMBER
    write_role = Role.ADMIN
    job: CronJob

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if "pk" in kwargs:
            found = selectors.cron_job_get(tenant=self.actor.tenant, id=kwargs["pk"])
            if found is None:
                raise ServiceError(ErrorCode.NOT_FOUND, "No scheduled job with this id.", status=404)
            self.job = found

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset.none()
        agent = self.request.query_params.get("agent")
        return selectors.cron_job_list(tenant=self.actor.tenant, agent_key=agent[:255] if agent else "")

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.CronJobOutput(page, many=True).data)

    @extend_schema(request=s.CronJobCreateInput, responses={201: s.CronJobOutput})
    def create(self, request: Request) -> Response:
        data = s.CronJobCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        agent = agent_list(tenant=self.actor.tenant).filter(key=values.pop("agent")).first()
        if agent is None:
            message = "no such agent in this tenant."
            raise ServiceError(ErrorCode.INVALID, f"agent: {message}", details={"agent": [message]})
        job = cron.job_create(actor=self.actor, agent=agent, **values)
        return Response(s.CronJobOutput(job).data, status=status.HTTP_201_CREATED)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(s.CronJobOutput(self.job).data)

    @extend_schema(request=s.CronJobUpdateInput, responses={200: s.CronJobOutput})
    def partial_update(self, request: Request, pk: str) -> Response:
        data = s.CronJobUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        job = cron.job_update(actor=self.actor, job=self.job, **data.validated_data)
        return Response(s.CronJobOutput(job).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        cron.job_delete(actor=self.actor, job=self.job)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={202: s.CronFiringOutput})
    def run_now(self, request: Request, pk: str) -> Response:
        firing = cron.fire(str(self.actor.tenant.pk), str(self.job.pk), manual=True, actor=self.actor)
        if firing is None:
            raise ServiceError(ErrorCode.NOT_FOUND, "No scheduled job with this id.", status=404)
        if firing.status != CronFiring.Status.STARTED:
            raise ServiceError(ErrorCode.CONFLICT, f"the job did not start: {firing.detail}.", status=409)
        return Response(s.CronFiringOutput(firing).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={200: s.CronFiringOutput(many=True)})
    def firings(self, request: Request, pk: str) -> Response:
        rows = selectors.cron_firing_list(tenant=self.actor.tenant, job=self.job)
        return Response(s.CronFiringOutput(rows, many=True).data)
