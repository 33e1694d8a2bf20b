"""deploy/compose.yaml and the images it runs: the services of the production topology, their health
checks, the order they start in, and secrets passed as files (the settings' NAME_FILE variants).
`make deploy-check` runs it for real; this checks the wiring without Docker."""

from __future__ import annotations

import configparser
import json
import re
import subprocess
from pathlib import Path

import yaml

from tests.unit.settings_probe import probe_settings

BASE_DIR = Path(__file__).resolve().parents[2]
DEPLOY = BASE_DIR / "deploy"
TOOLGATE_SERVICES = {"web1", "web2", "worker1", "worker2"}


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_the_topology_has_every_part_and_every_long_running_service_a_healthcheck():
    services = compose()["services"]
    assert set(services) == {"postgres", "pgbouncer", "redis", "migrate", "lb", *TOOLGATE_SERVICES}
    for name, service in services.items():
        if name == "migrate":
            assert service["restart"] == "no"
            assert service["command"] == ["migrate"]
            continue
        check = service.get("healthcheck")
        assert check, name
        assert check["test"][0] in {"CMD", "CMD-SHELL"}, name
    assert services["web1"]["command"] == services["web2"]["command"] == ["web"]
    assert services["worker1"]["command"] == services["worker2"]["command"] == ["worker"]
    assert {services[name]["hostname"] for name in TOOLGATE_SERVICES} == TOOLGATE_SERVICES


def test_web_and_workers_start_after_the_migration_and_the_load_balancer_after_healthy_webs():
    services = compose()["services"]
    for name in TOOLGATE_SERVICES:
        depends = services[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}, name
        assert depends["pgbouncer"] == {"condition": "service_healthy"}, name
        assert depends["redis"] == {"condition": "service_healthy"}, name
    assert services["migrate"]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    assert services["pgbouncer"]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    assert services["lb"]["depends_on"] == {
        "web1": {"condition": "service_healthy"},
        "web2": {"condition": "service_healthy"},
    }


def test_secrets_are_files_each_declared_by_the_service_that_reads_it():
    document = compose()
    declared = set(document["secrets"])
    assert all(set(spec) == {"file"} for spec in document["secrets"].values())
    plain = {"SECRET_KEY", "FIELD_ENCRYPTION_KEY", "DATABASE_URL", "REDIS_URL", "POSTGRES_PASSWORD"}
    for name, service in document["services"].items():
        environment = service.get("environment", {})
        assert not plain & set(environment), f"{name} passes a secret in its environment"
        mounted = set(service.get("secrets", []))
        assert mounted <= declared, name
        for variable, value in environment.items():
            if variable.endswith("_FILE"):
                match = re.fullmatch(r"/run/secrets/([a-z_]+)", value)
                assert match, f"{name}: {variable}={value}"
                assert match.group(1) in mounted, f"{name}: {variable}={value}"
    services = document["services"]
    for name in TOOLGATE_SERVICES:
        environment = services[name]["environment"]
        assert environment["DATABASE_URL_FILE"] == "/run/secrets/database_url", name  # through PgBouncer
        assert {"SECRET_KEY_FILE", "FIELD_ENCRYPTION_KEY_FILE", "REDIS_URL_FILE"} <= set(environment)
    # Migrations go straight to PostgreSQL.
    assert services["migrate"]["environment"]["DATABASE_URL_FILE"] == "/run/secrets/database_url_direct"


def test_pgbouncer_pools_transactions_and_haproxy_balances_the_web_services():
    ini = configparser.ConfigParser(interpolation=None, delimiters=("=",), comment_prefixes=(";", "#"))
    ini.read(DEPLOY / "images" / "pgbouncer" / "pgbouncer.ini")
    assert ini["pgbouncer"]["pool_mode"] == "transaction"
    haproxy = (DEPLOY / "images" / "haproxy" / "haproxy.cfg").read_text()
    servers = set(re.findall(r"^\s*server (\S+) (\S+):8000", haproxy, re.MULTILINE))
    assert servers == {("web1", "web1"), ("web2", "web2")}
    assert "uri /healthz" in haproxy
    assert compose()["services"]["lb"]["ports"][0].endswith(":8080")


def test_the_toolgate_image_runs_unprivileged_with_the_jail_and_collected_static_files():
    dockerfile = (BASE_DIR / "Dockerfile").read_text()
    users = re.findall(r"^USER (\S+)", dockerfile, re.MULTILINE)
    assert users
    assert users[-1].split(":")[0] not in {"root", "0"}
    assert "bubblewrap" in dockerfile
    assert "collectstatic" in dockerfile
    entrypoint = (DEPLOY / "docker" / "entrypoint.sh").read_text()
    for role in ("web)", "worker)", "migrate)", "manage)"):
        assert role in entrypoint


_PROBE = """
import json
import django
django.setup()
from django.conf import settings
print(json.dumps({"secret_key": settings.SECRET_KEY, "name": settings.DATABASES["default"]["NAME"]}))
"""


_INHERITED_NOT = {"SECRET_KEY", "DATABASE_URL", "TOOLGATE_DB_NAME"}


def probe(**env: str) -> subprocess.CompletedProcess[str]:
    return probe_settings(_PROBE, unset=_INHERITED_NOT, **env)


def test_settings_read_secrets_from_the_files_their_FILE_variables_name(tmp_path):
    (tmp_path / "secret_key").write_text("from-a-file-0123456789\n")
    (tmp_path / "database_url").write_text("postgres://toolgate:pw@pgbouncer:6432/fromfile\n")
    done = probe(
        SECRET_KEY_FILE=str(tmp_path / "secret_key"), DATABASE_URL_FILE=str(tmp_path / "database_url")
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "secret_key": "from-a-file-0123456789",
        "name": "fromfile",
    }


def test_a_secret_set_twice_or_in_a_missing_file_is_refused_with_the_reason(tmp_path):
    (tmp_path / "secret_key").write_text("x" * 40)
    both = probe(SECRET_KEY="y" * 40, SECRET_KEY_FILE=str(tmp_path / "secret_key"))
    assert both.returncode != 0
    assert "Set SECRET_KEY or SECRET_KEY_FILE, not both" in both.stderr
    missing = probe(SECRET_KEY_FILE=str(tmp_path / "absent"))
    assert missing.returncode != 0
    assert "SECRET_KEY_FILE=" in missing.stderr
    assert "cannot be read" in missing.stderr
