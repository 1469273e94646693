"""Webhooks cannot reach inside (issue #35, finding 5): a staff user with the alert permissions saved
destinations at ``http://127.0.0.1:6379/``, ``:5432``, ``[::1]``, ``[::ffff:127.0.0.1]`` and the cloud
metadata address, and podlife connected to Redis and PostgreSQL and showed their error pages back.

Destinations reach public addresses only, unless ``PODLIFE_WEBHOOK_ALLOW`` names the host or a range;
checked at save and again at each connect, after DNS, connecting to the address that was checked. No
response body is ever kept or logged, and the signing secret is write-only.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError

from alerts import delivery, egress
from alerts.delivery import deliver_due
from alerts.models import Delivery, Destination
from alerts.notifier import queue_test_message
from demo_cluster.tls import make_serving_certs

from .receiver import Receiver

pytestmark = pytest.mark.django_db

PUBLIC = ipaddress.ip_address("93.184.216.34")  # a documentation-free public address (example.com's)

# Every form of an address that is not public, as a URL a user could save (finding 5 and its cousins).
INSIDE = {
    "redis on loopback": "http://127.0.0.1:6379/",
    "postgres on loopback": "http://127.0.0.1:5432/",
    "loopback /8": "http://127.1.2.3/",
    "IPv6 loopback": "http://[::1]:8080/",
    "IPv4-mapped loopback": "http://[::ffff:127.0.0.1]:6379/",
    "IPv4-mapped metadata": "http://[::ffff:169.254.169.254]/",
    "IPv4-compatible loopback": "http://[::127.0.0.1]/",
    "NAT64 loopback": "http://[64:ff9b::7f00:1]/",
    "NAT64 private": "http://[64:ff9b::a00:1]/",
    "local-use NAT64": "http://[64:ff9b:1::a00:1]/",
    "6to4 loopback": "http://[2002:7f00:1::1]/",
    "6to4 private": "http://[2002:c0a8:101::1]/",
    "cloud metadata": "http://169.254.169.254/latest/meta-data/",
    "cloud metadata IPv6": "http://[fd00:ec2::254]/",
    "link-local IPv6": "http://[fe80::1]/",
    "private 10/8": "http://10.0.0.5/",
    "private 172.16/12": "https://172.16.4.4/",
    "private 192.168/16": "http://192.168.1.1/",
    "unique local fc00::/7": "http://[fd12:3456::1]/",
    "CGNAT": "http://100.64.0.1/",
    "multicast": "http://224.0.0.1/",
    "IPv6 multicast": "http://[ff02::1]/",
    "reserved 240/4": "http://240.0.0.1/",
    "broadcast": "http://255.255.255.255/",
    "unspecified": "http://0.0.0.0:6379/",
    "IPv6 unspecified": "http://[::]/",
    "site-local IPv6": "http://[fec0::1]/",
    "this network 0/8": "http://0.1.2.3/",
    "benchmarking 198.18/15": "http://198.18.0.1/",
    "documentation": "http://192.0.2.1/",
    "Teredo": "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
}


class StubResolver:
    """Answers from a script, one answer per call (the last repeats): DNS that changes its mind."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = [[ipaddress.ip_address(a) for a in answer] for answer in answers]
        self.calls: list[str] = []

    def __call__(self, host: str, port: int) -> list[egress.IPAddress]:
        self.calls.append(host)
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


