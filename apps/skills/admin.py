"""Admin screens of skills for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.skills.models import Skill, SkillActivation, SkillFile, SkillUse
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(Skill)
class SkillAdmin(PlatformModelAdmin):
    list_display = ("name", "agent", "enabled", "source", "version", "tenant", "updated_at")
    list_filter = ("tenant", "enabled", "source")
    search_fields = ("name", "description")
    list_select_related = ("agent",)


@admin.register(SkillFile)
class SkillFileAdmin(PlatformModelAdmin):
    list_display = ("path", "skill", "tenant", "updated_at")
    list_filter = ("tenant",)
    search_fields = ("path", "skill__name")
    list_select_related = ("skill",)


@admin.register(SkillUse)
class SkillUseAdmin(PlatformModelAdmin):
    list_display = ("skill_name", "agent", "how", "session_key", "tenant", "at")
    list_filter = ("tenant", "how")
    search_fields = ("skill_name", "session_key")
    list_select_related = ("agent",)


@admin.register(SkillActivation)
class SkillActivationAdmin(PlatformModelAdmin):
    list_display = ("skill", "agent", "session_key", "manual", "tenant", "created_at")
    list_filter = ("tenant", "manual")
    search_fields = ("session_key",)
    list_select_related = ("skill", "agent")
