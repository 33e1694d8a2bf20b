from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "apps.memory"
    label = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the app's agent tools registers memory_get and memory_search (apps/toolkit/registry.py).
        from apps.memory import agent_tools  # noqa: F401
        from apps.memory.interceptor import INTERCEPTOR
        from apps.toolkit import vfs

        vfs.register(INTERCEPTOR, order=20)
