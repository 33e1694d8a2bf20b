from django.apps import AppConfig


class LLMConfig(AppConfig):
    name = "apps.llm"
    label = "llm"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the tool module registers the provider-backed tools (apps/runtime/registry.py).
        from apps.llm import tools  # noqa: F401
