from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "apps.runs"
    label = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the module registers the spawn tool (apps/runtime/registry.py).
        from apps.runs import cron_tool, subagents, teamwork  # noqa: F401
        from apps.teams import hooks

        hooks.on_dispatch(teamwork.on_dispatch)
        hooks.on_cancel_runs(teamwork.on_cancel_runs)
