from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "apps.knowledge"
    label = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the tool module registers knowledge_graph_search (apps/runtime/registry.py).
        from apps.knowledge import tools  # noqa: F401
