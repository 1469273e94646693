"""Where a webhook may connect: public addresses only, unless ``PODLIFE_WEBHOOK_ALLOW`` names the host or a
range (issue #35: a destination at ``http://127.0.0.1:6379/`` made podlife talk to its own Redis).

A destination's host is resolved once, every address it resolves to is checked, and the connection goes
to a checked address (``alerts/delivery.py`` pins it; the URL's host stays the ``Host`` header, the TLS
server name and the name the certificate must carry). So a name that answers a public address when it is
saved and a private one later (DNS rebinding) is refused when it is used: the check runs at save (the
model's ``clean``) and again at every connect. A name that resolves to several addresses is refused if any
of them is.

Not public: everything Python's ``ipaddress`` calls private, loopback, link-local, multicast, reserved or
unspecified, IPv4 shared address space (CGNAT, 100.64.0.0/10), IPv6 site-local (fec0::/10), and any
IPv6 form that carries an IPv4 address (IPv4-mapped ``::ffff:0:0/96``, IPv4-compatible ``::/96``, NAT64
``64:ff9b::/96`` and ``64:ff9b:1::/48``, 6to4 ``2002::/16``, Teredo) whose IPv4 address is not public.
``ipaddress.is_global`` alone is not enough on Python 3.11: it calls 224.0.0.1, fec0::1 and
``64:ff9b::7f00:1`` global.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[IPAddress]]

SETTING = "PODLIFE_WEBHOOK_ALLOW"
CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")
NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
DEFAULT_PORTS = {"http": 80, "https": 443}


class AddressRefused(Exception):
    """A destination host that is, or resolves to, an address webhooks may not reach (or to none)."""


@dataclass(frozen=True)
class Allow:
    """What ``PODLIFE_WEBHOOK_ALLOW`` lets through besides public addresses: host names (exact, any
    case; whatever they resolve to) and address ranges (CIDR, or one address)."""

    names: frozenset[str] = frozenset()
    ranges: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Allow:
        """``"hooks.internal, 10.20.0.0/16, ::1"`` → an Allow; ValueError naming an entry that is neither a
        host name nor an address range."""
        names: set[str] = set()
        ranges: list[IPNetwork] = []
        for entry in (part.strip() for part in text.split(",")):
            if not entry:
                continue
            if any(c in entry for c in ":/") or entry.replace(".", "").isdigit():
                try:
                    ranges.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                except ValueError:
                    raise ValueError(
                        f"{SETTING}: {entry!r} is not an address range: expected e.g. 10.20.0.0/16 or fd00::/8"
                    ) from None
                continue
            labels = entry.rstrip(".").split(".")
            if not all(label and len(label) <= 63 and label.replace("-", "").isalnum() for label in labels):
                raise ValueError(f"{SETTING}: {entry!r} is not a host name: expected e.g. hooks.internal")
            names.add(entry.rstrip(".").lower())
        return cls(frozenset(names), tuple(ranges))

    def allows_name(self, host: str) -> bool:
        return host.rstrip(".").lower() in self.names

    def allows_address(self, ip: IPAddress) -> bool:
        candidates = [ip, *([inner] if (inner := embedded_ipv4(ip)) is not None else [])]
        return any(a.version == r.version and a in r for a in candidates for r in self.ranges)


def allow_from_settings() -> Allow:
    from django.conf import settings

    return Allow.parse(str(getattr(settings, SETTING, "") or ""))


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4, Teredo client), if any."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if any(ip in net for net in NAT64) or (ip in IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def why_not_public(ip: IPAddress) -> str | None:
    """None for an address webhooks may reach by default; else what kind of address it is."""
    inner = embedded_ipv4(ip)
    if inner is not None:
        why = why_not_public(inner)
        if why is not None:
            return f"an IPv6 form of {inner}, {why}"
        assert isinstance(ip, ipaddress.IPv6Address)  # only IPv6 addresses carry another
        if ip.ipv4_mapped is None and not any(ip in net for net in NAT64) and ip.sixtofour is None:
            return "an IPv4-compatible or Teredo address (deprecated forms)"
        return None
    kinds = (
        ("an unspecified address", ip.is_unspecified),
        ("a loopback address", ip.is_loopback),
        ("a link-local address (where cloud metadata services answer)", ip.is_link_local),
        ("a multicast address", ip.is_multicast),
        ("a shared (CGNAT) address", isinstance(ip, ipaddress.IPv4Address) and ip in CGNAT),
        ("a site-local address", isinstance(ip, ipaddress.IPv6Address) and ip in SITE_LOCAL),
        ("a private address", ip.is_private),
        ("a reserved address", ip.is_reserved),
        ("an address that is not globally routable", not ip.is_global),
    )
    return next((what for what, hit in kinds if hit), None)


def system_resolver(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (getaddrinfo, TCP), in the resolver's order, without repeats."""
    out: list[IPAddress] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])  # an IPv6 zone is no part of it
        if ip not in out:
            out.append(ip)
    return out


# The one place a host name becomes addresses: tests put a stub resolver here (e.g. one that answers a
# public address at save and 127.0.0.1 at connect).
resolve: Resolver = system_resolver


@dataclass(frozen=True)
class Target:
    """Where one request goes: the URL's scheme, host (as written, no brackets), port, and the checked
    address to connect to."""

    scheme: str
    host: str
    port: int
    address: IPAddress

    @property
    def host_header(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return shown if self.port == DEFAULT_PORTS[self.scheme] else f"{shown}:{self.port}"

    @property
    def is_literal(self) -> bool:
        return _literal(self.host) is not None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _host_port(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise AddressRefused("expected an http:// or https:// URL with a host")
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError:
        raise AddressRefused("the URL's port is not a number from 1 to 65535") from None
    return scheme, parts.hostname, port


def check(host: str, addresses: Iterable[IPAddress], allow: Allow) -> None:
    """Raise AddressRefused, naming the address, unless ``allow`` or the public rule lets every one of
    ``addresses`` (what ``host`` resolved to) through."""
    if allow.allows_name(host):
        return
    for ip in addresses:
        why = why_not_public(ip)
        if why is not None and not allow.allows_address(ip):
            said = f"{host} is" if _literal(host) == ip else f"{host} resolves to {ip},"
            raise AddressRefused(
                f"{said} {why}: webhooks reach public addresses only "
                f"({SETTING} can allow a host name or an address range)"
            )


def target(url: str, allow: Allow | None = None, *, resolver: Resolver | None = None) -> Target:
    """Resolve ``url``'s host once, check every address, and return where to connect (the first address).
    Raises AddressRefused with a sentence naming the host and the refused address."""
    allow = allow if allow is not None else allow_from_settings()
    scheme, host, port = _host_port(url)
    literal = _literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            addresses = (resolver or resolve)(host, port)
        except (OSError, UnicodeError) as exc:
            raise AddressRefused(f"{host} does not resolve ({type(exc).__name__})") from None
        if not addresses:
            raise AddressRefused(f"{host} resolves to no address")
    check(host, addresses, allow)
    return Target(scheme, host, port, addresses[0])
