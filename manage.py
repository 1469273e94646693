#!/usr/bin/env python
"""Django's command-line utility for podlife."""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping


def demo_defaults(argv: list[str], environ: MutableMapping[str, str]) -> None:
    """``manage.py demo`` is for one machine and its developer: debug pages, and /metrics open to look at.
    Everything else runs with DEBUG off unless DEBUG=1 is set (docs/security.md). Set values win."""
    if argv[1:2] == ["demo"]:
        environ.setdefault("DEBUG", "1")
        environ.setdefault("PODLIFE_METRICS_PUBLIC", "1")


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")
    demo_defaults(sys.argv, os.environ)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
