"""django-q2 jobs of the administration of tenants. Jobs only find work and call services; they are
idempotent."""

from __future__ import annotations

import logging

from django.utils import timezone

from apps.accounts import services
from apps.tenants.models import ApiKey

logger = logging.getLogger(__name__)

# The django-q2 Schedule (declared in AccountsConfig.schedules, applied by apps.toolkit.schedules) runs the
# sweep every minute under this name.
EXPIRE_API_KEYS_SCHEDULE = "tenants.expire_api_keys"


def expire_api_keys() -> int:
    """Record ``api_key.expired`` once for every key whose expiry has passed; return how many.

    The sweep lists candidates across tenants, then acts on each key through its own tenant
    (``api_key_record_expiry`` re-reads the row scoped to that tenant, under a lock, and decides again),
    so a key revoked or already recorded since the listing is skipped and a second run does nothing.
    """
    candidates = (
        ApiKey.objects.dangerously_all_tenants()
        .filter(
            expires_at__lte=timezone.now(),
            expiry_recorded_at__isnull=True,
            revoked_at__isnull=True,
        )
        .select_related("tenant")
        .order_by("tenant_id", "expires_at", "id")
    )
    recorded = 0
    for api_key in candidates.iterator(chunk_size=500):
        try:
            if services.api_key_record_expiry(api_key=api_key):
                recorded += 1
        except Exception:
            # One bad row must not stop the sweep for every other tenant; the next run retries it.
            logger.exception(
                "could not record expiry of API key %s (tenant %s)", api_key.pk, api_key.tenant_id
            )
    return recorded
