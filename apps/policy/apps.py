from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "apps.policy"
    label = "policy"
    default_auto_field = "django.db.models.BigAutoField"

    def schedules(self) -> list[tuple[str, str, int]]:
        """Recurring jobs (apps.toolkit.schedules): the approvals' expiry sweep, every minute."""
        from apps.policy import tasks

        return [(tasks.EXPIRE_APPROVALS_SCHEDULE, "apps.policy.tasks.expire_approvals", 1)]
