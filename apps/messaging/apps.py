"""Messaging channels per tenant (an outbound webhook, Telegram) and the message and
create_forum_topic tools."""

from django.apps import AppConfig


class MessagingConfig(AppConfig):
    name = "apps.messaging"
    label = "messaging"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the app's agent tools registers message and create_forum_topic (apps/toolkit/registry.py).
        from apps.messaging import agent_tools, senders  # noqa: F401

        senders.install_log_filter()
