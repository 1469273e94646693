"""The bytes a destination receives: generic JSON (schema ``podlife.alert/v1``, docs/deploy.md "Webhooks")
or a Slack-compatible message (``text`` plus Block Kit ``blocks``).

Built once, when the scan queues a delivery, and sent as they are on every retry, so the signature and
the receiver's deduplication (by ``id``) see the same message each time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import orjson
from django.conf import settings
from django.urls import reverse

from timelines.lifecycle.timeline import format_time

SCHEMA = "podlife.alert/v1"
Event = Literal["new", "resolved", "test"]


@dataclass(frozen=True, slots=True)
class FindingView:
    """A finding as the alerts see it: its identity and what a message says of it."""

    identity: str
    cluster: str
    subject: str  # pod, pdb or node
    subject_name: str  # namespace/name of a pod or PDB, the node's name
    pod_uid: str
    namespace: str
    node: str
    kind: str
    severity: str
    message: str
    start: datetime
    end: datetime | None

    @property
    def open(self) -> bool:
        return self.end is None


def page_path(f: FindingView) -> str:
    """The podlife page that shows the finding: its pod, its PDB, or its node."""
    if f.subject == "pod" and f.pod_uid:
        return reverse("pod", kwargs={"cluster": f.cluster, "uid": f.pod_uid})
    if f.subject == "pdb" and "/" in f.subject_name:
        namespace, name = f.subject_name.split("/", 1)
        return reverse("pdb", kwargs={"cluster": f.cluster, "namespace": namespace, "name": name})
    if f.node:
        return reverse("node", kwargs={"cluster": f.cluster, "node": f.node})
    return reverse("cluster", kwargs={"cluster": f.cluster})


def page_url(f: FindingView) -> str:
    return settings.PODLIFE_EXTERNAL_URL + page_path(f)


def event_id(identity: str, event: Event) -> str:
    return f"{identity}.{event}"


def finding_json(f: FindingView) -> dict[str, Any]:
    return {
        "identity": f.identity,
        "cluster": f.cluster,
        "subject": f.subject,
        "subject_name": f.subject_name,
        "namespace": f.namespace,
        "node": f.node,
        "pod_uid": f.pod_uid,
        "kind": f.kind,
        "severity": f.severity,
        "message": f.message,
        "start": format_time(f.start),
        "end": format_time(f.end),
        "open": f.open,
        "url": page_url(f),
    }


def generic(event: Event, f: FindingView, created: datetime) -> bytes:
    finding = finding_json(f)
    if event == "resolved":
        finding["open"] = False  # also when it is gone and its end is unknown (end: null)
    body = {
        "schema": SCHEMA,
        "id": event_id(f.identity, event),
        "event": event,
        "created_at": format_time(created),
        "finding": finding,
    }
    return orjson.dumps(body)


_ICON = {"critical": ":rotating_light:", "warning": ":warning:", "info": ":information_source:"}


def _escape(text: str) -> str:
    # Slack's mrkdwn: &, < and > must be escaped, or a crafted name could make a link or mention.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack(event: Event, f: FindingView, created: datetime) -> bytes:
    if event == "resolved":
        head = f":white_check_mark: Resolved: {f.kind.replace('_', ' ')}"
    elif event == "test":
        head = ":bell: podlife test message"
    else:
        head = f"{_ICON.get(f.severity, '')} {f.kind.replace('_', ' ').capitalize()} ({f.severity})".strip()
    where = f"{f.cluster} · {f.subject_name or f.node}"
    url = page_url(f)
    link = f"<{url}|open in podlife>" if url.startswith("http") else f"podlife page: {url}"
    text = f"{head} — {where}: {f.message}"
    body = {
        "text": _escape(text),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{_escape(head)}*\n{_escape(where)}"}},
            {"type": "section", "text": {"type": "mrkdwn", "text": _escape(f.message)}},
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": f"since {format_time(f.start)}"
                        + (f" · ended {format_time(f.end)}" if f.end else "")
                        + f" · {link}",
                    }
                ],
            },
        ],
    }
    return orjson.dumps(body)


def build(fmt: str, event: Event, f: FindingView, created: datetime) -> bytes:
    if fmt == "slack":
        return slack(event, f, created)
    return generic(event, f, created)
