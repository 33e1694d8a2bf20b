from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "apps.runtime"
    label = "runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.runtime import metrics as scrape_time
        from apps.runtime import pipeline, selectors
        from apps.tenants import metrics
        from apps.toolkit import gateway

        if metrics.ENABLED:  # what /metrics reads from the database when scraped
            metrics.register_collector(scrape_time.collect)

        # The one entry point and its listing, for the apps below the gateway too.
        gateway.install(entry=pipeline.call, lister=selectors.agent_tool_definitions)
        # Importing the gateway's built-in tools registers them (apps/toolkit/registry.py); each domain
        # app registers its own agent tools (its agent_tools module) in its ready().
        import apps.runtime.tools.clock  # noqa: F401
        from apps.runtime.tools import exec as exec_tool  # noqa: F401
        from apps.runtime.tools import fs, web  # noqa: F401
