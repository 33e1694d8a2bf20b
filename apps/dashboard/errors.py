"""404/500 pages: the API's error envelope under /api/, a plain page elsewhere."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"error": {"code": "not_found", "message": "No such endpoint.", "details": {}}}, status=404
        )
    return render(request, "errors/404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"error": {"code": "server_error", "message": "Internal error.", "details": {}}}, status=500
        )
    return render(request, "errors/500.html", status=500)
