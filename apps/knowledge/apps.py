from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "apps.knowledge"
    label = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the app's agent tools registers knowledge_graph_search (apps/toolkit/registry.py).
        from apps.knowledge import agent_tools  # noqa: F401
