"""Admin screens of runtime for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.runtime.ratelimit_models import RateLimitWindow
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(RateLimitWindow)
class RateLimitWindowAdmin(PlatformModelAdmin):
    list_display = ("key", "hits", "refused", "updated_at")
    list_filter = ("refused",)
    search_fields = ("key",)
