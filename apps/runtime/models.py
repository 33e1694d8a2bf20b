"""Runtime models. Each lives in its own module; importing it here is what registers it with Django."""

from apps.runtime.ratelimit_models import RateLimitWindow  # noqa: F401
