"""Admin screens of context files for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.context_files.models import AgentContextFile, BootstrapCompletion, UserContextFile
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(AgentContextFile)
class AgentContextFileAdmin(PlatformModelAdmin):
    list_display = ("name", "agent", "updated_by", "tenant", "updated_at")
    list_filter = ("tenant", "name")
    search_fields = ("agent__key",)
    list_select_related = ("agent",)


@admin.register(UserContextFile)
class UserContextFileAdmin(PlatformModelAdmin):
    list_display = ("name", "agent", "user_id", "tenant", "updated_at")
    list_filter = ("tenant", "name")
    search_fields = ("agent__key", "user_id")
    list_select_related = ("agent",)


@admin.register(BootstrapCompletion)
class BootstrapCompletionAdmin(PlatformModelAdmin):
    list_display = ("agent", "user_id", "completed_by", "tenant", "created_at")
    list_filter = ("tenant",)
    search_fields = ("agent__key", "user_id")
    list_select_related = ("agent",)
