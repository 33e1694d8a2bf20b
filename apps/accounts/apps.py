from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """The administration of a tenant (no models: it writes those of ``apps.tenants``)."""

    name = "apps.accounts"
    label = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def schedules(self) -> list[tuple[str, str, int]]:
        """Recurring jobs (apps.toolkit.schedules): the API-key expiry sweep, every minute."""
        from apps.accounts import tasks

        return [(tasks.EXPIRE_API_KEYS_SCHEDULE, "apps.accounts.tasks.expire_api_keys", 1)]
