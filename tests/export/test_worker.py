"""An export job started through the view runs on a real Celery worker (Redis broker, PostgreSQL).

The worker is a subprocess (tests/collector/test_celery_chain.py's ``Worker``): it writes to the database this
test reads (``transaction=True``, the test database's name in its DATABASE_URL) and to the same export
folder, and takes tasks from this deployment's queue (PODLIFE_DEPLOYMENT names it).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
import pytest
from django.contrib.auth.models import User
from django.db import connection

from dashboard.export import Scope, jobs
from podlife_site.celery import app as celery_app
from tests.collector.test_celery_chain import Worker
from tests.export.conftest import SINCE, UNTIL
from tests.export.helpers import export_json, normalized_pods, observation_rows
from tests.waits import wait_for

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.urls("tests.export.urls"),
]


@pytest.fixture
def worker(settings: Any, tmp_path: Path) -> Iterator[Callable[[], Path]]:
    """Starts (when called) a Celery worker on this run's Redis and test database; its log's path."""
    settings.PODLIFE_EXPORT_DIR = tmp_path / "exports"
    url = urlsplit(os.environ["DATABASE_URL"])
    test_db_url = urlunsplit((url.scheme, url.netloc, "/" + connection.settings_dict["NAME"], "", ""))
    env = {
        **os.environ,
        "DATABASE_URL": test_db_url,
        "REDIS_URL": settings.REDIS_URL,
        "PODLIFE_EXPORT_DIR": str(settings.PODLIFE_EXPORT_DIR),
    }
    workers: list[Worker] = []

    def start() -> Path:
        workers.append(Worker(env, f"export-{os.getpid()}", tmp_path, start_timeout=60))
        return workers[-1].log_path

    yield start
    for w in workers:
        w.stop()
    connection.close()


def test_export_job_runs_on_a_celery_worker_with_progress_and_a_download(client, worker, source_cluster):
    """GIVEN a user who starts an export job through the view, with no worker running WHEN it is still
    queued, then a Celery worker starts THEN the worker runs it: the status is done, progress at its
    total, and the download is the bundle a direct export gives (the same pods, timelines, observations)."""
    assert not celery_app.conf.task_always_eager  # a broker, not in-process
    user = User.objects.create_superuser("admin", "a@example.org", "pw")
    client.force_login(user)
    window = {"since": SINCE.isoformat(), "until": UNTIL.isoformat()}
    response = client.post("/c/src/export/jobs", {"namespace": "shop", **window, "format": "json"})
    assert response.status_code == 202, response.content
    job = response.json()
    time.sleep(1)  # the scenario: time passes with no worker, and nothing in this process runs the job
    queued = client.get(job["status_url"]).json()
    assert queued["state"] == "queued" and queued["progress"] == {"stage": "queued", "done": 0, "total": 0}
    assert client.get(job["download_url"]).status_code == 409  # not done: nothing to download yet

    log = worker()
    status = wait_for(lambda: (s := client.get(job["status_url"]).json())["state"] in ("done", "failed") and s,
                      "the job to finish", timeout=60)  # fmt: skip
    assert status["state"] == "done", status["error"]
    progress = status["progress"]
    assert progress["done"] == progress["total"] > 0 and progress["stage"], progress
    assert status["bytes"] > 0 and status["finished_at"]
    # The job's row says done from inside the task; Celery logs the success after the task returns.
    succeeded = re.compile(r"Task dashboard\.export_incident\[[0-9a-f-]+\] succeeded in")
    text = wait_for(lambda: succeeded.search(t := log.read_text()) and t, "the worker to log the success")
    assert re.search(r"Task dashboard\.export_incident\[[0-9a-f-]+\] received", text), text[-2000:]

    download = client.get(job["download_url"])
    assert download.status_code == 200
    raw = b"".join(download.streaming_content)
    assert len(raw) == status["bytes"]
    got = orjson.loads(raw)
    direct = orjson.loads(export_json(source_cluster, Scope.one("namespace", "shop")))
    assert (
        got["metadata"]["counts"] == direct["metadata"]["counts"] and got["metadata"]["counts"]["pods"] == 6
    )
    assert normalized_pods(got) == normalized_pods(direct)
    assert observation_rows(got) == observation_rows(direct)
    assert jobs.job_status(job["job"])["started_at"]  # type: ignore[index]
