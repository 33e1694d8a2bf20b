from django.apps import AppConfig


class SandboxConfig(AppConfig):
    name = "apps.sandbox"
    label = "sandbox"
    default_auto_field = "django.db.models.BigAutoField"

    def schedules(self) -> list[tuple[str, str, int]]:
        """Recurring jobs (apps.toolkit.schedules): pruning idle sandbox containers, every
        TOOLGATE_SANDBOX_PRUNE_MINUTES."""
        from django.conf import settings

        from apps.sandbox import tasks

        minutes = int(getattr(settings, "TOOLGATE_SANDBOX_PRUNE_MINUTES", 5))
        return [(tasks.PRUNE_SCHEDULE, "apps.sandbox.tasks.prune", minutes)]
