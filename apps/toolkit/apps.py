from django.apps import AppConfig


class ToolkitConfig(AppConfig):
    name = "apps.toolkit"
    label = "toolkit"
    verbose_name = "Toolkit"
