from django.apps import AppConfig


class RealtimeConfig(AppConfig):
    name = "apps.realtime"
    label = "realtime"
    default_auto_field = "django.db.models.BigAutoField"
