from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """The administration of a tenant (no models: it writes those of ``apps.tenants``)."""

    name = "apps.accounts"
    label = "accounts"
    default_auto_field = "django.db.models.BigAutoField"
