"""Tenant-isolation cases for the routes of credentialed CLIs (merged into
``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from collections.abc import Callable

from apps.accounts import services as tenant_services
from apps.secure_cli import services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case


def make_secure_cli(tenant: Tenant, prefix: str = "secret") -> dict[str, str]:
    """A restricted CLI of ``tenant`` with credentials, granted to an agent, with a user's own
    credentials; returns their ids and names."""
    system = Actor.system(tenant)
    binary = services.binary_create(
        actor=system,
        binary_name=f"{prefix}-cli",
        env={"CLI_TOKEN": f"{prefix}-token-value-123"},
        deny_args=[r"delete\s+"],
        is_global=False,
    )
    agent = tenant_services.agent_create(actor=system, key=f"{prefix}-cli-agent", name="CLI agent")
    services.grant_set(actor=system, binary=binary, agent=agent, timeout_seconds=10)
    user_id = f"{prefix}-cli-user@a.test"
    services.credential_set(actor=system, binary=binary, user_id=user_id, env={"CLI_TOKEN": "user-token-42"})
    return {"binary": str(binary.pk), "agent": agent.key, "user": user_id}


def _kwargs(**names: str) -> Callable[[Tenant], dict[str, str]]:
    """A ``Case.make`` that builds the objects and returns URL kwargs: ``kwarg=name in make_secure_cli``."""

    def make(tenant: Tenant) -> dict[str, str]:
        made = make_secure_cli(tenant)
        return {kwarg: made[name] for kwarg, name in names.items()}

    return make


CASES: dict[str, Case] = {
    "secure-cli-list": Case(make=_kwargs(pk="binary"), collection=True),
    "secure-cli-presets": Case(make=_kwargs(), tenant_agnostic=True),
    "secure-cli-detail": Case(
        make=_kwargs(pk="binary"),
        writes=[("patch", {"enabled": False, "env": {"CLI_TOKEN": "b-was-here"}}), ("delete", None)],
    ),
    "secure-cli-test": Case(make=_kwargs(pk="binary"), writes=[("post", {"agent": "secret-cli-agent"})]),
    "secure-cli-grant-list": Case(make=_kwargs(pk="binary")),
    "secure-cli-grant": Case(
        make=_kwargs(pk="binary", key="agent"),
        writes=[("put", {"enabled": True, "deny_args": []}), ("delete", None)],
    ),
    "secure-cli-credential-list": Case(make=_kwargs(pk="binary")),
    "secure-cli-credential": Case(
        make=_kwargs(pk="binary", user_id="user"),
        writes=[("put", {"env": {"CLI_TOKEN": "b-was-here"}}), ("delete", None)],
    ),
}