class Listener:
    """A TCP listener that only counts the connections it accepts (Redis or PostgreSQL, as far as a
    connection attempt is concerned)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            conn.sendall(b"-ERR unknown command 'POST', with args beginning with: '/'\r\n")
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def listeners() -> Iterator[dict[str, Listener]]:
    made = {"v4": Listener("127.0.0.1"), "v6": Listener("::1")}
    yield made
    for listener in made.values():
        listener.close()


@pytest.fixture
def no_allow(settings) -> None:
    settings.PODLIFE_WEBHOOK_ALLOW = ""


def _dest(url: str, **fields) -> Destination:
    """A destination as a row: written past the model's validation (as one saved before this check
    existed, or by a migration), so the connect-time check stands alone."""
    fields.setdefault("name", "hook")
    fields.setdefault("min_severity", "info")
    return Destination.objects.create(url=url, **fields)


# -- at save -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("url", INSIDE.values(), ids=INSIDE.keys())
def test_every_inside_address_is_refused_at_save_naming_it(url: str, no_allow) -> None:
    dest = Destination(name="hook", url=url, min_severity="info")
    with pytest.raises(ValidationError) as refused:
        dest.full_clean()
    (message,) = refused.value.message_dict["url"]
    shown = re.search(r"//\[?([^\]/]+?)\]?(:\d+)?/", url).group(1)  # type: ignore[union-attr]
    assert message.startswith(f"{shown} is a") and " address" in message
    assert "public addresses only" in message and "PODLIFE_WEBHOOK_ALLOW" in message


def test_a_name_that_resolves_inside_is_refused_at_save(monkeypatch, no_allow) -> None:
    monkeypatch.setattr(egress, "resolve", StubResolver([str(PUBLIC), "127.0.0.1"]))
    dest = Destination(name="hook", url="https://hooks.example.org/in", min_severity="info")
    with pytest.raises(ValidationError) as refused:
        dest.full_clean()
    assert refused.value.message_dict["url"] == [
        "hooks.example.org resolves to 127.0.0.1, a loopback address: webhooks reach public addresses "
        "only (PODLIFE_WEBHOOK_ALLOW can allow a host name or an address range)"
    ]


def test_a_public_destination_saves(monkeypatch, no_allow) -> None:
    monkeypatch.setattr(egress, "resolve", StubResolver([str(PUBLIC), "2606:2800:220:1::1"]))
    Destination(name="hook", url="https://hooks.example.org/in", min_severity="info").full_clean()
    Destination(name="hook2", url="https://[::ffff:93.184.216.34]/in", min_severity="info").full_clean()


def test_the_admin_form_says_which_address_is_refused(client, no_allow) -> None:
    staff = get_user_model().objects.create_user("alerts-only", password="pw-for-tests-only", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__endswith="_destination"))
    client.force_login(staff)
    response = client.post(
        "/admin/alerts/destination/add/",
        {
            "name": "redis",
            "url": "http://127.0.0.1:6379/",
            "format": "json",
            "new_signing_secret": "s",
            "min_severity": "info",
            "max_per_minute": "5",
        },
    )
    assert response.status_code == 200
    assert b"127.0.0.1 is a loopback address: webhooks reach public addresses only" in (response.content)
    assert not Destination.objects.exists()


# -- at connect --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("url", INSIDE.values(), ids=INSIDE.keys())
def test_every_inside_address_is_refused_at_connect(url: str, no_allow) -> None:
    dest = _dest(url)
    queue_test_message(dest)
    assert deliver_due().retried == 1
    dest.refresh_from_db()
    assert dest.last_error.startswith("AddressRefused: ") and "public addresses only" in dest.last_error
    assert Delivery.objects.get().status == Delivery.Status.PENDING  # kept: an allow setting may come


@pytest.mark.parametrize(
    "template",
    [
        "http://127.0.0.1:{v4}/",
        "http://[::ffff:127.0.0.1]:{v4}/",
        "http://[::1]:{v6}/",
        "http://localhost:{v4}/",
    ],
)
def test_no_connection_is_made_to_a_local_service(template: str, listeners, no_allow) -> None:
    """The very listeners stand in for Redis and PostgreSQL: not one connection reaches them."""
    dest = _dest(template.format(v4=listeners["v4"].port, v6=listeners["v6"].port))
    queue_test_message(dest)
    deliver_due()
    dest.refresh_from_db()
    assert dest.last_error.startswith("AddressRefused: ")
    assert listeners["v4"].accepted == listeners["v6"].accepted == 0


def test_a_rebinding_name_is_refused_at_connect(monkeypatch, listeners, no_allow) -> None:
    """GIVEN a name that resolves to a public address when the destination is saved WHEN it resolves to
    127.0.0.1 at the next connect THEN the connect is refused and the local service sees nothing."""
    resolver = StubResolver([str(PUBLIC)], ["127.0.0.1"])
    monkeypatch.setattr(egress, "resolve", resolver)
    dest = Destination(
        name="hook", url=f"http://rebind.example.org:{listeners['v4'].port}/", min_severity="info"
    )
    dest.full_clean()
    dest.save()
    queue_test_message(dest)
    deliver_due()
    dest.refresh_from_db()
    assert dest.last_error == (
        "AddressRefused: rebind.example.org resolves to 127.0.0.1, a loopback address: webhooks reach public "
        "addresses only (PODLIFE_WEBHOOK_ALLOW can allow a host name or an address range)"
    )
    assert resolver.calls == ["rebind.example.org", "rebind.example.org"]
    assert listeners["v4"].accepted == 0


def test_the_connection_goes_to_the_address_that_was_checked(monkeypatch, settings) -> None:
    """A name is resolved once per send; the request reaches the checked address with the URL's Host."""
    settings.PODLIFE_WEBHOOK_ALLOW = "hooks.internal"
    receiver = Receiver().start()
    try:
        # Were the name resolved again by the HTTP client, it would get the second answer (nothing there).
        resolver = StubResolver(["127.0.0.1"], ["192.0.2.1"])
        monkeypatch.setattr(egress, "resolve", resolver)
        dest = _dest(f"http://hooks.internal:{receiver.port}/hooks/podlife?team=sre")
        queue_test_message(dest)
        assert deliver_due().sent == 1
    finally:
        receiver.stop()
    (got,) = receiver.received
    assert got.path == "/hooks/podlife?team=sre"
    assert got.headers["Host"] == f"hooks.internal:{receiver.port}"
    assert resolver.calls == ["hooks.internal"]


