from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "apps.teams"
    label = "teams"
    default_auto_field = "django.db.models.BigAutoField"

    def schedules(self) -> list[tuple[str, str, int]]:
        """Recurring jobs (apps.toolkit.schedules): the team ticker, every TOOLGATE_TEAM_TICKER_SECONDS
        rounded up to whole minutes."""
        from apps.teams import tasks

        return [(tasks.TICKER_SCHEDULE, "apps.teams.tasks.tick", tasks.ticker_minutes())]

    def ready(self) -> None:
        # Importing the app's agent tools registers team_tasks and team_message (apps/toolkit/registry.py).
        from apps.teams import agent_tools  # noqa: F401
