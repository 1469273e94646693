"""Django set-up shared by the benchmark scripts (run from the project root or bench/)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")
    import django

    django.setup()
