"""Role checks for tenant-scoped API views."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from apps.tenants.actors import Actor
from apps.tenants.roles import Role


def required_role(view: Any, request: Request) -> str:
    """The role an action needs: ``view.action_roles[action]``, else ``read_role`` for safe methods and
    ``write_role`` otherwise (viewers read, admins configure by default)."""
    action = getattr(view, "action", None)
    action_roles = getattr(view, "action_roles", {}) or {}
    if action in action_roles:
        return str(action_roles[action])
    if request.method in permissions.SAFE_METHODS:
        return str(getattr(view, "read_role", Role.VIEWER))
    return str(getattr(view, "write_role", Role.ADMIN))


class HasTenantRole(permissions.BasePermission):
    message = "Your role in this tenant does not allow this action."

    def has_permission(self, request: Request, view: Any) -> bool:
        actor = request.auth
        if not isinstance(actor, Actor):
            return False
        needed = required_role(view, request)
        if not actor.can(needed):
            self.message = f"This action needs the {needed} role; you are {actor.role}."
            return False
        return True
