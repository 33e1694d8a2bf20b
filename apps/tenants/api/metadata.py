"""What ``OPTIONS`` answers on every API route: the view's name and description and the media types it
renders and parses (with the ``Allow`` header of the allowed methods).

DRF's default also describes the input of each write by instantiating the view's serializer, which fails
on views that choose their serializer per action or validate by hand (a 500 on ``OPTIONS``). The
published OpenAPI document (``/api/schema/``) is where inputs are described.
"""

from __future__ import annotations

from typing import Any

from rest_framework.metadata import SimpleMetadata


class RouteMetadata(SimpleMetadata):
    def determine_metadata(self, request: Any, view: Any) -> dict[str, Any]:
        return {
            "name": view.get_view_name(),
            "description": view.get_view_description(),
            "renders": [renderer.media_type for renderer in view.renderer_classes],
            "parses": [parser.media_type for parser in view.parser_classes],
        }
