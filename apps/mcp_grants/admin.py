"""Admin screens of mcp grants for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.mcp_grants.models import (
    AccessRequest,
    AgentGrant,
    MCPServer,
    MCPServerTool,
    ResourceSubscription,
    UserCredential,
    UserGrant,
)
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(MCPServer)
class MCPServerAdmin(PlatformModelAdmin):
    list_display = ("name", "display_name", "transport", "status", "enabled", "tenant")
    list_filter = ("tenant", "transport", "status", "enabled")
    search_fields = ("name", "display_name")
    editable = ("display_name",)


@admin.register(MCPServerTool)
class MCPServerToolAdmin(PlatformModelAdmin):
    list_display = ("name", "title", "discovered_at", "tenant")
    list_filter = ("tenant",)
    search_fields = ("name", "title")


@admin.register(AgentGrant)
class AgentGrantAdmin(PlatformModelAdmin):
    list_display = ("server", "agent", "enabled", "tenant", "created_at")
    list_filter = ("tenant", "enabled")
    search_fields = ("server__name", "agent__key")
    list_select_related = ("server", "agent")


@admin.register(UserGrant)
class UserGrantAdmin(PlatformModelAdmin):
    list_display = ("server", "user_id", "enabled", "tenant", "created_at")
    list_filter = ("tenant", "enabled")
    search_fields = ("server__name", "user_id")
    list_select_related = ("server",)


@admin.register(AccessRequest)
class AccessRequestAdmin(PlatformModelAdmin):
    list_display = ("server", "scope", "status", "requested_by", "tenant", "created_at")
    list_filter = ("tenant", "scope", "status")
    search_fields = ("server__name", "user_id", "requested_by")
    list_select_related = ("server",)


@admin.register(UserCredential)
class UserCredentialAdmin(PlatformModelAdmin):
    list_display = ("server", "user_id", "tenant", "updated_at")
    list_filter = ("tenant",)
    search_fields = ("server__name", "user_id")
    list_select_related = ("server",)


@admin.register(ResourceSubscription)
class ResourceSubscriptionAdmin(PlatformModelAdmin):
    list_display = ("server", "uri", "actor_id", "tenant", "created_at")
    list_filter = ("tenant",)
    search_fields = ("uri", "actor_id")
    list_select_related = ("server",)
