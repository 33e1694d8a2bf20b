"""Dashboard clients: a logged-in browser session for a user."""

from __future__ import annotations

from typing import Any

from django.test import Client


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client
