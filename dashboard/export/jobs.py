"""Exports too large to stream in one request run as a Celery task (``dashboard/tasks.py``), in steps a
test can drive without Celery: ``record_job`` writes a job file (``dashboard.tasks.start_export`` records
and enqueues it); ``run_export_job`` writes the bundle and keeps the job file's progress current;
``job_status`` reads it.

A job is two files in ``PODLIFE_EXPORT_DIR`` (default ``var/exports``): ``<id>.json`` (the request and
its state: queued → running → done | failed, with ``progress``) and the bundle itself. Files rather than
a table: the bundle must sit on storage the web server can read anyway, and the status file is replaced
atomically, so a reader never sees half of it. With a Celery result backend configured the task also
reports the same progress as its ``PROGRESS`` state meta.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings
from django.utils import timezone

from dashboard.export import Scope, export_incident, filename
from dashboard.export.scope import parse_window, parse_zone, require_known
from dashboard.queries import get_cluster
from timelines.lifecycle.timeline import format_time

JOB_ID = re.compile(r"^[0-9a-f]{32}$")
KEEP = timedelta(days=2)


def export_dir() -> Path:
    path = Path(settings.PODLIFE_EXPORT_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _status_path(job_id: str) -> Path:
    if not JOB_ID.match(job_id):
        raise ValueError(f"job id {job_id!r} is not 32 hex digits")
    return export_dir() / f"{job_id}.json"


def _write(job_id: str, status: dict[str, Any]) -> None:
    path = _status_path(job_id)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(orjson.dumps(status))
    os.replace(tmp, path)


def job_status(job_id: str) -> dict[str, Any] | None:
    """The job's status (``state``, ``progress{stage,done,total}``, ``file``, ``error``), or None."""
    try:
        status: dict[str, Any] = orjson.loads(
            _status_path(job_id).read_bytes()
        )  # the dict write_status wrote
        return status
    except (FileNotFoundError, ValueError):
        return None


def job_file(job_id: str) -> Path | None:
    status = job_status(job_id)
    if not status or status.get("state") != "done":
        return None
    name: str = status["file"]
    return export_dir() / name


def record_job(
    cluster: str,
    scope: Scope,
    since: str,
    until: str,
    fmt: str,
    *,
    gz: bool = False,
    user_id: int | None = None,
    namespaces: set[str] | None = None,
    tz: str = "utc",
) -> str:
    """Record an export job, queued; returns the job id. Raises ScopeError / NotFound now, not later in
    the worker, when the request is malformed."""
    start, end = parse_window(since, until)
    c = get_cluster(cluster)
    require_known(c, scope, namespaces=namespaces)  # an unreadable pod is 404 now, as an unknown one
    job_id = uuid.uuid4().hex
    _write(
        job_id,
        {
            "id": job_id,
            "state": "queued",
            "cluster": c.name,
            "scope": scope.to_json(),
            "since": format_time(start),
            "until": format_time(end),
            "format": fmt,
            "gzip": gz and fmt == "json",
            "tz": parse_zone(tz),
            "user_id": user_id,
            "namespaces": None if namespaces is None else sorted(namespaces),
            "created_at": format_time(timezone.now()),
            "progress": {"stage": "queued", "done": 0, "total": 0},
            "file": filename(c, scope, start, fmt, gz=gz),
            "bytes": None,
            "error": None,
        },
    )
    return job_id


def run_export_job(job_id: str, *, report: Any = None) -> dict[str, Any] | None:
    """Write the bundle of job ``job_id``; returns the final status (None when the job is gone).

    ``report(meta)`` is also called with each progress update (the task passes ``update_state``)."""
    status = job_status(job_id)
    if status is None or status["state"] not in ("queued", "running"):
        return status
    status.update(state="running", started_at=format_time(timezone.now()))
    _write(job_id, status)
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        status["progress"] = {"stage": stage, "done": done, "total": total}
        now = time.monotonic()
        if now - last[0] >= 0.5 or done >= total:  # a few writes a second at most
            last[0] = now
            _write(job_id, status)
            if report is not None:
                report(status["progress"])

    target = export_dir() / status["file"]
    partial = target.with_name(target.name + ".part")
    try:
        cluster = get_cluster(status["cluster"])
        with partial.open("wb") as f:
            summary = export_incident(
                cluster,
                Scope.from_json(status["scope"]),
                status["since"],
                status["until"],
                status["format"],
                f,
                namespaces=None if status["namespaces"] is None else set(status["namespaces"]),
                gzip_output=status["gzip"],
                progress=progress,
                tz=status.get("tz", "utc"),  # a job queued before the field existed: UTC
            )
        os.replace(partial, target)
    except Exception as exc:  # re-raised (Celery logs it); the job's page shows the failure by name
        partial.unlink(missing_ok=True)
        status.update(
            state="failed", error=f"{type(exc).__name__}: {exc}", finished_at=format_time(timezone.now())
        )
        _write(job_id, status)
        raise
    status.update(
        state="done", bytes=summary.bytes_written, pods=summary.pods, finished_at=format_time(timezone.now())
    )
    _write(job_id, status)
    return status


def purge_old_jobs(*, now: float | None = None) -> int:
    """Delete job files older than ``KEEP``; returns how many files went."""
    cutoff = (now or time.time()) - KEEP.total_seconds()
    removed = 0
    for path in export_dir().iterdir():
        if path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)
            removed += 1
    return removed
