from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "apps.runtime"
    label = "runtime"
    default_auto_field = "django.db.models.BigAutoField"
