from django.apps import AppConfig


class SessionsConfig(AppConfig):
    name = "apps.sessions"
    label = "agent_sessions"  # "sessions" is django.contrib.sessions' label
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the app's agent tools registers sessions_list, sessions_history, sessions_send and
        # session_status (apps/toolkit/registry.py).
        from apps.sessions import agent_tools  # noqa: F401
