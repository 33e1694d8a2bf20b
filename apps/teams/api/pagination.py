"""Paging a team's task list: by page number (with a total) or by cursor."""

from __future__ import annotations

from typing import Any

from rest_framework import pagination
from rest_framework.request import Request
from rest_framework.response import Response

from apps.tenants.api.pagination import PageNumberPagination


class TaskCursorPagination(pagination.CursorPagination):
    """The board's order: highest priority first, then oldest first."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
    ordering = ("-priority", "created_at", "id")


class TaskPagination(pagination.BasePagination):
    """``?page=N`` pages by number and counts the matches; without it, ``?cursor=`` pages (``next`` and
    ``previous`` links), which stay stable while tasks are added. Both take ``page_size`` (≤ 200)."""

    def __init__(self) -> None:
        self.by_number = PageNumberPagination()
        self.by_cursor = TaskCursorPagination()
        self.active: pagination.BasePagination = self.by_cursor

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        self.active = self.by_number if "page" in request.query_params else self.by_cursor
        return self.active.paginate_queryset(queryset, request, view)

    def get_paginated_response(self, data: Any) -> Response:
        return self.active.get_paginated_response(data)

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["results"],
            "properties": {
                "count": {"type": "integer", "description": "with page only"},
                "next": {"type": "string", "nullable": True, "format": "uri"},
                "previous": {"type": "string", "nullable": True, "format": "uri"},
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": "cursor",
                "required": False,
                "in": "query",
                "description": "the cursor of a next or previous link",
                "schema": {"type": "string"},
            },
            {
                "name": "page",
                "required": False,
                "in": "query",
                "description": "a page number (instead of a cursor); the answer then has count",
                "schema": {"type": "integer"},
            },
            {
                "name": "page_size",
                "required": False,
                "in": "query",
                "description": "results per page (at most 200)",
                "schema": {"type": "integer"},
            },
        ]
