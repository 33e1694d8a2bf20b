"""Admin screens of runs for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.runs.models import CronFiring, CronJob, Run
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(Run)
class RunAdmin(PlatformModelAdmin):
    list_display = ("id", "agent", "kind", "runner", "status", "tenant", "created_at")
    list_filter = ("tenant", "kind", "runner", "status")
    search_fields = ("user_id",)
    list_select_related = ("agent",)


@admin.register(CronJob)
class CronJobAdmin(PlatformModelAdmin):
    list_display = ("name", "agent", "schedule", "kind", "enabled", "tenant")
    list_filter = ("tenant", "kind", "enabled")
    search_fields = ("name", "schedule")
    list_select_related = ("agent",)


@admin.register(CronFiring)
class CronFiringAdmin(PlatformModelAdmin):
    list_display = ("job", "status", "manual", "run", "tenant", "created_at")
    list_filter = ("tenant", "status", "manual")
    search_fields = ("job__name",)
    list_select_related = ("job", "run")
