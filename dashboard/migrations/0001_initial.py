# Issue #36: the read side's own tables, ClusterGrant and ApiToken (written by dashboard/web/access.py, the
# admin and manage.py api_token), move here from the timelines app (timelines 0023 removes them from that
# app's state). Their tables keep their names, timelines_clustergrant and timelines_apitoken, and their
# rows: only Django's state changes. Their content types are relabelled, so permissions granted on them
# (and admin log entries) follow them.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ('clustergrant', 'apitoken')


def relabel(old, new):
    def run(apps, schema_editor):
        ContentType = apps.get_model('contenttypes', 'ContentType')
        types = ContentType.objects.using(schema_editor.connection.alias)
        for model in MOVED:
            if not types.filter(app_label=new, model=model).exists():
                types.filter(app_label=old, model=model).update(app_label=new)

    return run


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('timelines', '0023_models_move_to_their_writers'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ApiToken',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(blank=True, max_length=100)),
                        ('prefix', models.CharField(help_text='The first characters, to tell tokens apart.', max_length=12)),
                        ('key_hash', models.CharField(max_length=64, unique=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('last_used_at', models.DateTimeField(blank=True, null=True)),
                        ('revoked_at', models.DateTimeField(blank=True, null=True)),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'timelines_apitoken',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='ClusterGrant',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('namespace', models.CharField(blank=True, help_text='Blank grants every namespace.', max_length=253)),
                        ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='grants', to='timelines.cluster')),
                        ('group', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='cluster_grants', to='auth.group')),
                    ],
                    options={
                        'db_table': 'timelines_clustergrant',
                        'ordering': ['cluster', 'namespace'],
                        'constraints': [models.UniqueConstraint(fields=('group', 'cluster', 'namespace'), name='grant_unique_per_scope')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(relabel('timelines', 'dashboard'), relabel('dashboard', 'timelines')),
    ]
