"""Admin screens of sandbox for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.sandbox.models import SandboxContainer
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(SandboxContainer)
class SandboxContainerAdmin(PlatformModelAdmin):
    list_display = ("name", "scope", "agent", "image", "tenant", "updated_at")
    list_filter = ("tenant", "scope")
    search_fields = ("name", "container_id", "key")
    list_select_related = ("agent",)
