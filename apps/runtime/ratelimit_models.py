"""The PostgreSQL store of the tool rate limiter (apps/runtime/ratelimit.py): one row per window.

Kept in its own module (imported by ``apps/runtime/models.py``) so that other runtime models can be
added there without touching this one.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models


class RateLimitWindow(models.Model):
    """The sliding-window log of one session key: the times (Unix seconds) of the calls allowed in
    the last window. Never more than ``limit`` entries: older ones are dropped on every check, and a
    row untouched for a whole window is deleted (``ratelimit.prune``)."""

    key = models.TextField(primary_key=True)  # "<tenant id>:<session key>"
    hits = ArrayField(models.FloatField(), default=list)
    refused = models.BooleanField(default=False)  # the outcome of the last check (read by RETURNING)
    granted = models.IntegerField(default=0)  # slots the last check took (read by RETURNING)
    updated_at = models.FloatField(db_index=True)  # Unix seconds of the last check

    class Meta:
        db_table = "runtime_ratelimitwindow"

    def __str__(self) -> str:
        return self.key
