from django.apps import AppConfig


class SecureCliConfig(AppConfig):
    name = "apps.secure_cli"
    label = "secure_cli"
    default_auto_field = "django.db.models.BigAutoField"
