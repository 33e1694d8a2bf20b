from django.apps import AppConfig


class LLMConfig(AppConfig):
    name = "apps.llm"
    label = "llm"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the app's agent tools registers the provider-backed tools (apps/toolkit/registry.py).
        from apps.llm import agent_tools  # noqa: F401
