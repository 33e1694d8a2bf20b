from __future__ import annotations

from rest_framework import pagination


class PageNumberPagination(pagination.PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class CreatedCursorPagination(pagination.CursorPagination):
    """Stable paging over append-only, time-ordered rows (audit, tool calls)."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
    ordering = ("-created_at", "-id")
