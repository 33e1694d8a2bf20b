"""The OpenAPI schema of every operation documents the errors it can answer, in the error envelope
(``apps.tenants.api.errors``), beside the responses its view declares:

- ``400`` for every operation: an invalid body, query or path value;
- ``401`` and ``403`` for every authenticated operation: no valid key or login, a role too low;
- ``404`` for every authenticated operation: an object named in the path, the query or the body that
  the tenant does not have (another tenant's alike), or a page past the last;
- ``409`` for a write: a duplicate name, or an object whose state refuses the change;
- ``413`` and ``415`` for an operation with a body: too large, or not JSON.

A view documents any other error itself (``@extend_schema(responses=...)``), which wins over these.

Only a viewset's ``list`` is paginated (no other action pages its rows), and a ``list`` whose view sets
``list_returns_one_object = True`` answers one object, not an array.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

ERRORS = {
    "400": "The request is invalid: the error's details name each field and what is wrong with it.",
    "401": "No valid API key or login.",
    "403": "The key's or member's role may not do this.",
    "404": "No such object in this tenant (another tenant's objects are not found either).",
    "409": "The change conflicts with what exists (a duplicate, or a state that refuses it).",
    "413": "The request body is larger than the allowed limit.",
    "415": "The request body is not JSON.",
}
WRITES = ("POST", "PUT", "PATCH", "DELETE")


class ErrorDetailSerializer(serializers.Serializer):  # type: ignore[type-arg]
    code = serializers.CharField(help_text="A stable, machine-readable code, e.g. `not_found`.")
    message = serializers.CharField(help_text="What went wrong, in words a person or a model can act on.")
    details = serializers.DictField(help_text="Per field problems or other facts about the error.")


class ErrorSerializer(serializers.Serializer):  # type: ignore[type-arg]
    error = ErrorDetailSerializer()


class ToolgateAutoSchema(AutoSchema):
    def _error_codes(self) -> list[str]:
        codes = ["400"]
        if self.get_auth():
            codes += ["401", "403"]
        if self.get_auth():
            codes.append("404")
        if self.method in WRITES:
            codes.append("409")
        if self.method in ("POST", "PUT", "PATCH"):
            codes += ["413", "415"]
        return codes

    def _get_paginator(self) -> Any:
        if getattr(self.view, "action", "list") != "list":
            return None
        return super()._get_paginator()  # type: ignore[no-untyped-call]

    def _is_list_view(self, serializer: Any = None) -> bool:
        if getattr(self.view, "list_returns_one_object", False):
            return False
        return bool(super()._is_list_view(serializer))

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for code in self._error_codes():
            if code not in responses:
                response = self._get_response_for_code(  # type: ignore[no-untyped-call]
                    ErrorSerializer, code, direction=direction
                )
                response["description"] = ERRORS[code]
                responses[code] = response
        return responses
