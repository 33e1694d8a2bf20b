"""Admin screens of custom tools for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.custom_tools.models import CustomTool
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(CustomTool)
class CustomToolAdmin(PlatformModelAdmin):
    list_display = ("name", "agent", "enabled", "timeout_seconds", "tenant", "updated_at")
    list_filter = ("tenant", "enabled")
    search_fields = ("name",)
    list_select_related = ("agent",)