def test_an_allowed_range_is_reached(settings, receiver) -> None:
    settings.PODLIFE_WEBHOOK_ALLOW = "10.20.0.0/16, 127.0.0.0/8"
    dest = _dest(receiver.url)
    dest.full_clean()
    queue_test_message(dest)
    assert deliver_due().sent == 1
    settings.PODLIFE_WEBHOOK_ALLOW = "10.20.0.0/16"  # the range no longer covers it: refused again
    queue_test_message(dest)
    assert deliver_due().sent == 0
    assert len(receiver.received) == 1


def test_an_allowed_ipv6_range_is_reached(settings) -> None:
    settings.PODLIFE_WEBHOOK_ALLOW = "::1/128"
    receiver = Receiver(host="::1").start()
    try:
        dest = _dest(receiver.url)
        dest.full_clean()
        queue_test_message(dest)
        assert deliver_due().sent == 1
    finally:
        receiver.stop()
    (got,) = receiver.received
    assert got.headers["Host"] == f"[::1]:{receiver.port}"


def test_the_allow_setting_names_what_it_cannot_read() -> None:
    allow = egress.Allow.parse(" hooks.internal., 10.20.0.0/16,fd00::/8 , 192.0.2.7")
    assert allow.names == {"hooks.internal"}
    assert allow.allows_address(ipaddress.ip_address("10.20.3.4"))
    assert allow.allows_address(ipaddress.ip_address("::ffff:10.20.3.4"))  # its IPv6 form too
    assert not allow.allows_address(ipaddress.ip_address("10.21.0.1"))
    with pytest.raises(ValueError, match=r"PODLIFE_WEBHOOK_ALLOW: '10\.0\.0\.0/33' is not an address range"):
        egress.Allow.parse("10.0.0.0/33")
    with pytest.raises(ValueError, match=r"PODLIFE_WEBHOOK_ALLOW: 'hooks internal' is not a host name"):
        egress.Allow.parse("hooks internal")


