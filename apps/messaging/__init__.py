"""Messaging channels per tenant (an outbound webhook, Telegram) and the message and
create_forum_topic tools."""
