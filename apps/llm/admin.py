"""Admin screens of llm for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.llm.models import Provider
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(Provider)
class ProviderAdmin(PlatformModelAdmin):
    list_display = ("name", "kind", "chat_model", "enabled", "is_default", "tenant")
    list_filter = ("tenant", "kind", "enabled")
    search_fields = ("name", "base_url")
