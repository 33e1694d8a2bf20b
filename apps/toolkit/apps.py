from django.apps import AppConfig


class ToolkitConfig(AppConfig):
    name = "apps.toolkit"
    label = "toolkit"
    verbose_name = "Toolkit"

    def ready(self) -> None:
        from apps.tenants.validators import register_settings_check
        from apps.toolkit import runtime_settings, schedules

        # Every app's recurring jobs (its AppConfig.schedules()) are brought up to date after migrate.
        schedules.connect()

        # The runtime keys of a tenant's and an agent's settings (sandbox, per-tool settings) are the
        # toolkit's: their check joins every validation of a settings document.
        register_settings_check(runtime_settings.validate)
