from django.apps import AppConfig


class McpGrantsConfig(AppConfig):
    name = "apps.mcp_grants"
    label = "mcp_grants"
    default_auto_field = "django.db.models.BigAutoField"
