"""The derive stage writes only what changed, and finds UID-less lines without scanning a cluster.

* ``digest`` on intervals, markers and findings: a hash of each row (``store.row_digest``); existing rows
  have none, so each pod's rows are rewritten once, the next time it is derived.
* Two partial indexes on observations, for the UID-less kubelet lines and audited requests a pod's
  derivation looks up by name, and node-level lines by time. On PostgreSQL they are created on the
  partitioned table and so on every partition, present and future.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("timelines", "0016_merge_partitions_search"),
    ]

    operations = [
        migrations.AddField(
            model_name="finding",
            name="digest",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="interval",
            name="digest",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="marker",
            name="digest",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddIndex(
            model_name="observation",
            index=models.Index(
                condition=models.Q(
                    ("kind__in", ["audit", "kubelet_marker", "kubelet_process", "worker"]),
                    ("pod_uid__isnull", True),
                ),
                fields=["cluster", "namespace", "name"],
                name="obs_uidless_by_name",
            ),
        ),
        migrations.AddIndex(
            model_name="observation",
            index=models.Index(
                condition=models.Q(
                    ("kind__in", ["audit", "kubelet_marker", "kubelet_process", "worker"]),
                    ("name", ""),
                    ("pod_uid__isnull", True),
                ),
                fields=["cluster", "observed_at"],
                name="obs_nameless_by_time",
            ),
        ),
    ]
