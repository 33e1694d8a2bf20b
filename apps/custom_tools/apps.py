from django.apps import AppConfig


class CustomToolsConfig(AppConfig):
    name = "apps.custom_tools"
    label = "custom_tools"
    default_auto_field = "django.db.models.BigAutoField"
