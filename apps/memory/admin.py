"""Admin screens of memory for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.memory.models import EmbeddingSettings, MemoryChunk, MemoryDocument
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(MemoryDocument)
class MemoryDocumentAdmin(PlatformModelAdmin):
    list_display = ("path", "agent", "user_id", "index_status", "tenant", "updated_at")
    list_filter = ("tenant", "index_status")
    search_fields = ("path", "user_id")
    list_select_related = ("agent",)


@admin.register(MemoryChunk)
class MemoryChunkAdmin(PlatformModelAdmin):
    list_display = ("document", "ordinal", "heading", "embedder", "tenant")
    list_filter = ("tenant",)
    search_fields = ("heading",)
    list_select_related = ("document",)


@admin.register(EmbeddingSettings)
class EmbeddingSettingsAdmin(PlatformModelAdmin):
    list_display = ("kind", "model", "base_url", "tenant", "updated_at")
    list_filter = ("tenant", "kind")
    search_fields = ("model",)
