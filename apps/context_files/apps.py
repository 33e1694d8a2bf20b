"""Agents' context files (SOUL.md, IDENTITY.md, AGENTS.md, TOOLS.md, HEARTBEAT.md, USER.md, BOOTSTRAP.md),
stored by Toolgate per agent and per user, and reached through the normal file tools."""

from django.apps import AppConfig


class ContextFilesConfig(AppConfig):
    name = "apps.context_files"
    label = "context_files"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.context_files import interceptor

        interceptor.register()
