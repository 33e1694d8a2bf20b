"""The job queue's settings in config/settings.py: ``Q_RETRY`` (when a job whose worker never reported
its end is delivered again) defaults to ``Q_TIMEOUT`` + 60 and must exceed ``Q_TIMEOUT``, or start-up
fails with a message that says so."""

from __future__ import annotations

import json
import subprocess

from tests.unit.settings_probe import probe_settings

_PROBE = """
import json
import django
django.setup()
from django.conf import settings
print(json.dumps({"timeout": settings.Q_CLUSTER["timeout"], "retry": settings.Q_CLUSTER["retry"]}))
"""


def probe(**env: str) -> subprocess.CompletedProcess[str]:
    return probe_settings(_PROBE, unset=("Q_TIMEOUT", "Q_RETRY"), **env)


def queue_settings(**env: str) -> dict[str, int]:
    done = probe(**env)
    assert done.returncode == 0, done.stderr
    found: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_a_job_is_delivered_again_a_minute_after_the_worker_timeout_by_default():
    assert queue_settings() == {"timeout": 300, "retry": 360}
    assert queue_settings(Q_TIMEOUT="20") == {"timeout": 20, "retry": 80}
    assert queue_settings(Q_TIMEOUT="20", Q_RETRY="30") == {"timeout": 20, "retry": 30}


def test_a_retry_not_above_the_worker_timeout_fails_at_start_up_with_the_reason():
    for retry in ("300", "120"):
        done = probe(Q_RETRY=retry)
        assert done.returncode != 0
        assert (
            f"Q_RETRY ({retry}) must be greater than Q_TIMEOUT (300): a job still running would be delivered "
            "a second time; leave Q_RETRY unset for Q_TIMEOUT + 60"
        ) in done.stderr
    done = probe(Q_RETRY="soon")
    assert done.returncode != 0
    assert "Q_RETRY must be an integer, got 'soon'" in done.stderr
