"""Admin screens of knowledge for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.knowledge.models import Entity, Relation
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(Entity)
class EntityAdmin(PlatformModelAdmin):
    list_display = ("name", "entity_type", "agent", "source", "tenant", "updated_at")
    list_filter = ("tenant", "source")
    search_fields = ("name", "entity_type")
    list_select_related = ("agent",)


@admin.register(Relation)
class RelationAdmin(PlatformModelAdmin):
    list_display = ("source", "relation_type", "target", "origin", "tenant", "updated_at")
    list_filter = ("tenant", "origin")
    search_fields = ("relation_type",)
    list_select_related = ("source", "target")
