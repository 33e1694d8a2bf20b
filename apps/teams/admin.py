"""Admin screens of teams for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.teams.models import (
    Escalation,
    Task,
    TaskAttachment,
    TaskComment,
    TaskEvent,
    Team,
    TeamMember,
    TeamMessage,
    TeamMessageRead,
    TeamUserGrant,
)
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(Team)
class TeamAdmin(PlatformModelAdmin):
    list_display = ("name", "lead", "status", "tenant", "created_at")
    list_filter = ("tenant", "status")
    search_fields = ("name",)
    list_select_related = ("lead",)
    editable = ("name", "description")


@admin.register(TeamMember)
class TeamMemberAdmin(PlatformModelAdmin):
    list_display = ("team", "agent", "role", "tenant")
    list_filter = ("tenant", "role")
    search_fields = ("team__name", "agent__key")
    list_select_related = ("team", "agent")


@admin.register(Task)
class TaskAdmin(PlatformModelAdmin):
    list_display = ("subject", "team", "status", "owner", "priority", "tenant", "updated_at")
    list_filter = ("tenant", "status")
    search_fields = ("subject",)
    list_select_related = ("team", "owner")


@admin.register(TaskComment)
class TaskCommentAdmin(PlatformModelAdmin):
    list_display = ("task", "comment_type", "user_id", "tenant", "created_at")
    list_filter = ("tenant", "comment_type")
    search_fields = ("content",)
    list_select_related = ("task",)


@admin.register(TaskEvent)
class TaskEventAdmin(PlatformModelAdmin):
    list_display = ("task_identifier", "event_type", "actor_type", "actor_id", "tenant", "created_at")
    list_filter = ("tenant", "event_type", "actor_type")
    search_fields = ("task_identifier", "actor_id")


@admin.register(TaskAttachment)
class TaskAttachmentAdmin(PlatformModelAdmin):
    list_display = ("path", "task", "mime_type", "file_size", "tenant", "created_at")
    list_filter = ("tenant",)
    search_fields = ("path",)
    list_select_related = ("task",)


@admin.register(Escalation)
class EscalationAdmin(PlatformModelAdmin):
    list_display = ("task", "member", "state", "resolved_by", "tenant", "created_at")
    list_filter = ("tenant", "state")
    search_fields = ("blocker", "resolved_by")
    list_select_related = ("task", "member")


@admin.register(TeamMessage)
class TeamMessageAdmin(PlatformModelAdmin):
    list_display = ("team", "from_agent", "to_agent", "message_type", "tenant", "created_at")
    list_filter = ("tenant", "message_type")
    search_fields = ("content",)
    list_select_related = ("team", "from_agent", "to_agent")


@admin.register(TeamMessageRead)
class TeamMessageReadAdmin(PlatformModelAdmin):
    list_display = ("message", "agent", "tenant", "created_at")
    list_filter = ("tenant",)
    list_select_related = ("message", "agent")


@admin.register(TeamUserGrant)
class TeamUserGrantAdmin(PlatformModelAdmin):
    list_display = ("team", "user_id", "role", "tenant", "created_at")
    list_filter = ("tenant", "role")
    search_fields = ("team__name", "user_id")
    list_select_related = ("team",)
