"""The credentialed CLIs API: binaries, the presets they can start from, agent grants, users' own
credentials and the administrators' test run.

Binaries and presets are read by viewers (never a secret: variable names only); everything else, and
every write, needs an administrator. Every route under ``secure-cli/<id>/`` resolves the binary inside
the caller's tenant first, so another tenant's is 404 whatever the method. Every write goes through
``apps.secure_cli.services`` (audited, published on the ``secure_cli`` topic).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.secure_cli import services
from apps.secure_cli.access import access_binary, access_credential, access_grant
from apps.secure_cli.api import serializers as s
from apps.secure_cli.models import SecureCLIAgentGrant, SecureCLIBinary, SecureCLIUserCredential
from apps.secure_cli.presets import PRESETS
from apps.tenants.access import access_agent
from apps.tenants.api.base import StrictSerializer, TenantScopedViewSet
from apps.tenants.roles import Role


def _body(serializer: type[StrictSerializer], request: Request) -> dict[str, Any]:
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


class BinaryViewSet(TenantScopedViewSet):
    """Credentialed CLIs of the tenant. Viewers read; admins register (``binary_name``, or ``preset``
    with the template's credentials in ``env``), change any field (``env`` replaces the environment)
    and delete. 400 with every problem by field; a name in use is 409."""

    model = SecureCLIBinary
    serializer_class = s.SecureCLIBinaryOutput

    def scope_queryset(self, queryset: Any) -> Any:
        return queryset.order_by("binary_name", "id")

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.SecureCLIBinaryOutput(page, many=True).data)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(s.SecureCLIBinaryOutput(access_binary(actor=self.actor, id=pk)).data)

    @extend_schema(request=s.SecureCLIBinaryCreateInput, responses={201: s.SecureCLIBinaryOutput})
    def create(self, request: Request) -> Response:
        data = _body(s.SecureCLIBinaryCreateInput, request)
        binary = services.binary_create(actor=self.actor, **data)
        return Response(s.SecureCLIBinaryOutput(binary).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.SecureCLIBinaryFieldsInput, responses={200: s.SecureCLIBinaryOutput})
    def partial_update(self, request: Request, pk: str) -> Response:
        binary = access_binary(actor=self.actor, id=pk)
        data = _body(s.SecureCLIBinaryFieldsInput, request)
        binary = services.binary_update(actor=self.actor, binary=binary, **data)
        return Response(s.SecureCLIBinaryOutput(binary).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        binary = access_binary(actor=self.actor, id=pk)
        services.binary_delete(actor=self.actor, binary=binary)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PresetViewSet(TenantScopedViewSet):
    """The one-click templates (viewers): gh, gcloud, aws, kubectl, terraform with their credential
    variables, deny lists, timeout and tips. ``POST /secure-cli/`` with ``preset`` uses one."""

    model = SecureCLIBinary
    pagination_class = None

    @extend_schema(responses={200: serializers.ListSerializer(child=serializers.DictField())})
    def list(self, request: Request) -> Response:
        return Response([preset.as_dict() for preset in PRESETS.values()])


class BinaryScopedViewSet(TenantScopedViewSet):
    """A view of one binary's objects (admins): the binary is resolved in the caller's tenant after the
    role check and before anything else."""

    binary: SecureCLIBinary
    read_role = Role.ADMIN

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.binary = access_binary(actor=self.actor, id=kwargs["pk"])

    def scope_queryset(self, queryset: Any) -> Any:
        if getattr(self, "binary", None) is None:
            return queryset.none()
        return queryset.filter(binary_id=self.binary.pk)


class GrantViewSet(BinaryScopedViewSet):
    """Agents' grants of a binary (admins). A restricted binary (``is_global: false``) is reached only
    by agents with an enabled grant; a disabled grant also keeps an agent from a global one. PUT
    creates (201) or replaces (200) the whole grant: ``enabled`` and the overrides ``deny_args``,
    ``deny_verbose``, ``timeout_seconds``, ``tips`` (null: the binary's) and ``env`` (write-only; left
    out: kept). DELETE removes it."""

    model = SecureCLIAgentGrant
    serializer_class = s.SecureCLIGrantOutput
    pagination_class = None

    def scope_queryset(self, queryset: Any) -> Any:
        return super().scope_queryset(queryset).select_related("binary", "agent").order_by("agent__key")

    def list(self, request: Request, pk: str) -> Response:
        return Response(s.SecureCLIGrantOutput(self.get_queryset(), many=True).data)

    def retrieve(self, request: Request, pk: str, key: str) -> Response:
        grant = access_grant(actor=self.actor, binary=self.binary, agent_key=key)
        return Response(s.SecureCLIGrantOutput(grant).data)

    @extend_schema(
        request=s.SecureCLIGrantInput, responses={200: s.SecureCLIGrantOutput, 201: s.SecureCLIGrantOutput}
    )
    def update(self, request: Request, pk: str, key: str) -> Response:
        agent = access_agent(actor=self.actor, key=key)
        data = _body(s.SecureCLIGrantInput, request)
        grant, created = services.grant_set(actor=self.actor, binary=self.binary, agent=agent, **data)
        grant = access_grant(actor=self.actor, binary=self.binary, agent_key=agent.key)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(s.SecureCLIGrantOutput(grant).data, status=code)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str, key: str) -> Response:
        grant = access_grant(actor=self.actor, binary=self.binary, agent_key=key)
        services.grant_delete(actor=self.actor, grant=grant)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CredentialViewSet(BinaryScopedViewSet):
    """Users' own credentials for a binary (admins), write-only: answers list the variable names, never
    their values. PUT sets one user's ``env`` (201 when new, 200 otherwise); on that user's calls it
    overrides the binary's and the grant's variables. DELETE removes it."""

    model = SecureCLIUserCredential
    serializer_class = s.SecureCLICredentialOutput

    def scope_queryset(self, queryset: Any) -> Any:
        return super().scope_queryset(queryset).select_related("binary").order_by("user_id", "id")

    def list(self, request: Request, pk: str) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.SecureCLICredentialOutput(page, many=True).data)

    @extend_schema(
        request=s.SecureCLICredentialInput,
        responses={200: s.SecureCLICredentialOutput, 201: s.SecureCLICredentialOutput},
    )
    def update(self, request: Request, pk: str, user_id: str) -> Response:
        data = _body(s.SecureCLICredentialInput, request)
        credential, created = services.credential_set(
            actor=self.actor, binary=self.binary, user_id=user_id, env=data["env"]
        )
        credential = access_credential(actor=self.actor, binary=self.binary, user_id=user_id)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(s.SecureCLICredentialOutput(credential).data, status=code)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str, user_id: str) -> Response:
        credential = access_credential(actor=self.actor, binary=self.binary, user_id=user_id)
        services.credential_delete(actor=self.actor, credential=credential)
        return Response(status=status.HTTP_204_NO_CONTENT)


class BinaryTestViewSet(BinaryScopedViewSet):
    """Run the binary with sample ``args`` as ``agent`` (acting for ``user_id``) would through ``exec``
    (admins): the same lookup, checks and direct execution. Answers the output and the command with
    every credential masked, and each decision taken (``decision``: step, outcome, detail). A refused
    or failing run is 200 with ``ok: false``: the request itself succeeded. Audited."""

    model = SecureCLIBinary

    @extend_schema(request=s.SecureCLITestInput, responses={200: s.SecureCLITestOutput})
    def test(self, request: Request, pk: str) -> Response:
        data = _body(s.SecureCLITestInput, request)
        agent = access_agent(actor=self.actor, key=data["agent"])
        result = services.binary_test(
            actor=self.actor,
            binary=self.binary,
            agent=agent,
            args=data.get("args", []),
            user_id=data["user_id"],
        )
        return Response(result)
