"""Admin screens of sessions for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.sessions.models import Session, SessionMessage
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(Session)
class SessionAdmin(PlatformModelAdmin):
    list_display = ("key", "agent", "user_id", "channel", "status", "message_count", "tenant", "updated_at")
    list_filter = ("tenant", "status")
    search_fields = ("key", "user_id", "label")
    list_select_related = ("agent",)


@admin.register(SessionMessage)
class SessionMessageAdmin(PlatformModelAdmin):
    list_display = ("session", "seq", "role", "source", "tenant", "created_at")
    list_filter = ("tenant", "role")
    search_fields = ("session__key",)
    list_select_related = ("session",)
