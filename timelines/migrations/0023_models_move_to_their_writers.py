# Issue #36: a model lives with the package that writes it. CollectorState moves to the collectors app
# (collectors 0002), ClusterGrant and ApiToken to the dashboard app (dashboard 0001). Only Django's state
# changes here: the tables keep their names (the moved models set db_table) and their rows, and the
# apps that take them over depend on this migration, so neither a fresh database nor an existing one
# ever runs a CREATE or DROP for them.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('timelines', '0022_search_substring_indexes'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='CollectorState'),
                migrations.DeleteModel(name='ClusterGrant'),
                migrations.DeleteModel(name='ApiToken'),
            ],
            database_operations=[],
        ),
    ]
