"""The database connection pool of config/settings.py: on by default, off in qcluster (which forks),
sized by DATABASE_POOL_MAX_SIZE, and refused together with persistent connections."""

from __future__ import annotations

import json
import subprocess

from tests.unit.settings_probe import probe_settings

_PROBE = """
import json, sys
sys.argv = ["manage.py", *sys.argv[1:]]
import django
django.setup()
from django.conf import settings
db = settings.DATABASES["default"]
print(json.dumps({"pool": db["OPTIONS"].get("pool"), "conn_max_age": db["CONN_MAX_AGE"]}))
"""


def probe(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return probe_settings(_PROBE, *argv, unset=("DATABASE_POOL_MAX_SIZE", "DATABASE_CONN_MAX_AGE"), **env)


def settings_of(*argv: str, **env: str) -> dict:
    done = probe(*argv, **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_pool_is_on_by_default():
    assert settings_of("runserver")["pool"] == {"min_size": 1, "max_size": 20, "timeout": 10}


def test_the_pool_is_sized_by_the_environment_and_can_be_turned_off():
    assert settings_of(DATABASE_POOL_MAX_SIZE="3", DATABASE_POOL_TIMEOUT="2")["pool"] == {
        "min_size": 1,
        "max_size": 3,
        "timeout": 2,
    }
    off = settings_of(DATABASE_POOL_MAX_SIZE="0", DATABASE_CONN_MAX_AGE="60")
    assert off == {"pool": None, "conn_max_age": 60}


def test_qcluster_which_forks_its_workers_gets_no_pool():
    assert settings_of("qcluster")["pool"] is None


def test_a_pool_with_persistent_connections_is_refused():
    done = probe(DATABASE_CONN_MAX_AGE="60")
    assert done.returncode != 0
    assert "DATABASE_CONN_MAX_AGE needs DATABASE_POOL_MAX_SIZE=0" in done.stderr
