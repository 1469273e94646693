# Issue #36: CollectorState, written by collectors/kube/state.py only, moves here from the timelines app
# (timelines 0023 removes it from that app's state). Its table keeps its name, timelines_collectorstate,
# and its rows: only Django's state changes. Its content type is relabelled, so permissions granted on it
# (and admin log entries) follow it.

import django.db.models.deletion
from django.db import migrations, models

MOVED = ('collectorstate',)


def relabel(old, new):
    def run(apps, schema_editor):
        ContentType = apps.get_model('contenttypes', 'ContentType')
        types = ContentType.objects.using(schema_editor.connection.alias)
        for model in MOVED:
            if not types.filter(app_label=new, model=model).exists():
                types.filter(app_label=old, model=model).update(app_label=new)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ('collectors', '0001_initial'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('timelines', '0023_models_move_to_their_writers'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='CollectorState',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('resource', models.CharField(max_length=64)),
                        ('resource_version', models.CharField(blank=True, max_length=64)),
                        ('lease_owner', models.CharField(blank=True, max_length=128)),
                        ('lease_expires', models.DateTimeField(blank=True, null=True)),
                        ('last_event_at', models.DateTimeField(blank=True, null=True)),
                        ('last_step_at', models.DateTimeField(blank=True, null=True)),
                        ('last_error', models.TextField(blank=True)),
                        ('last_error_at', models.DateTimeField(blank=True, null=True)),
                        ('events_total', models.BigIntegerField(default=0)),
                        ('events_per_second', models.FloatField(default=0.0, help_text='Over the last step.')),
                        ('errors_total', models.BigIntegerField(default=0)),
                        ('relists_total', models.BigIntegerField(default=0)),
                        ('note', models.CharField(blank=True, help_text='e.g. why a kubelet pull is skipped', max_length=300)),
                        ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='collector_states', to='timelines.cluster')),
                    ],
                    options={
                        'db_table': 'timelines_collectorstate',
                        'ordering': ['cluster', 'resource'],
                        'constraints': [models.UniqueConstraint(fields=('cluster', 'resource'), name='collector_state_per_resource')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(relabel('timelines', 'collectors'), relabel('collectors', 'timelines')),
    ]
