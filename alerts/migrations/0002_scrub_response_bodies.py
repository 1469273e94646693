"""Drop the response bodies earlier versions kept in ``last_error`` (issue #35: "HTTP 500: <the first 200
characters of what answered>", a local service's error page among them). What remains is the status;
the timing was not recorded then."""

from __future__ import annotations

import re
from typing import Any

from django.db import migrations

STORED_BODY = re.compile(r"HTTP (\d{3}): .*", re.DOTALL)


def scrub(apps: Any, schema_editor: Any) -> None:
    for model in (apps.get_model("alerts", "Destination"), apps.get_model("alerts", "Delivery")):
        for row in model.objects.filter(last_error__contains="HTTP ").only("pk", "last_error").iterator():
            scrubbed = STORED_BODY.sub(r"HTTP \1", row.last_error)
            if scrubbed.count("(") > scrubbed.count(")"):  # "expired: … (HTTP 500: …)"
                scrubbed += ")"
            if scrubbed != row.last_error:
                model.objects.filter(pk=row.pk).update(last_error=scrubbed)


class Migration(migrations.Migration):
    dependencies = [("alerts", "0001_initial")]

    operations = [migrations.RunPython(scrub, migrations.RunPython.noop)]