# -- HTTPS: pinned to the address, verified for the name ------------------------------------------------------
class TLSReceiver:
    def __init__(self, tmp_path: Path, name: str) -> None:
        certs = make_serving_certs(hosts=(name,))
        (tmp_path / "ca.pem").write_bytes(certs.ca_pem)
        (tmp_path / "cert.pem").write_bytes(certs.cert_pem)
        (tmp_path / "key.pem").write_bytes(certs.key_pem)
        self.ca_file = str(tmp_path / "ca.pem")
        self.server_names: list[str | None] = []
        self.bodies: list[bytes] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.bodies.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
        context.sni_callback = lambda sock, server_name, ctx: self.server_names.append(server_name)  # type: ignore[assignment]
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    ("cert_name", "delivered"), [("hooks.internal", True), ("someone-else.internal", False)]
)
def test_https_is_pinned_to_the_checked_address_and_verified_for_the_name(
    monkeypatch, settings, tmp_path, cert_name: str, delivered: bool
) -> None:
    settings.PODLIFE_WEBHOOK_ALLOW = "hooks.internal"
    server = TLSReceiver(tmp_path, cert_name)
    try:
        monkeypatch.setattr(delivery, "CA_BUNDLE", server.ca_file)
        monkeypatch.setattr(egress, "resolve", StubResolver(["127.0.0.1"]))
        dest = _dest(f"https://hooks.internal:{server.port}/in")
        queue_test_message(dest)
        result = deliver_due()
    finally:
        server.stop()
    dest.refresh_from_db()
    assert server.server_names[:1] == ["hooks.internal"]  # SNI: the URL's name, not the address
    if delivered:
        assert (result.sent, len(server.bodies)) == (1, 1)
    else:  # a certificate for another name: refused by the client, nothing sent
        assert (result.sent, server.bodies) == (0, [])
        assert re.fullmatch(r"SSLError after \d+ ms: could not reach the destination", dest.last_error)


# -- what comes back -----------------------------------------------------------------------------------------
def test_no_response_body_is_kept_or_logged(receiver, settings, caplog) -> None:
    settings.PODLIFE_WEBHOOK_ALLOW = "127.0.0.1"
    receiver.status = 500
    receiver.reply_body = b"FATAL: password authentication failed for user 'podlife' (secret-ish page)"
    dest = _dest(receiver.url)
    queue_test_message(dest)
    with caplog.at_level(logging.DEBUG):
        deliver_due()
    dest.refresh_from_db()
    sent = Delivery.objects.get()
    assert re.fullmatch(r"HTTP 500 after \d+ ms", dest.last_error)
    assert sent.last_error == dest.last_error and sent.last_status_code == 500
    assert "FATAL" not in caplog.text and "HTTP 500 after" in caplog.text


def test_a_redirect_is_not_followed(receiver, settings) -> None:
    settings.PODLIFE_WEBHOOK_ALLOW = "127.0.0.1"
    inside = Receiver().start()
    try:
        receiver.status = 307
        receiver.reply_headers = {"Location": inside.url}
        dest = _dest(receiver.url)
        queue_test_message(dest)
        deliver_due()
    finally:
        inside.stop()
    dest.refresh_from_db()
    assert re.fullmatch(r"HTTP 307 after \d+ ms", dest.last_error)
    assert (len(receiver.received), inside.received) == (1, [])


# -- the signing secret is write-only --------------------------------------------------------------------------
SECRET = "whsec-do-not-show-7f3a9c"


