from django.apps import AppConfig


class SkillsConfig(AppConfig):
    name = "apps.skills"
    label = "skills"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the app's agent tools registers skill_search, use_skill and publish_skill
        # (apps/toolkit/registry.py).
        from apps.skills import agent_tools  # noqa: F401
