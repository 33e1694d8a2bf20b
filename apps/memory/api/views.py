"""The memory API: an agent's memory documents (every user's and the global ones).

Viewers read, administrators write and delete. Every route resolves the agent in the caller's tenant
first, so another tenant's agent is 404 whatever the method. Writes go through
``apps.memory.services`` (audited, published on the ``memory`` topic); a written Markdown document is
indexed again in the background.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.memory import selectors, services
from apps.memory.access import access_document
from apps.memory.api import serializers as s
from apps.memory.models import MemoryDocument
from apps.memory.search import SearchError, hybrid_search
from apps.memory.selectors import PathError
from apps.tenants.access import access_agent
from apps.tenants.api.base import TenantScopedViewSet, TenantViewMixin
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role


def _path(path: str) -> str:
    try:
        return selectors.clean_path(path)
    except PathError as error:
        raise ServiceError(ErrorCode.INVALID, str(error)) from None


class MemoryDocumentViewSet(TenantScopedViewSet):
    """``GET agents/<key>/memory/``: the agent's documents by path, then user (``?user_id=`` one user's,
    ``""`` the global ones; ``?path=`` a path prefix), without their content; paginated (``page``,
    ``page_size`` ≤ 200).

    ``GET|PUT|DELETE agents/<key>/memory/<path>?user_id=``: one document (``user_id`` "" or absent:
    the agent's global memory). PUT creates (201) or replaces (200) the whole ``content`` and indexes it
    again; DELETE removes it with its search chunks."""

    model = MemoryDocument
    serializer_class = s.DocumentOutput
    read_role = Role.VIEWER
    write_role = Role.ADMIN
    agent: Agent

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.agent = access_agent(actor=self.actor, key=kwargs["key"])

    def scope_queryset(self, queryset: Any) -> Any:
        if getattr(self, "agent", None) is None:
            return queryset.none()
        return queryset.filter(agent_id=self.agent.pk)

    def _user_id(self, request: Request) -> str:
        data = s.DocumentScopeInput(data=request.query_params.dict())
        data.is_valid(raise_exception=True)
        return str(data.validated_data["user_id"])

    @extend_schema(parameters=[s.DocumentFilterInput], responses={200: s.DocumentOutput(many=True)})
    def list(self, request: Request, key: str) -> Response:
        filters = s.DocumentFilterInput(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        documents = selectors.document_list(
            tenant=self.actor.tenant,
            agent=self.agent,
            user_id=data.get("user_id"),
            path_prefix=data.get("path", ""),
        ).order_by("path", "user_id", "id")
        page = self.paginate_queryset(documents)
        return self.get_paginated_response(s.DocumentOutput(page, many=True).data)

    def _detail(self, document: MemoryDocument) -> dict[str, Any]:
        chunks = selectors.chunk_count(tenant=self.actor.tenant, document=document)
        size = len(document.content.encode("utf-8", errors="surrogatepass"))
        fields = {name: getattr(document, name) for name in s.DOCUMENT_FIELDS}
        return dict(s.DocumentDetailOutput({**fields, "size": size, "chunks": chunks}).data)

    @extend_schema(parameters=[s.DocumentScopeInput], responses={200: s.DocumentDetailOutput})
    def retrieve(self, request: Request, key: str, path: str) -> Response:
        document = access_document(
            tenant=self.actor.tenant, agent=self.agent, user_id=self._user_id(request), path=_path(path)
        )
        return Response(self._detail(document))

    @extend_schema(
        parameters=[s.DocumentScopeInput],
        request=s.DocumentWriteInput,
        responses={200: s.DocumentDetailOutput, 201: s.DocumentDetailOutput},
    )
    def update(self, request: Request, key: str, path: str) -> Response:
        user_id = self._user_id(request)
        body = s.DocumentWriteInput(data=request.data)
        body.is_valid(raise_exception=True)
        document, created = services.document_write(
            actor=self.actor,
            agent=self.agent,
            user_id=user_id,
            path=_path(path),
            content=body.validated_data["content"],
            reindex=True,
        )
        answer = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(self._detail(document), status=answer)

    @extend_schema(parameters=[s.DocumentScopeInput], request=None, responses={204: None})
    def destroy(self, request: Request, key: str, path: str) -> Response:
        document = access_document(
            tenant=self.actor.tenant, agent=self.agent, user_id=self._user_id(request), path=_path(path)
        )
        services.document_delete(actor=self.actor, agent=self.agent, document=document)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemorySearchView(TenantViewMixin, APIView):
    """``GET agents/<key>/memory-search?q=&scope=&user_id=&limit=``: the hybrid search memory_search runs
    (full text merged with vector similarity, or full text alone without an embedder), as the agent
    would run it for ``user_id``. Viewers and up."""

    @extend_schema(parameters=[s.MemorySearchInput], responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, key: str) -> Response:
        agent = access_agent(actor=self.actor, key=key)
        params = s.MemorySearchInput(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        data = params.validated_data
        try:
            result = hybrid_search(
                self.actor.tenant,
                agent,
                data["q"],
                user_id=data["user_id"],
                scope=data["scope"],
                limit=data["limit"],
                lead=selectors.team_lead_of(tenant=self.actor.tenant, agent=agent),
            )
        except SearchError as error:
            raise ServiceError(ErrorCode.INVALID, f"q: {error}", details={"q": [str(error)]}) from None
        return Response(result.as_dict())
