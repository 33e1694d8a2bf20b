from django.apps import AppConfig


class ContextFilesConfig(AppConfig):
    name = "apps.context_files"
    label = "context_files"
    default_auto_field = "django.db.models.BigAutoField"
