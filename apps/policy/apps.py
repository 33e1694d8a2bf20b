from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "apps.policy"
    label = "policy"
    default_auto_field = "django.db.models.BigAutoField"
