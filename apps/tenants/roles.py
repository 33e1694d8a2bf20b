"""Roles inside a tenant. Each role includes everything the roles below it may do."""

from __future__ import annotations

from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    MEMBER = "member", "Member"
    ADMIN = "admin", "Admin"
    OWNER = "owner", "Owner"


RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2, Role.OWNER: 3}


def role_at_least(role: str, required: str) -> bool:
    """True when ``role`` may do what ``required`` may: viewers read, members act, admins configure,
    owners manage members and keys."""
    return RANK.get(Role(role), -1) >= RANK[Role(required)] if role in Role.values else False
