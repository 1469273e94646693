"""Sending queued deliveries: signed POSTs, a rate limit per destination, retries with backoff.

* Each destination is worked by one sender at a time, by claim (``claimed_until``), as healthchecks
  claims its flips: ``UPDATE … WHERE claimed_until < now`` and check the count. No transaction is held
  open across an HTTP request.
* At most ``max_per_minute`` messages a minute per destination; the rest stay queued, in order.
* A failure (connection error, timeout, 408, 429, 5xx, any other 4xx but the ones below) backs the whole
  destination off: ``BACKOFF_BASE_S`` doubling per consecutive failure up to ``BACKOFF_CAP_S``, with
  jitter, or the receiver's ``Retry-After``. Messages keep their order; a delivery gives up after
  ``MAX_ATTEMPTS`` attempts or ``MAX_AGE`` in the queue. 400, 413 and 422 say the message itself is
  refused, so it fails at once and the next one goes.
* Each request goes only where ``alerts/egress.py`` allows: the host is resolved once, every address it
  resolves to is checked (public, or allowed by ``PODLIFE_WEBHOOK_ALLOW``), and the connection goes to
  the checked address, the URL's host kept as the ``Host`` header, the TLS server name and the name the
  certificate is verified against. Environment proxies are not used (a proxy would resolve the name
  itself, after the check); redirects are not followed.
* Nothing of a response but its status and ``Retry-After`` is read: its body is never stored or logged
  (a local service's error page once came back through ``last_error``). ``last_error`` says
  ``HTTP 500 after 120 ms``, or the connection error's class.
* Every message carries ``X-Podlife-Signature: sha256=HEX``, the HMAC-SHA256 of
  ``"{X-Podlife-Timestamp}." + body`` under the destination's signing secret, and ``X-Podlife-Delivery``,
  stable across retries, for the receiver to drop repeats.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import unquote, urlsplit

import certifi
import urllib3
from django.db.models import Q
from django.utils import timezone

from alerts import egress
from alerts.models import Delivery, Destination

log = logging.getLogger(__name__)

BACKOFF_BASE_S = 5.0
BACKOFF_CAP_S = 600.0
MAX_ATTEMPTS = 25
MAX_AGE = timedelta(hours=24)
CLAIM_S = 120.0
CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 3.05, 10.0
PERMANENT = {400, 413, 422}
USER_AGENT = "podlife-alerts/1"
CA_BUNDLE = certifi.where()  # the trust store requests used before; tests point it at their own CA


@dataclass
class SendResult:
    sent: int = 0
    retried: int = 0
    failed: int = 0


@dataclass(frozen=True)
class Outcome:
    ok: bool
    permanent: bool
    status: int | None
    error: str
    retry_after: float | None = None


def sign(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def backoff(failures: int, *, rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait after ``failures`` consecutive failures: doubling, capped, +-20% jitter."""
    delay = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0 ** max(0, failures - 1))
    return delay * (0.8 + 0.4 * rng())


# What sending raises when the destination cannot be reached or answers garbage (retries are off, so urllib3's
# errors come unwrapped); ssl's and the socket's errors are OSErrors. Anything else is a bug and goes up.
_UNREACHABLE = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


def post(dest: Destination, delivery: Delivery, allow: egress.Allow | None = None) -> Outcome:
    body = bytes(delivery.body)
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Podlife-Event": delivery.event,
        "X-Podlife-Delivery": delivery.event_id,
        "X-Podlife-Timestamp": stamp,
        "X-Podlife-Signature": sign(dest.signing_secret, stamp, body),
    }
    started = time.monotonic()
    try:
        where = egress.target(dest.url, allow)
    except egress.AddressRefused as exc:
        # The host's name and the refused address only: never the URL (a Slack webhook's path is its secret).
        return Outcome(False, False, None, f"AddressRefused: {exc}")
    try:
        code, retry_after = _send(where, dest.url, headers, body)
    except _UNREACHABLE as exc:
        took = _ms(started)
        # Never the URL, nor the exception's text (it may quote the URL or what the far side said).
        return Outcome(
            False, False, None, f"{type(exc).__name__} after {took} ms: could not reach the destination"
        )
    took = _ms(started)
    if 200 <= code < 300:
        return Outcome(True, False, code, "")
    return Outcome(False, code in PERMANENT, code, f"HTTP {code} after {took} ms", _retry_after(retry_after))


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _send(where: egress.Target, url: str, headers: dict[str, str], body: bytes) -> tuple[int, str | None]:
    """POST ``body`` to the checked address of ``where``; the status and Retry-After, nothing else read.

    The pool connects to the address itself; ``Host``, the TLS server name (SNI) and the certificate's
    name are the URL's host, so a certificate is verified for the name the user gave, not the address."""
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {**headers, "Host": where.host_header}
    if parts.username is not None:  # https://user:pass@host/ as requests sent it: HTTP basic
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    timeout = urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S)
    pool: urllib3.HTTPConnectionPool
    if where.scheme == "https":
        pool = urllib3.HTTPSConnectionPool(
            str(where.address),
            where.port,
            timeout=timeout,
            retries=False,
            cert_reqs="CERT_REQUIRED",
            ca_certs=CA_BUNDLE,
            assert_hostname=where.host,
            server_hostname=None if where.is_literal else where.host,
        )
    else:
        pool = urllib3.HTTPConnectionPool(str(where.address), where.port, timeout=timeout, retries=False)
    try:
        response = pool.urlopen(
            "POST",
            path,
            body=body,
            headers=headers,
            redirect=False,
            retries=False,
            preload_content=False,  # the body stays unread: it is closed with the connection
            assert_same_host=False,
        )
        try:
            return response.status, response.headers.get("Retry-After")
        finally:
            response.close()
    finally:
        pool.close()


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, min(float(value), BACKOFF_CAP_S)) if value else None
    except ValueError:
        return None  # an HTTP date: the usual backoff is close enough


