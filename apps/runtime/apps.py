from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "apps.runtime"
    label = "runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.runtime import pipeline
        from apps.toolkit import gateway

        gateway.install(pipeline.call)  # the one entry point, for the apps below the gateway too
        # Importing the tool modules registers their implementations (apps/toolkit/registry.py).
        import apps.runtime.tools.clock  # noqa: F401
        from apps.runtime.tools import exec as exec_tool  # noqa: F401
        from apps.runtime.tools import fs, web  # noqa: F401
        from apps.teams import tools as team_tools  # noqa: F401
