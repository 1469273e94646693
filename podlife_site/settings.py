"""podlife settings: from the environment only (see docs/configuration.md).

Unset variables give the embedded default: an SQLite file in the project folder, the in-memory channel
layer and Celery tasks run in-process. Set DATABASE_URL and REDIS_URL for PostgreSQL, the Redis channel
layer and a real Celery broker.
"""

from __future__ import annotations

from pathlib import Path

from kombu import Exchange, Queue

from podlife_site.env import (
    SQLITE_OPTIONS,
    database_from_url,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_str,
    redis_url,
    secret_key,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = secret_key("SECRET_KEY", debug=DEBUG, key_file=BASE_DIR / ".secret_key").value
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "timelines.apps.TimelinesConfig",
    "collectors.apps.CollectorsConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "podlife_site.urls"
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
if DATABASE_URL:
    DATABASES = {"default": database_from_url("DATABASE_URL", DATABASE_URL)}
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

# --- Redis: channel layer and Celery ----------------------------------------------------------------------
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
# Two queues: the deployment's own, and one for the derive stage, so long watch steps never delay it. A plain
# `celery worker` consumes both; `-Q <deployment>.derive` makes a worker that only derives (docs/architecture.md).
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
PODLIFE_KUBELET_METRICS = env_bool("PODLIFE_KUBELET_METRICS", True)  # needs get on nodes/proxy
PODLIFE_KUBELET_LOGS = env_bool("PODLIFE_KUBELET_LOGS", True)  # needs the kubelet's system log handler
PODLIFE_KUBELET_INTERVAL_S = env_float("PODLIFE_KUBELET_INTERVAL_S", 60.0, minimum=1)
PODLIFE_WATCH_TIMEOUT_S = env_int("PODLIFE_WATCH_TIMEOUT_S", 60, minimum=1)  # one watch step
# A chain whose lease is not renewed for this long is dead, and beat re-arms it.
PODLIFE_WATCH_LEASE_S = env_float("PODLIFE_WATCH_LEASE_S", 2 * PODLIFE_WATCH_TIMEOUT_S + 30.0, minimum=2)
PODLIFE_LIST_PAGE_SIZE = env_int("PODLIFE_LIST_PAGE_SIZE", 200, minimum=1)
PODLIFE_WATCH_BATCH = env_int("PODLIFE_WATCH_BATCH", 500, minimum=1)
PODLIFE_WATCH_BATCH_S = env_float("PODLIFE_WATCH_BATCH_S", 1.0, minimum=0)
PODLIFE_WATCH_WRITERS = env_int("PODLIFE_WATCH_WRITERS", 2, minimum=1)
PODLIFE_WATCH_BACKOFF_S = env_float("PODLIFE_WATCH_BACKOFF_S", 0.5, minimum=0)
PODLIFE_WATCH_BACKOFF_MAX_S = env_float("PODLIFE_WATCH_BACKOFF_MAX_S", 30.0, minimum=0)
PODLIFE_METRICS_TOKEN = env_str("PODLIFE_METRICS_TOKEN")

# --- the derive stage (timelines/derivation.py) ------------------------------------------------------------
PODLIFE_DERIVE_BATCH = env_int("PODLIFE_DERIVE_BATCH", 200, minimum=1)  # dirty keys claimed at a time
# A worker that dies holding keys leaves them to others after this; a batch takes well under a second.
PODLIFE_DERIVE_CLAIM_S = env_float("PODLIFE_DERIVE_CLAIM_S", 60.0, minimum=1)

# The periodic tasks, declared here rather than by the modules that hold them (celery beat reads this).
# https://docs.celeryq.dev/en/stable/userguide/periodic-tasks.html
CELERY_BEAT_SCHEDULE = {
    "podlife-rearm-watches": {"task": "collectors.rearm_watches", "schedule": 30.0},
    "podlife-kubelet-pulls": {
        "task": "collectors.schedule_kubelet_pulls",
        "schedule": PODLIFE_KUBELET_INTERVAL_S,
    },
    "podlife-retention": {"task": "collectors.apply_retention", "schedule": 3600.0},
    # The derive stage is queued by every store; this run picks up what a dead worker left once its claim expires.
    "podlife-derive": {"task": "timelines.derive_dirty", "schedule": 5.0},
    "podlife-mark-open-pods": {"task": "timelines.mark_open_pods", "schedule": 60.0},
    "podlife-purge-export-jobs": {"task": "timelines.purge_export_jobs", "schedule": 3600.0},
}  # set: /metrics wants "Authorization: Bearer …"

# --- ingestion over HTTP (OTLP traces, kubelet logs from shippers) ---------------------------------------------
PODLIFE_INGEST_MAX_BODY_BYTES = env_int("PODLIFE_INGEST_MAX_BODY_BYTES", 8 * 1024**2, minimum=1024)
# The cap after gzip/deflate: a small body that inflates past it is refused (a gzip bomb never fills memory).
PODLIFE_INGEST_MAX_DECODED_BYTES = env_int("PODLIFE_INGEST_MAX_DECODED_BYTES", 64 * 1024**2, minimum=1024)

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
