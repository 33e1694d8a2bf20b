from django.apps import AppConfig


class SecureCliConfig(AppConfig):
    name = "apps.secure_cli"
    label = "secure_cli"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the module registers the credentialed_exec tool (apps/runtime/registry.py).
        from apps.secure_cli import tool  # noqa: F401