def deliver_due(*, now: Callable[[], datetime] = timezone.now) -> SendResult:
    """Send what is due for every enabled destination this process can claim."""
    total = SendResult()
    allow = egress.allow_from_settings()
    start = now()
    due = (
        Destination.objects.filter(enabled=True)
        .filter(Q(retry_at__isnull=True) | Q(retry_at__lte=start))
        .filter(deliveries__status=Delivery.Status.PENDING, deliveries__next_attempt_at__lte=start)
        .values_list("pk", flat=True)
        .distinct()
    )
    for pk in list(due):
        claimed = (
            Destination.objects.filter(pk=pk)
            .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=start))
            .update(claimed_until=start + timedelta(seconds=CLAIM_S))
        )
        if claimed != 1:
            continue  # another sender has it
        try:
            result = _deliver_destination(Destination.objects.get(pk=pk), now, allow)
        finally:
            Destination.objects.filter(pk=pk).update(claimed_until=None)
        total.sent += result.sent
        total.retried += result.retried
        total.failed += result.failed
    return total


def _deliver_destination(dest: Destination, now: Callable[[], datetime], allow: egress.Allow) -> SendResult:
    result = SendResult()
    t = now()
    budget = dest.max_per_minute - dest.deliveries.filter(sent_at__gte=t - timedelta(minutes=1)).count()
    if budget <= 0:
        return result
    queue = dest.deliveries.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=t).order_by("id")
    for delivery in queue[:budget]:
        t = now()
        if t - delivery.created_at > MAX_AGE:
            _give_up(delivery, f"expired: not accepted within {MAX_AGE} ({delivery.last_error})")
            result.failed += 1
            continue
        outcome = post(dest, delivery, allow)
        delivery.attempts += 1
        delivery.last_status_code = outcome.status
        if outcome.ok:
            delivery.status, delivery.sent_at, delivery.last_error = Delivery.Status.SENT, now(), ""
            delivery.save(update_fields=["status", "sent_at", "last_error", "attempts", "last_status_code"])
            if dest.failures:
                dest.failures, dest.retry_at, dest.last_error = 0, None, ""
                dest.save(update_fields=["failures", "retry_at", "last_error"])
            result.sent += 1
            continue
        delivery.last_error = outcome.error
        if outcome.permanent or delivery.attempts >= MAX_ATTEMPTS:
            why = (
                "refused by the destination"
                if outcome.permanent
                else f"gave up after {delivery.attempts} attempts"
            )
            _give_up(delivery, f"{why}: {outcome.error}")
            result.failed += 1
            if outcome.permanent:
                continue  # this message is refused; the next one may be fine
        else:
            result.retried += 1
        # The destination is down or pushing back: it waits, and so does everything queued for it.
        dest.failures += 1
        delay = outcome.retry_after if outcome.retry_after is not None else backoff(dest.failures)
        dest.retry_at = now() + timedelta(seconds=delay)
        dest.last_error = outcome.error
        dest.save(update_fields=["failures", "retry_at", "last_error"])
        if delivery.status == Delivery.Status.PENDING:
            delivery.next_attempt_at = dest.retry_at
        delivery.save(
            update_fields=["attempts", "last_error", "last_status_code", "next_attempt_at", "status"]
        )
        log.warning(
            "alerts: %s: delivery %s failed (%s); next try in %.0f s",
            dest.name,
            delivery.event_id,
            outcome.error,
            delay,
        )
        break
    return result


def _give_up(delivery: Delivery, why: str) -> None:
    delivery.status, delivery.last_error = Delivery.Status.FAILED, why[:2000]
    delivery.save(update_fields=["status", "last_error", "attempts", "last_status_code"])
    log.error(
        "alerts: delivery %s to %s failed for good: %s", delivery.event_id, delivery.destination_id, why
    )


KEEP_DONE = timedelta(days=7)


def purge_done(*, now: datetime | None = None) -> int:
    """Drop sent and failed deliveries older than ``KEEP_DONE`` (the admin shows the last week)."""
    cutoff = (now or timezone.now()) - KEEP_DONE
    done = [Delivery.Status.SENT, Delivery.Status.FAILED]
    deleted, _ = Delivery.objects.filter(status__in=done, created_at__lt=cutoff).delete()
    return deleted
