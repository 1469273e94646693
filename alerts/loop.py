"""One alert round (``run_once``) and a thread that repeats it, for processes without Celery beat.

Shutdown order: ``stop`` sets the event; the thread finishes the round it is in (a send waits at most
the HTTP timeouts of alerts/delivery.py), closes its database connection and ends; ``stop`` joins it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection

from alerts.delivery import deliver_due, purge_done
from alerts.notifier import scan

log = logging.getLogger(__name__)


def run_once() -> dict[str, Any]:
    """Scan, then deliver: what was queued and what was sent."""
    found = scan()
    sent = deliver_due()
    purge_done()
    return {
        "new": found.new,
        "resolved": found.resolved,
        "sent": sent.sent,
        "retried": sent.retried,
        "failed": sent.failed,
    }


class NotifierLoop:
    def __init__(self, interval: float | None = None) -> None:
        self.interval = interval if interval is not None else settings.PODLIFE_ALERTS_SCAN_S
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="alerts-notifier", daemon=True)

    def start(self) -> NotifierLoop:
        self._thread.start()
        return self

    def wait(self) -> None:
        """Block until the loop ends (``stop``) or Ctrl-C."""
        try:
            while self._thread.is_alive():
                self._thread.join(1.0)
        except KeyboardInterrupt:
            pass

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                close_old_connections()
                try:
                    run_once()
                except Exception:  # a round that fails is logged; the next one tries again
                    log.exception("alerts: notifier round failed")
                self._stop.wait(self.interval)
        finally:
            connection.close()
