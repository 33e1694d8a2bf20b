from django.apps import AppConfig


class CustomToolsConfig(AppConfig):
    name = "apps.custom_tools"
    label = "custom_tools"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.custom_tools import selectors
        from apps.custom_tools.provider import CustomToolProvider, custom_source
        from apps.mcp_grants import collisions
        from apps.policy.universe import register_source
        from apps.toolkit import providers

        register_source(custom_source)
        providers.register(CustomToolProvider())
        collisions.register_names("custom tool", selectors.tenant_names)
