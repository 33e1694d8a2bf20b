from django.apps import AppConfig


class LLMConfig(AppConfig):
    name = "apps.llm"
    label = "llm"
    default_auto_field = "django.db.models.BigAutoField"
