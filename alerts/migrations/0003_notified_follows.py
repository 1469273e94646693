"""``NotifiedFinding.follows``: the finding a told row follows now (the told identity until new evidence
moves the finding's start), and the pod UID its identity covers. Rows told before follow their own
identity; their pod UID is not known (blank), so they pair only with findings whose pod UID is blank."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


def follow_own_identity(apps: Any, schema_editor: Any) -> None:
    NotifiedFinding = apps.get_model("alerts", "NotifiedFinding")
    NotifiedFinding.objects.update(follows=models.F("identity"))


class Migration(migrations.Migration):
    dependencies = [("alerts", "0002_scrub_response_bodies")]

    operations = [
        migrations.AddField(
            model_name="notifiedfinding",
            name="follows",
            field=models.CharField(
                default="",
                help_text="The identity of the finding this row follows now: the told one, or the same finding "
                "re-derived with a start that new evidence moved",
                max_length=64,
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="notifiedfinding",
            name="pod_uid",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AlterField(
            model_name="notifiedfinding",
            name="identity",
            field=models.CharField(
                help_text="What the destination was told: sha256 of cluster, subject, name, pod UID, kind, start",
                max_length=64,
            ),
        ),
        migrations.RunPython(follow_own_identity, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="notifiedfinding",
            index=models.Index(fields=["destination", "follows"], name="notified_follows"),
        ),
        migrations.AddIndex(
            model_name="notifiedfinding",
            index=models.Index(fields=["destination", "cluster", "subject_name", "kind"], name="notified_subject"),
        ),
    ]
