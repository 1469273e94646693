"""The audit parser is pure: importing it loads no Django, Celery, Channels or kubernetes client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_audit_parser_imports_nothing_framework() -> None:
    code = (
        "import sys, collectors.parsers.audit;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'django','celery','channels','kubernetes'});"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