def test_the_secret_never_shows_in_the_admin(client, settings) -> None:
    settings.PODLIFE_WEBHOOK_ALLOW = "127.0.0.1"
    dest = _dest("http://127.0.0.1:9/hook", signing_secret=SECRET)
    root = get_user_model().objects.create_superuser("root", "root@example.org", "pw-for-tests-only")
    viewer = get_user_model().objects.create_user("viewer", password="pw-for-tests-only", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_destination"))
    for user in (root, viewer):
        client.force_login(user)
        for page in (f"/admin/alerts/destination/{dest.pk}/change/", "/admin/alerts/destination/"):
            response = client.get(page)
            assert response.status_code == 200, (user, page)
            assert SECRET.encode() not in response.content, (user.username, page)
        change = client.get(f"/admin/alerts/destination/{dest.pk}/change/").content.decode()
        assert re.search(r"signing secret:?</label>\s*<div class=\"readonly\">set</div>", change, re.I)
    assert 'name="new_signing_secret"' not in change  # the viewer cannot even replace it


def test_the_secret_can_be_replaced_and_a_blank_keeps_it(client, settings) -> None:
    settings.PODLIFE_WEBHOOK_ALLOW = "127.0.0.1"
    dest = _dest("http://127.0.0.1:9/hook", signing_secret=SECRET)
    client.force_login(
        get_user_model().objects.create_superuser("root", "r@example.org", "pw-for-tests-only")
    )
    form = {
        "name": "hook",
        "url": "http://127.0.0.1:9/hook",
        "format": "json",
        "enabled": "on",
        "min_severity": "info",
        "max_per_minute": "30",
    }
    page = client.get(f"/admin/alerts/destination/{dest.pk}/change/").content.decode()
    assert re.search(r'<input type="password" name="new_signing_secret"[^>]*>', page)
    assert client.post(f"/admin/alerts/destination/{dest.pk}/change/", form).status_code == 302
    dest.refresh_from_db()
    assert dest.signing_secret == SECRET
    form["new_signing_secret"] = "a-new-secret"
    assert client.post(f"/admin/alerts/destination/{dest.pk}/change/", form).status_code == 302
    dest.refresh_from_db()
    assert dest.signing_secret == "a-new-secret"
    form["name"], form["new_signing_secret"] = "another", ""
    response = client.post("/admin/alerts/destination/add/", form)
    assert b"a new destination needs a signing secret" in response.content


def test_bodies_stored_by_earlier_versions_are_scrubbed(settings) -> None:
    """Migration alerts/0002 leaves the status of what earlier versions kept, not the body."""
    from importlib import import_module

    from django.apps import apps

    scrub = import_module("alerts.migrations.0002_scrub_response_bodies").scrub
    dest = _dest("http://127.0.0.1:9/hook", last_error="HTTP 500: -ERR wrong number of arguments for 'post'")
    old = queue_test_message(dest)
    old.last_error = (
        "expired: not accepted within 1 day, 0:00:00 (HTTP 503: <html>pg_hba.conf rejects</html>)"
    )
    old.save()
    kept = _dest(
        "http://127.0.0.1:9/other", name="other", last_error="NewConnectionError after 2 ms: could not reach"
    )
    scrub(apps, None)
    dest.refresh_from_db()
    old.refresh_from_db()
    kept.refresh_from_db()
    assert dest.last_error == "HTTP 500"
    assert old.last_error == "expired: not accepted within 1 day, 0:00:00 (HTTP 503)"
    assert kept.last_error == "NewConnectionError after 2 ms: could not reach"


def test_a_bug_while_sending_goes_up_instead_of_reading_as_unreachable(
    receiver, settings, monkeypatch
) -> None:
    """GIVEN a send that fails with an error no network explains (a bug)
    WHEN the due deliveries are sent
    THEN the error goes up (the notifier logs its traceback), the delivery is not marked as a failed attempt
    "could not reach the destination", and the destination is not left claimed."""
    settings.PODLIFE_WEBHOOK_ALLOW = "127.0.0.1"
    dest = _dest(receiver.url)
    queue_test_message(dest)

    def broken(*args: object) -> tuple[int, str | None]:
        raise TypeError("a bug")

    monkeypatch.setattr(delivery, "_send", broken)
    with pytest.raises(TypeError, match="a bug"):
        deliver_due()
    dest.refresh_from_db()
    sent = Delivery.objects.get()
    assert (sent.attempts, sent.last_error, dest.last_error) == (0, "", "")
    assert dest.claimed_until is None
