from django.apps import AppConfig


class SkillsConfig(AppConfig):
    name = "apps.skills"
    label = "skills"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the tool module registers skill_search, use_skill and publish_skill
        # (apps/toolkit/registry.py).
        from apps.skills import tools  # noqa: F401
