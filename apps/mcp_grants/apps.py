from django.apps import AppConfig


class McpGrantsConfig(AppConfig):
    name = "apps.mcp_grants"
    label = "mcp_grants"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.mcp_grants.bridge import MCPProvider
        from apps.mcp_grants.universe import mcp_source
        from apps.policy.universe import register_source
        from apps.toolkit import providers

        register_source(mcp_source)
        providers.register(MCPProvider())
        # MCP clients' update streams hear when the tenant's tools may have changed.
        from apps.mcp_grants import subscriptions
        from apps.tenants.services import tools_may_have_changed

        tools_may_have_changed.connect(subscriptions.lists_changed, dispatch_uid="mcp-lists-changed")
