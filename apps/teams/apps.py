from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "apps.teams"
    label = "teams"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the app's agent tools registers team_tasks and team_message (apps/toolkit/registry.py).
        from apps.teams import agent_tools  # noqa: F401
