"""One URL path segment for any name a cluster or an ingest can hold (finding 2 of issue #18).

Kubernetes names are DNS labels or subdomains, but a hostile or broken source can send anything that fits
the store (up to 253 characters: ``/``, ``?``, ``#``, ``%``, spaces, unicode, ``..``). Django decodes a
request's path before it routes it, so ``%2F`` from a plain ``quote()`` arrives as ``/`` and no longer
matches a one-segment route; a browser resolves a ``..`` segment before it sends the request. So
``to_url`` percent-encodes ``%`` and ``/`` (and spells out a name made only of dots) itself, ``reverse()``
then quotes that ``%`` once more (``a/b`` → ``a%252Fb``), the server's decoding undoes one level and
``to_python`` the other. Plain names (``web-0``, ``node-a.example``) come out unchanged.

``static/podlife/common.js`` ``pathSegment()`` builds the same segment in the browser.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from django.urls import register_converter


def segment(value: str) -> str:
    """``value`` as ``to_url`` gives it to ``reverse()`` (which quotes the rest)."""
    text = str(value).replace("%", "%25").replace("/", "%2F")
    if text and not text.strip("."):
        text = text.replace(".", "%2E")  # "." and ".." are path steps to a browser, not names
    return text


def url_segment(value: str) -> str:
    """``value`` as it appears in a URL that ``reverse()`` built (for paths built by hand: websockets)."""
    return quote(segment(value), safe="!$&'()*+,;=~:@")


class NameSegment:
    """``<segment:node>``: one path segment holding any name (see the module docstring)."""

    regex = "[^/]+"

    def to_python(self, value: str) -> str:
        return unquote(value)

    def to_url(self, value: str) -> str:
        return segment(value)


register_converter(NameSegment, "segment")
