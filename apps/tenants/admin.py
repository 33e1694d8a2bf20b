"""Admin screens of tenants for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.tenants.models import Agent, ApiKey, Membership, PlatformEvent, SettingSecret, Tenant
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(Tenant)
class TenantAdmin(PlatformModelAdmin):
    list_display = ("slug", "name", "status", "config_version", "created_at")
    list_filter = ("status",)
    search_fields = ("slug", "name")
    editable = ("name",)


@admin.register(Membership)
class MembershipAdmin(PlatformModelAdmin):
    list_display = ("user", "role", "tenant", "created_at")
    list_filter = ("tenant", "role")
    search_fields = ("user__username", "user__email")
    list_select_related = ("user",)


@admin.register(Agent)
class AgentAdmin(PlatformModelAdmin):
    list_display = ("key", "name", "type", "tenant", "created_at")
    list_filter = ("tenant", "type")
    search_fields = ("key", "name")
    editable = ("name", "description")


@admin.register(ApiKey)
class ApiKeyAdmin(PlatformModelAdmin):
    list_display = ("name", "prefix", "role", "origin", "tenant", "expires_at", "revoked_at")
    list_filter = ("tenant", "role", "origin")
    search_fields = ("name", "prefix")


@admin.register(SettingSecret)
class SettingSecretAdmin(PlatformModelAdmin):
    list_display = ("path", "tenant", "updated_at")
    list_filter = ("tenant",)
    search_fields = ("path",)


@admin.register(PlatformEvent)
class PlatformEventAdmin(PlatformModelAdmin):
    list_display = ("created_at", "verb", "tenant_slug", "actor")
    list_filter = ("verb",)
    search_fields = ("tenant_slug", "actor", "verb")
