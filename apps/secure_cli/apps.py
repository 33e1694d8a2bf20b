from django.apps import AppConfig


class SecureCliConfig(AppConfig):
    name = "apps.secure_cli"
    label = "secure_cli"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the app's agent tools registers credentialed_exec (apps/toolkit/registry.py).
        from apps.secure_cli import agent_tools  # noqa: F401
