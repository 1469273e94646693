"""Joins the two lines that grew from 0006: observations partitioned by day (0010) and the search prefix
indexes (0015). They touch different tables; either order is right."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("timelines", "0010_partition_observations"),
        ("timelines", "0015_search_prefix_indexes"),
    ]
    operations: list[migrations.operations.base.Operation] = []
