"""Admin screens of secure cli for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.secure_cli.models import SecureCLIAgentGrant, SecureCLIBinary, SecureCLIUserCredential
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(SecureCLIBinary)
class SecureCLIBinaryAdmin(PlatformModelAdmin):
    list_display = ("binary_name", "binary_path", "is_global", "enabled", "tenant")
    list_filter = ("tenant", "is_global", "enabled")
    search_fields = ("binary_name", "binary_path")


@admin.register(SecureCLIAgentGrant)
class SecureCLIAgentGrantAdmin(PlatformModelAdmin):
    list_display = ("binary", "agent", "enabled", "tenant", "created_at")
    list_filter = ("tenant", "enabled")
    search_fields = ("binary__binary_name", "agent__key")
    list_select_related = ("binary", "agent")


@admin.register(SecureCLIUserCredential)
class SecureCLIUserCredentialAdmin(PlatformModelAdmin):
    list_display = ("binary", "user_id", "tenant", "updated_at")
    list_filter = ("tenant",)
    search_fields = ("binary__binary_name", "user_id")
    list_select_related = ("binary",)
