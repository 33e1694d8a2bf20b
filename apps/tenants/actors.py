"""Who is acting: a logged-in user, an API key, or the system, always inside exactly one tenant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from apps.tenants.roles import Role, role_at_least

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from apps.tenants.models import ApiKey, Tenant

ActorKind = Literal["user", "api_key", "system"]


@dataclass(frozen=True)
class Actor:
    tenant: Tenant
    role: str
    kind: ActorKind
    user: AbstractBaseUser | None = None
    api_key: ApiKey | None = None

    @property
    def id(self) -> str:
        if self.kind == "user" and self.user is not None:
            return str(self.user.pk)
        if self.kind == "api_key" and self.api_key is not None:
            return str(self.api_key.pk)
        return "system"

    @property
    def label(self) -> str:
        if self.kind == "user" and self.user is not None:
            return str(getattr(self.user, "email", "") or self.user.get_username())
        if self.kind == "api_key" and self.api_key is not None:
            return f"key {self.api_key.prefix}… ({self.api_key.name})"
        return "system"

    def can(self, required: str) -> bool:
        return role_at_least(self.role, required)

    @classmethod
    def system(cls, tenant: Tenant) -> Actor:
        """The actor of management commands and background jobs: acts as owner of one tenant."""
        return cls(tenant=tenant, role=Role.OWNER, kind="system")
