"""Admin screens of policy for platform staff (see ``apps.tenants.platform_admin``)."""

from __future__ import annotations

from django.contrib import admin

from apps.policy.approval_models import ApprovalRule, PendingApproval
from apps.policy.models import PolicyDocument, PolicyVersion
from apps.tenants.platform_admin import PlatformModelAdmin


@admin.register(PolicyDocument)
class PolicyDocumentAdmin(PlatformModelAdmin):
    list_display = ("scope", "channel", "chat_id", "version", "tenant", "updated_at")
    list_filter = ("tenant", "scope")
    search_fields = ("channel", "chat_id")


@admin.register(PolicyVersion)
class PolicyVersionAdmin(PlatformModelAdmin):
    list_display = ("number", "scope", "agent_key", "note", "tenant", "created_at")
    list_filter = ("tenant", "scope")
    search_fields = ("agent_key", "note")


@admin.register(PendingApproval)
class PendingApprovalAdmin(PlatformModelAdmin):
    list_display = ("created_at", "agent_key", "tool", "status", "decision", "tenant")
    list_filter = ("tenant", "status", "decision")
    search_fields = ("agent_key", "tool", "call_id")


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(PlatformModelAdmin):
    list_display = ("binary_path", "shape", "created_by_label", "revoked_at", "tenant")
    list_filter = ("tenant",)
    search_fields = ("binary_path", "shape")
