from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "apps.tenants"
    label = "tenants"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.tenants import schema  # noqa: F401  (registers the OpenAPI auth extensions)
