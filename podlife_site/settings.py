"""podlife settings: from the environment only (see docs/configuration.md).

Unset variables give the embedded default: an SQLite file in the project folder, the in-memory channel
layer and Celery tasks run in-process. Set DATABASE_URL and REDIS_URL for PostgreSQL, the Redis channel
layer and a real Celery broker.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from kombu.entity import Exchange, Queue  # where they live; `kombu` re-exports them lazily, unseen by mypy

from podlife_site.env import (
    SQLITE_OPTIONS,
    database_from_url,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_str,
    isolate_test_worker,
    redis_url,
    secret_key,
)

BASE_DIR = Path(__file__).resolve().parent.parent

# Off unless asked for: a debug page shows settings (DATABASE_URL and REDIS_URL with their passwords).
# `make demo` / `manage.py demo` turn it on; DEBUG=1 for development (docs/security.md).
DEBUG = env_bool("DEBUG", False)
SECRET_KEY = secret_key("SECRET_KEY", debug=DEBUG, key_file=BASE_DIR / ".secret_key").value
# Empty (unset with DEBUG off): asgi.py refuses to serve; reading settings.SECRET_KEY would raise instead.
PODLIFE_HAS_SECRET_KEY = bool(SECRET_KEY)
# Loopback names only until the deployment names its own (a Host header outside the list answers 400).
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "axes",  # login throttling (docs/security.md)
    "timelines.apps.TimelinesConfig",
    "collectors.apps.CollectorsConfig",
    "dashboard.apps.DashboardConfig",
    "demo_cluster.apps.DemoClusterConfig",
    "alerts.apps.AlertsConfig",
]

MIDDLEWARE = [
    # First: a view that cannot get a database connection (pool timeout, "too many clients") answers 503.
    "podlife_site.overload.DatabaseBusyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a lockout raised during authenticate() into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "podlife_site.urls"
AUTHENTICATION_BACKENDS = [
    # First: refuses a locked-out user or address before a password is even checked.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
WSGI_APPLICATION = None
ASGI_APPLICATION = "podlife_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- storage --------------------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
# PostgreSQL: psycopg's pool, at most PODLIFE_DB_POOL_MAX connections per process (0: no pool, one connection
# per request thread). Size it so that processes x pool <= max_connections (docs/deploy.md "Database
# connections"); a caller that waits PODLIFE_DB_POOL_TIMEOUT_S for one gets 503 on the web, never 500.
# Unset, the pool is on in the web server (podlife_site/asgi.py says PODLIFE_PROCESS=web before the settings load),
# where concurrent requests would each hold a connection; Celery workers and `manage.py collect` run a fixed
# number of threads, each keeping its own connection, and a pool smaller than them would starve them.
PODLIFE_PROCESS = env_str("PODLIFE_PROCESS")
PODLIFE_DB_POOL_MAX = env_int(
    "PODLIFE_DB_POOL_MAX", 10 if PODLIFE_PROCESS == "web" else 0, minimum=0, maximum=1000
)
PODLIFE_DB_POOL_TIMEOUT_S = env_float("PODLIFE_DB_POOL_TIMEOUT_S", 5.0, minimum=0.1)
# Connections the pool keeps open, made when the process first uses the database: in the web server the
# whole pool, so that none is made during a load's peak and kept after it (each pinned a mostly empty 1 MiB
# pymalloc arena: docs/performance-history.md "Load"); the connections are within the budget above either way.
PODLIFE_DB_POOL_MIN = env_int(
    "PODLIFE_DB_POOL_MIN", PODLIFE_DB_POOL_MAX if PODLIFE_PROCESS == "web" else 1, minimum=1, maximum=1000
)
if DATABASE_URL:
    DATABASES = {
        "default": database_from_url(
            "DATABASE_URL",
            DATABASE_URL,
            pool_max=PODLIFE_DB_POOL_MAX,
            pool_min=PODLIFE_DB_POOL_MIN,
            pool_timeout_s=PODLIFE_DB_POOL_TIMEOUT_S,
        )
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": BASE_DIR / "podlife.sqlite3",
            "OPTIONS": dict(SQLITE_OPTIONS),
        }
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Tests on SQLite use a file, not the shared in-memory database: the collector, the ASGI server and the
    # ingest endpoints write from threads, which an in-memory database serializes by locking whole tables.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "podlife-test.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Observations older than this are dropped in bulk by the retention task; 0 keeps everything.
PODLIFE_RETENTION_DAYS = env_int("PODLIFE_RETENTION_DAYS", 14, minimum=0, maximum=3650)
# PostgreSQL: observations are range partitions of this many days (timelines/partitions.py; a day was
# measured against a week in bench/scale.py, docs/performance-history.md "Fleet scale"), created this many spans
# ahead by beat; retention drops whole partitions.
PODLIFE_PARTITION_DAYS = env_int("PODLIFE_PARTITION_DAYS", 1, minimum=1, maximum=31)
PODLIFE_PARTITIONS_AHEAD = env_int("PODLIFE_PARTITIONS_AHEAD", 3, minimum=1, maximum=60)

# --- Redis: channel layer and Celery ----------------------------------------------------------------------
isolate_test_worker(os.environ)  # under pytest-xdist only: each test worker its own Redis database and name
REDIS_URL = redis_url("REDIS_URL")
# One name per deployment sharing a Redis server: Redis pub/sub ignores the database index, so channel-layer
# groups carry this prefix, and Celery's queue is named after it.
PODLIFE_DEPLOYMENT = env_str("PODLIFE_DEPLOYMENT", "podlife")

if REDIS_URL:
    # Pub/sub layer: no per-channel queues in Redis, fan-out to any number of ASGI servers.
    # https://github.com/django/channels_redis#redispubsubchannellayer
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "prefix": f"{PODLIFE_DEPLOYMENT}:asgi"},
        }
    }
else:
    # Reaches only its own process: the demo runs sim, collector and web server in one process.
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# https://docs.celeryq.dev/en/stable/userguide/configuration.html
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_DEFAULT_QUEUE = PODLIFE_DEPLOYMENT
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL  # no broker: tasks run in-process, as the embedded default promises
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 240, minimum=5)
CELERY_TASK_ACKS_LATE = True  # a worker killed mid-step leaves its task to another worker
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Worker processes: every watch chain holds one for a whole step (PODLIFE_WATCH_TIMEOUT_S), and so does each
# kubelet pull, so a worker needs one per (cluster, resource) chain plus the two pulls of each cluster plus a
# few for the beat's short tasks, exports and alerts, or chains queue behind each other and their lag cycles
# (issue #15). Sized from the clusters set below; `--concurrency` on the command line still wins.
WATCH_CHAINS_PER_CLUSTER = 8  # collectors.kube.resources.ALL_RESOURCES (a test keeps the two equal)
KUBELET_PULLS_PER_CLUSTER = 2  # metrics and logs
WORKER_SPARE_SLOTS = 2


def worker_slots(clusters: int) -> int:
    """Worker processes that run every watch chain and kubelet pull of ``clusters`` clusters at once."""
    return max(1, clusters) * (WATCH_CHAINS_PER_CLUSTER + KUBELET_PULLS_PER_CLUSTER) + WORKER_SPARE_SLOTS


# Two queues: the deployment's own, and one for the derive stage, so long watch steps never delay it. A plain
# `celery worker` consumes both; `-Q <deployment>.derive` makes a worker that only derives (docs/pipeline.md, "Kick").
# Each queue binds its own routing key on the deployment's exchange (Celery's defaults would give both queues the
# default queue's key).
CELERY_TASK_QUEUES = [
    Queue(name, Exchange(PODLIFE_DEPLOYMENT, type="direct"), routing_key=name)
    for name in (PODLIFE_DEPLOYMENT, f"{PODLIFE_DEPLOYMENT}.derive")
]
CELERY_TASK_ROUTES = {"timelines.derive_dirty": {"queue": f"{PODLIFE_DEPLOYMENT}.derive"}}

# --- the collector (docs/collector.md) --------------------------------------------------------------------
# Clusters every Celery worker collects from: kubeconfig contexts and/or the cluster podlife runs in.
PODLIFE_KUBECONFIG = env_str("PODLIFE_KUBECONFIG")
PODLIFE_KUBE_CONTEXTS = env_list("PODLIFE_KUBE_CONTEXTS", [])  # empty: the kubeconfig's current context
PODLIFE_IN_CLUSTER = env_bool("PODLIFE_IN_CLUSTER", False)
PODLIFE_IN_CLUSTER_NAME = env_str("PODLIFE_IN_CLUSTER_NAME", "in-cluster")
# In-cluster token and CA files; empty: the ServiceAccount volume's (/var/run/secrets/kubernetes.io/serviceaccount/).
PODLIFE_IN_CLUSTER_TOKEN_FILE = env_str("PODLIFE_IN_CLUSTER_TOKEN_FILE")
PODLIFE_IN_CLUSTER_CA_FILE = env_str("PODLIFE_IN_CLUSTER_CA_FILE")
PODLIFE_KUBELET_METRICS = env_bool("PODLIFE_KUBELET_METRICS", True)  # needs get on nodes/proxy
PODLIFE_KUBELET_LOGS = env_bool("PODLIFE_KUBELET_LOGS", True)  # needs the kubelet's system log handler
PODLIFE_KUBELET_INTERVAL_S = env_float("PODLIFE_KUBELET_INTERVAL_S", 60.0, minimum=1)
# A pod's worker lane is "kubelet evidence pending" when the API saw it this much later than its node's newest
# kubelet evidence (dashboard/freshness.py; docs/dashboard.md).
PODLIFE_KUBELET_PENDING_SLACK_S = env_float("PODLIFE_KUBELET_PENDING_SLACK_S", 10.0, minimum=0)
PODLIFE_WATCH_TIMEOUT_S = env_int("PODLIFE_WATCH_TIMEOUT_S", 60, minimum=1)  # one watch step
# A chain whose lease is not renewed for this long is dead, and beat re-arms it.
PODLIFE_WATCH_LEASE_S = env_float("PODLIFE_WATCH_LEASE_S", 2 * PODLIFE_WATCH_TIMEOUT_S + 30.0, minimum=2)
PODLIFE_LIST_PAGE_SIZE = env_int("PODLIFE_LIST_PAGE_SIZE", 200, minimum=1)
PODLIFE_WATCH_BATCH = env_int("PODLIFE_WATCH_BATCH", 500, minimum=1)
PODLIFE_WATCH_BATCH_S = env_float("PODLIFE_WATCH_BATCH_S", 0.2, minimum=0)
PODLIFE_WATCH_WRITERS = env_int("PODLIFE_WATCH_WRITERS", 2, minimum=1)
PODLIFE_WATCH_STORE_PROCESS = env_bool("PODLIFE_WATCH_STORE_PROCESS", True)
PODLIFE_WATCH_BACKOFF_S = env_float("PODLIFE_WATCH_BACKOFF_S", 0.5, minimum=0)
PODLIFE_WATCH_BACKOFF_MAX_S = env_float("PODLIFE_WATCH_BACKOFF_MAX_S", 30.0, minimum=0)
# One cluster per listed context (the kubeconfig's current one when none is listed), plus the in-cluster one.
_COLLECTED_CLUSTERS = (len(PODLIFE_KUBE_CONTEXTS) or (1 if PODLIFE_KUBECONFIG else 0)) + int(
    PODLIFE_IN_CLUSTER
)
CELERY_WORKER_CONCURRENCY = env_int(
    "PODLIFE_WORKER_CONCURRENCY", worker_slots(_COLLECTED_CLUSTERS), minimum=1, maximum=1024
)
# The live badge of a node page says "live" only while every stream of the cluster showed progress (an event,
# or the end of a watch step or pull) within this many seconds; past it, it names the stale streams. A healthy
# watch ends a step every PODLIFE_WATCH_TIMEOUT_S and a pull runs every PODLIFE_KUBELET_INTERVAL_S.
PODLIFE_LIVE_STALE_S = env_float(
    "PODLIFE_LIVE_STALE_S", max(PODLIFE_WATCH_TIMEOUT_S, PODLIFE_KUBELET_INTERVAL_S) + 30.0, minimum=1
)
# Every live socket gets a small `heartbeat` frame this often (dashboard/web/fanout.py), so a page can tell a
# quiet group from a dead socket: its badge turns amber after two heartbeats without any frame.
PODLIFE_LIVE_HEARTBEAT_S = env_float("PODLIFE_LIVE_HEARTBEAT_S", 5.0, minimum=0.05)
PODLIFE_METRICS_TOKEN = env_str("PODLIFE_METRICS_TOKEN")  # set: /metrics wants "Authorization: Bearer …"
# Without a token /metrics answers 401, unless opened on purpose (the demo opens it): it names clusters and
# carries collector lag and error counts.
PODLIFE_METRICS_PUBLIC = env_bool("PODLIFE_METRICS_PUBLIC", False)

# --- request bodies (podlife_site/body_limits.py refuses them before Django reads them) -------------------------
PODLIFE_MAX_BODY_BYTES = env_int("PODLIFE_MAX_BODY_BYTES", 1024**2, minimum=1024)  # any route not below
PODLIFE_FORM_MAX_BODY_BYTES = env_int("PODLIFE_FORM_MAX_BODY_BYTES", 64 * 1024, minimum=1024)  # log-in forms

# --- overload (podlife_site/overload.py): HTTP requests served at once per process -------------------------------
# At most PODLIFE_HTTP_MAX_CONCURRENT requests run in Django at once (0: no limit); up to PODLIFE_HTTP_MAX_WAITING
# more wait up to PODLIFE_HTTP_WAIT_S for a turn; the rest, and those that waited too long, get 503 with a
# Retry-After of PODLIFE_RETRY_AFTER_S to twice that (jittered, so refused clients do not return together).
# Default: two below the pool, which keeps room for websocket handshakes and ingest credential checks.
_POOLED = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and PODLIFE_DB_POOL_MAX > 0
PODLIFE_HTTP_MAX_CONCURRENT = env_int(
    "PODLIFE_HTTP_MAX_CONCURRENT", max(1, PODLIFE_DB_POOL_MAX - 2) if _POOLED else 8, minimum=0
)
PODLIFE_HTTP_MAX_WAITING = env_int("PODLIFE_HTTP_MAX_WAITING", 200, minimum=0)
PODLIFE_HTTP_WAIT_S = env_float("PODLIFE_HTTP_WAIT_S", 10.0, minimum=0)
PODLIFE_RETRY_AFTER_S = env_int("PODLIFE_RETRY_AFTER_S", 2, minimum=1, maximum=3600)
# The node/namespace timeline API shares one read among requests for the same view that arrive together (a
# live page's refetch herd), and keeps it this long for late arrivals of the same live sequence (0: off).
PODLIFE_SHARED_READ_S = env_float("PODLIFE_SHARED_READ_S", 2.0, minimum=0)

# --- the derive stage (timelines/derivation.py) ------------------------------------------------------------
PODLIFE_DERIVE_BATCH = env_int("PODLIFE_DERIVE_BATCH", 200, minimum=1)  # dirty keys claimed at a time
# A worker that dies holding keys leaves them to others after this; a batch takes well under a second.
PODLIFE_DERIVE_CLAIM_S = env_float("PODLIFE_DERIVE_CLAIM_S", 60.0, minimum=1)
# A key whose derivation fails is retried alone after a back-off (this, doubled per failure, at most the
# maximum), and quarantined at the Nth failure (docs/pipeline.md, "Derive"; issue #35).
PODLIFE_DERIVE_MAX_FAILURES = env_int("PODLIFE_DERIVE_MAX_FAILURES", 5, minimum=1)
PODLIFE_DERIVE_RETRY_S = env_float("PODLIFE_DERIVE_RETRY_S", 10.0, minimum=0)
PODLIFE_DERIVE_RETRY_MAX_S = env_float("PODLIFE_DERIVE_RETRY_MAX_S", 600.0, minimum=0)

# Beat's own state file (last run of each entry): in the temp directory, never in the checkout, one per deployment.
CELERY_BEAT_SCHEDULE_FILENAME = env_str(
    "PODLIFE_BEAT_SCHEDULE_FILE",
    str(Path(tempfile.gettempdir()) / f"podlife-celerybeat-{PODLIFE_DEPLOYMENT}"),
)

# The periodic tasks, declared here rather than by the modules that hold them (celery beat reads this).
# https://docs.celeryq.dev/en/stable/userguide/periodic-tasks.html
CELERY_BEAT_SCHEDULE = {
    "podlife-rearm-watches": {"task": "collectors.rearm_watches", "schedule": 30.0},
    "podlife-kubelet-pulls": {
        "task": "collectors.schedule_kubelet_pulls",
        "schedule": PODLIFE_KUBELET_INTERVAL_S,
    },
    "podlife-retention": {"task": "timelines.apply_retention", "schedule": 3600.0},
    # PostgreSQL: the observation partitions of the next PODLIFE_PARTITIONS_AHEAD spans exist before rows come.
    "podlife-partitions": {"task": "timelines.ensure_partitions", "schedule": 3600.0},
    # PostgreSQL: the partitions of days that have ended get their indexes packed (docs/storage.md "Step 2d").
    "podlife-close-partitions": {"task": "timelines.close_partitions", "schedule": 3600.0},
    # The derive stage is queued by every store; this run picks up what a dead worker left once its claim expires.
    "podlife-derive": {"task": "timelines.derive_dirty", "schedule": 5.0},
    "podlife-mark-open-pods": {"task": "timelines.mark_open_pods", "schedule": 60.0},
    "podlife-purge-export-jobs": {"task": "dashboard.purge_export_jobs", "schedule": 3600.0},
}

# --- ingestion over HTTP (OTLP traces, kubelet logs from shippers) ---------------------------------------------
PODLIFE_INGEST_MAX_BODY_BYTES = env_int("PODLIFE_INGEST_MAX_BODY_BYTES", 8 * 1024**2, minimum=1024)
# The cap after gzip/deflate: a small body that inflates past it is refused (a gzip bomb never fills memory).
PODLIFE_INGEST_MAX_DECODED_BYTES = env_int("PODLIFE_INGEST_MAX_DECODED_BYTES", 64 * 1024**2, minimum=1024)
# The audit webhook (collectors/ingest_audit.py): batches stored at once per process, batches that may wait,
# and the Retry-After of the 429 that turns the next one away (docs/audit.md).
PODLIFE_AUDIT_WORKERS = env_int("PODLIFE_AUDIT_WORKERS", 2, minimum=1, maximum=64)
PODLIFE_AUDIT_QUEUE = env_int("PODLIFE_AUDIT_QUEUE", 4, minimum=0, maximum=1024)
PODLIFE_AUDIT_RETRY_AFTER_S = env_int("PODLIFE_AUDIT_RETRY_AFTER_S", 5, minimum=1, maximum=3600)

# --- incident bundles -------------------------------------------------------------------------------------
PODLIFE_EXPORT_DIR = Path(env_str("PODLIFE_EXPORT_DIR", str(BASE_DIR / "var" / "exports")))
# Import parses a bundle in memory: the cap on its decompressed size (also stops a gzip bomb).
PODLIFE_IMPORT_MAX_BYTES = env_int("PODLIFE_IMPORT_MAX_BYTES", 256 * 1024**2, minimum=1024)

# --- lifecycle thresholds (timelines.lifecycle.findings.Thresholds) ----------------------------------------
PODLIFE_STUCK_TERMINATING_SLACK_S = env_float("PODLIFE_STUCK_TERMINATING_SLACK_S", 60.0, minimum=0)
PODLIFE_GRACE_EXCEEDED_SLACK_S = env_float("PODLIFE_GRACE_EXCEEDED_SLACK_S", 2.0, minimum=0)
PODLIFE_SLOW_CLEANUP_S = env_float("PODLIFE_SLOW_CLEANUP_S", 120.0, minimum=0)
PODLIFE_CRASH_LOOP_RESTARTS = env_int("PODLIFE_CRASH_LOOP_RESTARTS", 3, minimum=1)
PODLIFE_CRASH_LOOP_WINDOW_S = env_float("PODLIFE_CRASH_LOOP_WINDOW_S", 600.0, minimum=1)

# --- alerts: /metrics gauges and outgoing webhooks (alerts/, docs/deploy.md "Alerts") ---------------------------
# podlife's address as users reach it: links in webhook messages start with it (unset: paths only).
PODLIFE_EXTERNAL_URL = env_str("PODLIFE_EXTERNAL_URL").rstrip("/")
if PODLIFE_EXTERNAL_URL and not PODLIFE_EXTERNAL_URL.startswith(("https://", "http://")):
    raise ImproperlyConfigured(
        f"PODLIFE_EXTERNAL_URL={PODLIFE_EXTERNAL_URL!r} is not a URL: expected https://HOST[/PATH]"
    )
# podlife_findings_recent counts findings open now or ended within this many seconds (never-started pods
# end within seconds); the webhook scan also looks back this far for findings that came and went.
PODLIFE_METRICS_RECENT_S = env_int("PODLIFE_METRICS_RECENT_S", 900, minimum=60)
PODLIFE_ALERTS_SCAN_S = env_float("PODLIFE_ALERTS_SCAN_S", 30.0, minimum=1)  # webhook scan period
# Webhooks reach public addresses only; besides, these host names and address ranges (comma-separated,
# e.g. "hooks.internal,10.20.0.0/16"): alerts/egress.py, docs/security.md "Webhooks".
PODLIFE_WEBHOOK_ALLOW = env_str("PODLIFE_WEBHOOK_ALLOW")
try:
    from alerts.egress import Allow as _WebhookAllow

    _WebhookAllow.parse(PODLIFE_WEBHOOK_ALLOW)
except ValueError as _bad_allow:
    raise ImproperlyConfigured(str(_bad_allow)) from None
CELERY_BEAT_SCHEDULE["podlife-alerts"] = {
    "task": "alerts.scan_and_deliver",
    "schedule": PODLIFE_ALERTS_SCAN_S,
}

# --- security (docs/security.md) ------------------------------------------------------------------------------
# PODLIFE_HTTPS=1 for a deployment served over HTTPS (directly or behind a TLS-terminating proxy): redirect
# HTTP to HTTPS, cookies only over HTTPS, HSTS for a year. Each can be switched on its own.
PODLIFE_HTTPS = env_bool("PODLIFE_HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", PODLIFE_HTTPS)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # probes from the kubelet speak plain HTTP to the pod
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", PODLIFE_HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", PODLIFE_HTTPS)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if PODLIFE_HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", PODLIFE_HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", PODLIFE_HTTPS)
# Behind a proxy that terminates TLS and says so in X-Forwarded-Proto (and strips it from clients).
if env_bool("PODLIFE_TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy on every response (django-csp): scripts only from this site (plotly.js and the
# pages' modules are static files; page data is JSON in <script type="application/json">). Plotly sets
# inline styles on the SVG it draws, so styles allow 'unsafe-inline'; nothing else inline runs.
# https://django-csp.readthedocs.io/en/latest/configuration.html
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],  # REST refetches and the live websocket (same origin)
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Login throttling (django-axes): after PODLIFE_LOGIN_FAILURE_LIMIT wrong passwords for one user name, or
# from one address, log-ins from it are refused for PODLIFE_LOGIN_COOLOFF_MINUTES. API and ingest tokens
# never go through a password log-in and are not throttled. https://django-axes.readthedocs.io/
AXES_FAILURE_LIMIT = env_int("PODLIFE_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_float("PODLIFE_LOGIN_COOLOFF_MINUTES", 15.0, minimum=0.1) / 60  # hours
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one locks: per user and per address
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "podlife_site.errors.lockout_response"  # 429, Retry-After, a clear message
AXES_VERBOSE = False

# --- the rest --------------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True  # every datetime is aware; ruff's DTZ rule keeps naive ones out of the code

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True  # serve straight from the apps in development and the demo

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO").upper()},
}
