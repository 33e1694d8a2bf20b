"""django-q2 jobs of the exec sandbox."""

from __future__ import annotations

from apps.sandbox import manager

# The django-q2 Schedule (declared in SandboxConfig.schedules, applied by apps.toolkit.schedules) runs the
# pruning under this name (the name it had when the sandbox was part of the runtime app).
PRUNE_SCHEDULE = "runtime.sandbox_prune"


def prune() -> dict[str, int]:
    """Remove idle, old, vanished and orphaned sandbox containers (``manager.prune``); the counts per
    reason are the job's result, shown in the admin's task list."""
    return manager.prune()
