"""collectors.parsers stays pure: no Django, Celery, Channels or kubernetes client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_parsers_import_nothing_framework():
    code = (
        "import sys, collectors.parsers, collectors.parsers.kubectl, collectors.parsers.kubelet_log;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'django','celery','channels','kubernetes'});"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
