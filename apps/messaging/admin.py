"""Admin screens of messaging for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.messaging.models import Channel, OutboundMessage
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(Channel)
class ChannelAdmin(PlatformModelAdmin):
    list_display = ("name", "kind", "enabled", "tenant", "updated_at")
    list_filter = ("tenant", "kind", "enabled")
    search_fields = ("name",)


@admin.register(OutboundMessage)
class OutboundMessageAdmin(PlatformModelAdmin):
    list_display = ("channel_name", "kind", "status", "agent_key", "chat_id", "tenant", "created_at")
    list_filter = ("tenant", "kind", "status")
    search_fields = ("channel_name", "agent_key", "chat_id")
