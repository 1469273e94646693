"""``kubectl logs`` for demo containers: what a container wrote, read off the pod's own history.

A demo container has no process, so its log is derived, deterministically, from what the API shows of it:
a start line when ``state.running.startedAt`` says it started, a ready line, a periodic health line every
``HEALTH_EVERY`` seconds while it runs, the SIGTERM it got when the pod was deleted (``deletionTimestamp``
minus the grace period is when the kubelet began the kill), and its exit with the code in
``state.terminated``. A container told to ignore SIGTERM (``Behaviour.ignore_sigterm``) says so.

``read_log`` answers the pods/log subresource with the kubelet's and API server's messages for a pod or
container that has no log to give (``container_not_ready`` etc.), and honours ``timestamps``,
``tailLines``, ``sinceSeconds``, ``sinceTime``, ``limitBytes`` and ``previous``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

HEALTH_EVERY = 30.0  # seconds between a running container's periodic log lines


class LogError(Exception):
    """The pods/log request cannot be answered: HTTP ``code`` and the API server's ``message``."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _stamp(t: datetime) -> str:
    """The kubelet's ``--timestamps`` prefix: RFC 3339 with nanoseconds, UTC."""
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def container_lines(
    pod: dict[str, Any], container: str, now: datetime, ignores_sigterm: bool = False
) -> list[tuple[datetime, str]]:
    """(time, line) of everything ``container`` of ``pod`` logged up to ``now``."""
    meta, spec, st = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    cs = next((c for c in st.get("containerStatuses") or [] if c.get("name") == container), None)
    if cs is None:
        return []
    state = cs.get("state") or {}
    running, terminated = state.get("running"), state.get("terminated")
    started_at = (running or {}).get("startedAt") or (terminated or {}).get("startedAt")
    if not started_at:
        return []
    image = next((c.get("image", "") for c in spec.get("containers") or [] if c.get("name") == container), "")
    start = _parse(started_at)
    end = _parse(terminated["finishedAt"]) if terminated and terminated.get("finishedAt") else now
    out: list[tuple[datetime, str]] = [
        (start, f"starting {image} (container {container} of pod {meta['namespace']}/{meta['name']})"),
        (start + timedelta(milliseconds=350), "listening on :8080"),
    ]
    if cs.get("ready") or terminated:
        out.append((start + timedelta(milliseconds=800), "ready: serving requests"))
    kill_at: datetime | None = None
    if meta.get("deletionTimestamp"):
        grace = int(meta.get("deletionGracePeriodSeconds") or spec.get("terminationGracePeriodSeconds") or 0)
        kill_at = _parse(meta["deletionTimestamp"]) - timedelta(seconds=grace)
    t = start + timedelta(seconds=HEALTH_EVERY)
    stop = min(end, kill_at) if kill_at else end
    n = 0
    while t <= stop and t <= now:
        n += 1
        out.append((t, f"health check ok ({n})"))
        t += timedelta(seconds=HEALTH_EVERY)
    if kill_at is not None and kill_at <= now and kill_at >= start:
        if ignores_sigterm:
            out.append((kill_at, "received SIGTERM: ignoring it"))
        else:
            out.append((kill_at, "received SIGTERM: shutting down gracefully"))
    if terminated:
        code = terminated.get("exitCode", 0)
        out.append((end, f"exiting with code {code}"))
    return [(when, line) for when, line in out if when <= now]


def format_lines(lines: list[tuple[datetime, str]], timestamps: bool) -> bytes:
    """Log lines as the kubelet serves them, each prefixed with its RFC 3339 time when ``timestamps``."""
    return "".join(f"{_stamp(t) + ' ' if timestamps else ''}{line}\n" for t, line in lines).encode()


def select_container(pod: dict[str, Any], container: str | None) -> str:
    """The container a pods/log request means; raises LogError as the API server words it."""
    names = [str(c.get("name", "")) for c in (pod.get("spec") or {}).get("containers") or []]
    pname = pod["metadata"]["name"]
    if not container:
        if len(names) == 1:
            return names[0]
        raise LogError(
            400,
            "BadRequest",
            f"a container name must be specified for pod {pname}, choose one of: [{' '.join(names)}]",
        )
    if container not in names:
        raise LogError(400, "BadRequest", f"container {container} is not valid for pod {pname}")
    return container


def read_log(
    pod: dict[str, Any],
    container: str | None,
    now: datetime,
    *,
    ignores_sigterm: bool = False,
    previous: bool = False,
    timestamps: bool = False,
    tail_lines: int | None = None,
    since_seconds: int | None = None,
    since_time: str | None = None,
    limit_bytes: int | None = None,
) -> tuple[str, bytes]:
    """(container name, log bytes) for a pods/log GET; raises LogError."""
    name = select_container(pod, container)
    pname = pod["metadata"]["name"]
    if not (pod.get("spec") or {}).get("nodeName"):
        raise LogError(400, "BadRequest", f"pod {pname} does not have a host assigned")
    if previous:
        raise LogError(
            400, "BadRequest", f'previous terminated container "{name}" in pod "{pname}" not found'
        )
    cs = next(
        (c for c in (pod.get("status") or {}).get("containerStatuses") or [] if c.get("name") == name), None
    )
    state = (cs or {}).get("state") or {}
    if cs is None or "waiting" in state:
        why = ((state.get("waiting") or {}).get("reason")) or "ContainerCreating"
        raise LogError(400, "BadRequest", f'container "{name}" in pod "{pname}" is waiting to start: {why}')
    lines = container_lines(pod, name, now, ignores_sigterm)
    if since_time:
        try:
            cut = _parse(since_time)
        except ValueError:
            raise LogError(
                400, "BadRequest", f"invalid sinceTime {since_time!r}: expected RFC 3339"
            ) from None
        lines = [(t, line) for t, line in lines if t >= cut]
    elif since_seconds is not None:
        cut = now - timedelta(seconds=since_seconds)
        lines = [(t, line) for t, line in lines if t >= cut]
    if tail_lines is not None:
        lines = lines[-tail_lines:] if tail_lines > 0 else []
    data = format_lines(lines, timestamps)
    if limit_bytes is not None and limit_bytes >= 0:
        data = data[:limit_bytes]
    return name, data
