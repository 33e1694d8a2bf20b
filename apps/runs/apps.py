from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "apps.runs"
    label = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the module registers the spawn tool (apps/runtime/registry.py).
        from apps.runs import subagents  # noqa: F401
