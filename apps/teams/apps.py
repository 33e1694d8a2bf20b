from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "apps.teams"
    label = "teams"
    default_auto_field = "django.db.models.BigAutoField"
