"""An observation's payload is stored compressed in ``body`` (``timelines/payloads.py``, docs/storage.md "Step 1:
the body"), with the zstd dictionaries it is compressed with; ``payload`` (jsonb) keeps the rows stored
before, until ``manage.py compact_observations`` moves them (reads take either).

On PostgreSQL ``body`` is stored ``EXTERNAL``: it is compressed already, so TOAST does not try again (a
partition made later takes the parent's setting, ``partitions._create``).

Backwards (with this image, which knows the body), every body is decoded into ``payload`` again, batch by
batch, before ``payload`` is required and ``body`` dropped.
"""

import orjson
from django.db import migrations, models


def external(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE timelines_observation ALTER COLUMN body SET STORAGE EXTERNAL")


def extended(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE timelines_observation ALTER COLUMN body SET STORAGE EXTENDED")



def bodies_to_payloads(apps, schema_editor):
    from timelines import payloads
    from timelines.compact import Texts

    connection = schema_editor.connection
    cast = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, pod_uid, node, namespace, name, observed_at, body FROM timelines_observation "
                "WHERE payload IS NULL AND body IS NOT NULL ORDER BY id LIMIT 2000"
            )
            found = cursor.fetchall()
            if not found:
                return
            decoded = []
            for oid, uid, node, ns, name, at, body in found:
                if connection.vendor != "postgresql":
                    at = connection.ops.convert_datetimefield_value(at, None, connection)
                payload, _key = payloads.unpack(body, Texts(uid, node, ns, name, at))
                decoded.append((orjson.dumps(payload).decode(), oid))
            cursor.executemany(f"UPDATE timelines_observation SET payload = {cast} WHERE id = %s", decoded)


class Migration(migrations.Migration):
    dependencies = [
        ("timelines", "0023_models_move_to_their_writers"),
    ]

    operations = [
        migrations.CreateModel(
            name="PayloadDictionary",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("cluster_id", models.BigIntegerField()),
                ("kind", models.CharField(max_length=32)),
                ("samples", models.IntegerField(help_text="How many rows' payloads it was trained on.")),
                ("data", models.BinaryField()),
                ("created_at", models.DateTimeField()),
            ],
            options={
                "indexes": [models.Index(fields=["cluster_id", "kind"], name="payload_dictionary_by_kind")],
            },
        ),
        migrations.AddField(
            model_name="observation",
            name="body",
            field=models.BinaryField(blank=True, default=None, null=True),
        ),
        migrations.RunPython(external, extended),
        migrations.AlterField(
            model_name="observation",
            name="payload",
            field=models.JSONField(blank=True, default=None, null=True),
        ),
        migrations.RunPython(migrations.RunPython.noop, bodies_to_payloads),
    ]
