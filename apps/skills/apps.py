from django.apps import AppConfig


class SkillsConfig(AppConfig):
    name = "apps.skills"
    label = "skills"
    default_auto_field = "django.db.models.BigAutoField"
