"""Storage. Observations are the append-only source of truth; intervals, markers and findings are derived
from them (``manage.py rederive`` rebuilds them). ``timelines/store.py`` writes both; the other tables' writers
are listed in docs/architecture.md. A table another package writes lives in that package's models
(``collectors.models.CollectorState``, ``dashboard.models.ClusterGrant`` and ``ApiToken``)."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.db import models, router, transaction

from timelines.lifecycle.observation import Kind

# Cluster ids go into channel-group names (ASCII letters, digits, '-', '.'; at most 100 characters).
cluster_name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$",
    "A cluster name is 1-63 ASCII letters, digits, '-' or '.', starting with a letter or digit.",
)


def _lock_for_deletion(clusters: models.QuerySet[Any]) -> None:
    """Lock the rows of ``clusters`` FOR UPDATE (inside the caller's transaction)."""
    list(clusters.select_for_update().values_list("pk", flat=True))


class NotFound(LookupError):
    """What was asked for does not exist; the message says what was looked for."""


class ClusterQuerySet(models.QuerySet["Cluster"]):
    def named(self, name: str) -> Cluster:
        """The cluster called ``name``, or NotFound naming the known ones."""
        cluster = self.filter(name=name).first()
        if cluster is None:
            known = ", ".join(self.values_list("name", flat=True)[:20]) or "none yet"
            raise NotFound(f"no cluster named {name!r} (known: {known})")
        return cluster

    def delete(self) -> tuple[int, dict[str, int]]:
        """Delete under FOR UPDATE of the clusters' rows, taken before anything of theirs is read: on
        PostgreSQL their observations have no foreign key, and a writer storing some holds the cluster's
        row FOR KEY SHARE instead (``timelines/store.py`` ``_LOCK_CLUSTER``), so the deletion waits for it
        and then deletes its rows too, or it waits for the deletion and stores nothing."""
        with transaction.atomic(using=self.db):
            _lock_for_deletion(self.model._base_manager.using(self.db).filter(pk__in=self.values("pk")))
            return super().delete()

    delete.alters_data = True  # type: ignore[attr-defined]
    delete.queryset_only = True  # type: ignore[attr-defined]


class Cluster(models.Model):
    class Origin(models.TextChoices):
        LIVE = "live", "watched live"
        OFFLINE = "offline", "loaded from kubectl output or logs"
        IMPORTED = "imported", "imported incident bundle"

    name = models.CharField(max_length=63, unique=True, validators=[cluster_name_validator])
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.LIVE)
    read_only = models.BooleanField(default=False, help_text="Imported clusters never change.")
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ClusterQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def delete(self, using: str | None = None, keep_parents: bool = False) -> tuple[int, dict[str, int]]:
        """As ``ClusterQuerySet.delete``: the row locked FOR UPDATE first."""
        using = using or router.db_for_write(Cluster, instance=self)
        with transaction.atomic(using=using):
            _lock_for_deletion(Cluster._base_manager.using(using).filter(pk=self.pk))
            return super().delete(using=using, keep_parents=keep_parents)


class Node(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    unschedulable = models.BooleanField(default=False)
    ready = models.BooleanField(null=True)
    created_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="node_unique_per_cluster")]
        ordering = ["cluster", "name"]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.name}"


class Pod(models.Model):
    """One pod incarnation (a UID). Survives deletion in history (``deleted_at``)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="pods")
    uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253, blank=True)
    name = models.CharField(max_length=253, blank=True)
    node = models.CharField(max_length=253, blank=True)
    owner_kind = models.CharField(max_length=63, blank=True)
    owner_name = models.CharField(max_length=253, blank=True)
    owner_uid = models.CharField(max_length=64, blank=True)
    static = models.BooleanField(default=False)
    labels = models.JSONField(default=dict, blank=True)
    phase = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    first_seen = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "uid"], name="pod_unique_uid_per_cluster")]
        indexes = [
            models.Index(fields=["cluster", "namespace", "name"], name="pod_by_ns_name"),
            models.Index(fields=["cluster", "node", "last_seen"], name="pod_by_node"),
            models.Index(fields=["cluster", "owner_uid"], name="pod_by_owner"),
        ]
        ordering = ["cluster", "namespace", "name"]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.uid})"


# Kinds of the UID-less observations the derive stage looks up for a pod (``derivation.UIDLESS_KINDS``, and
# the audited requests about pods), in the order the partial indexes below name them.
UIDLESS_INDEXED = sorted({Kind.AUDIT, Kind.KUBELET_MARKER, Kind.KUBELET_PROCESS, Kind.WORKER})


class Observation(models.Model):
    """Append-only. Unique per cluster by ``dedupe_key``: a re-delivered fact is stored once."""

    id = models.BigAutoField(primary_key=True)
    # On PostgreSQL without a database constraint (migration 0019): the store locks the cluster's row
    # instead, and a cluster is deleted only under FOR UPDATE of it (``ClusterQuerySet.delete``).
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="observations")
    # A pod's UID: as 16 bytes in ``pod_id`` when it is a UUID in canonical text, else its text in
    # ``pod_uid`` (migration 0029; rows stored before hold text). ``observation_rows`` reads either.
    pod_uid = models.CharField(max_length=64, null=True, blank=True)
    kind = models.CharField(max_length=32)
    source = models.CharField(max_length=32)
    observed_at = models.DateTimeField()
    received_at = models.DateTimeField()
    # The dedupe key: since migration 0028 inside ``body``, with its hash here (``partitions.key_hash``); the
    # text column holds it only for rows stored before (``observation_rows.decode`` reads either).
    dedupe_key = models.CharField(max_length=200, null=True, blank=True, default=None)
    key_hash = models.UUIDField(null=True, blank=True, default=None)
    node = models.CharField(max_length=253, blank=True)
    namespace = models.CharField(max_length=253, blank=True)
    name = models.CharField(max_length=253, blank=True)
    # The payload as stored (``timelines/payloads.py``): ``body`` (its JSON compressed, docs/storage.md), or
    # for rows stored before it, ``payload`` (jsonb) until ``manage.py compact_observations`` moves them.
    payload = models.JSONField(null=True, blank=True, default=None)
    body = models.BinaryField(null=True, blank=True, default=None)
    pod_id = models.UUIDField(null=True, blank=True, default=None)

    class Meta:
        constraints = [
            # SQLite; on PostgreSQL each partition's unique index of ``partitions.KEY_HASH`` (migration 0028).
            models.UniqueConstraint(fields=["cluster", "key_hash"], name="observation_key_per_cluster")
        ]
        indexes = [
            # By pod without the time: a pod's entries fold into one key and a posting list (btree
            # deduplication), a fifth of the size; a read by pod sorts the pod's rows (migration 0025).
            # Since migration 0029, two partial ones: by the UID's text, and by its 16 bytes.
            models.Index(
                fields=["cluster", "pod_uid"],
                name="obs_by_pod_text",
                condition=models.Q(pod_uid__isnull=False),
            ),
            models.Index(
                fields=["cluster", "pod_id"], name="obs_by_pod_id", condition=models.Q(pod_id__isnull=False)
            ),
            # By kind without the time (migration 0027): a read of a kind within a time span adds the BRIN on
            # observed_at (a bitmap AND); one in time order sorts what it reads.
            models.Index(fields=["cluster", "kind"], name="obs_by_kind"),
            # The derive stage's reads of UID-less lines a pod may own (``derivation.pod_observations``): by
            # the name they give, and node-level ones by time. Partial, so only those rows are indexed: an
            # index on all of a cluster's rows made each read scan every kubelet line of the cluster.
            # (Since migration 0029 a line naming a pod by UID may hold NULL in ``pod_uid``: its ``pod_id``.)
            models.Index(
                fields=["cluster", "namespace", "name"],
                name="obs_no_uid_by_name",
                condition=models.Q(pod_uid__isnull=True, pod_id__isnull=True, kind__in=UIDLESS_INDEXED),
            ),
            models.Index(
                fields=["cluster", "observed_at"],
                name="obs_no_uid_by_time",
                condition=models.Q(
                    pod_uid__isnull=True, pod_id__isnull=True, name="", kind__in=UIDLESS_INDEXED
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.dedupe_key or self.key_hash}"

    @property
    def stored_pod_uid(self) -> str | None:
        """The pod UID as given: the text, or the canonical text of ``pod_id`` (migration 0029)."""
        if self.pod_uid is None and self.pod_id is not None:
            return str(self.pod_id)
        return self.pod_uid


class PayloadDictionary(models.Model):
    """A zstd dictionary the payloads of one cluster's kind are compressed with (``timelines/payloads.py``).
    Never changed nor deleted, not even with its cluster (no foreign key): a row that names it stays
    readable, and it is 16 KiB."""

    id = models.BigAutoField(primary_key=True)
    cluster_id = models.BigIntegerField()
    kind = models.CharField(max_length=32)
    samples = models.IntegerField(help_text="How many rows' payloads it was trained on.")
    data = models.BinaryField()
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["cluster_id", "kind"], name="payload_dictionary_by_kind")]

    def __str__(self) -> str:
        return f"dictionary {self.id} of cluster {self.cluster_id}'s {self.kind} rows"


class _Derived(models.Model):
    """Common columns of what the lifecycle core derives for one pod (replaced together, per pod)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    pod_uid = models.CharField(max_length=64, null=True, blank=True)
    node = models.CharField(max_length=253, blank=True)
    namespace = models.CharField(max_length=253, blank=True)
    attrs = models.JSONField(default=dict, blank=True)
    evidence = models.JSONField(default=list, blank=True, help_text="Observation ids behind this row.")
    # A 64-bit hash of the row's other columns (``store.row_digest``): a pod's re-derivation deletes and
    # inserts only the rows whose digest changed. Null (rows written before it existed, node and PDB
    # lanes) never matches, so such a row is rewritten the next time its pod is derived.
    digest = models.BigIntegerField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True


class Interval(_Derived):
    class Source(models.TextChoices):
        OBSERVED = "observed", "observed from the kubelet or the API"
        KUBELET = "kubelet", "inferred from kubelet lines"
        INFERRED = "inferred", "inferred from the API"

    lane = models.CharField(max_length=300)
    state = models.CharField(max_length=64)
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True, help_text="Null while the interval is still open.")
    source = models.CharField(max_length=16, choices=Source.choices)

    class Meta:
        indexes = [
            models.Index(fields=["cluster", "pod_uid", "lane", "start"], name="interval_by_pod"),
            models.Index(fields=["cluster", "node", "start"], name="interval_by_node_time"),
            models.Index(fields=["cluster", "namespace", "start"], name="interval_by_ns_time"),
        ]
        ordering = ["start"]


class Marker(_Derived):
    at = models.DateTimeField()
    kind = models.CharField(max_length=32)
    reason = models.CharField(max_length=128)
    message = models.TextField(blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["cluster", "pod_uid", "at"], name="marker_by_pod"),
            models.Index(fields=["cluster", "node", "at"], name="marker_by_node_time"),
        ]
        ordering = ["at"]


class Finding(_Derived):
    class Severity(models.TextChoices):
        INFO = "info"
        WARNING = "warning"
        CRITICAL = "critical"

    subject = models.CharField(max_length=16, default="pod", help_text="pod, pdb or node")
    subject_name = models.CharField(max_length=300, blank=True)
    kind = models.CharField(max_length=64)
    severity = models.CharField(max_length=16, choices=Severity.choices)
    message = models.TextField()
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["cluster", "pod_uid"], name="finding_by_pod"),
            models.Index(fields=["cluster", "kind", "start"], name="finding_by_kind_time"),
            models.Index(fields=["cluster", "namespace", "start"], name="finding_by_ns_time"),
        ]
        ordering = ["-start"]


class PodDisruptionBudget(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="pdbs")
    uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    selector = models.JSONField(default=dict, blank=True)
    min_available = models.CharField(max_length=32, blank=True)
    max_unavailable = models.CharField(max_length=32, blank=True)
    unhealthy_pod_eviction_policy = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "uid"], name="pdb_unique_uid_per_cluster")]
        indexes = [models.Index(fields=["cluster", "namespace", "name"], name="pdb_by_ns_name")]
        verbose_name = "PodDisruptionBudget"


class PDBStatusSample(models.Model):
    """A PDB's status when it changed."""

    pdb = models.ForeignKey(PodDisruptionBudget, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    disruptions_allowed = models.IntegerField()
    current_healthy = models.IntegerField()
    desired_healthy = models.IntegerField()
    expected_pods = models.IntegerField()
    observed_generation = models.BigIntegerField(null=True, blank=True)
    reason = models.CharField(max_length=64, blank=True, help_text="DisruptionAllowed condition reason.")
    disrupted_pods = models.JSONField(default=dict, blank=True)
    conditions = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [models.Index(fields=["pdb", "at"], name="pdb_sample_by_time")]
        ordering = ["at"]


class Workload(models.Model):
    class Kind(models.TextChoices):
        DEPLOYMENT = "Deployment"
        STATEFULSET = "StatefulSet"
        DAEMONSET = "DaemonSet"
        REPLICASET = "ReplicaSet"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="workloads")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    owner_kind = models.CharField(max_length=63, blank=True)
    owner_name = models.CharField(max_length=253, blank=True)
    owner_uid = models.CharField(max_length=64, blank=True)
    selector = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="workload_unique_uid_per_cluster")
        ]
        indexes = [models.Index(fields=["cluster", "namespace", "kind", "name"], name="workload_by_ns_kind")]


class WorkloadStatusSample(models.Model):
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    replicas = models.IntegerField(null=True, blank=True, help_text="Desired (spec) replicas.")
    current = models.IntegerField(null=True, blank=True)
    ready = models.IntegerField(null=True, blank=True)
    updated = models.IntegerField(null=True, blank=True)
    available = models.IntegerField(null=True, blank=True)
    status = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [models.Index(fields=["workload", "at"], name="workload_sample_by_time")]
        ordering = ["at"]


# --- the derive stage's work (timelines/dirty.py) ---------------------------------------------------------


class DirtyBatch(models.Model):
    """What one store transaction changed: the keys its new observations make dirty.

    Appended by ``store.save_observations`` in the same transaction as the observations (one row per
    batch, so a batch of 500 rows costs the store one small insert), and by the derive stage for the
    follow-up work a derivation finds (a pod's PDBs, a name's pods). The derive stage folds these rows
    into ``DirtyKey`` rows and deletes them; nothing else reads them.
    """

    id = models.BigAutoField(primary_key=True)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    keys = models.JSONField(help_text="[[kind, key, first observed, last observed], ...]")
    created_at = models.DateTimeField()


class DirtyKey(models.Model):
    """One thing to derive again (a pod, a node, a namespace's PDBs, a workload, ...), claimed by at most one
    derive worker at a time.

    ``generation`` grows when the key is marked again while claimed: the claimer deletes the row only when
    the generation is still the one it claimed, so a mark that arrived during a derivation is never lost.
    A claim ends at ``claimed_until``: a crashed worker's keys are claimed again after that.
    """

    id = models.BigAutoField(primary_key=True)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16)
    key = models.CharField(max_length=520)
    t_min = models.DateTimeField(null=True, blank=True, help_text="For time-ranged keys (a node's pods).")
    t_max = models.DateTimeField(null=True, blank=True)
    generation = models.IntegerField(default=0)
    marked_at = models.DateTimeField()
    claimed_by = models.CharField(max_length=64, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    claimed_generation = models.IntegerField(default=0)
    # A derivation of this key failed ``failures`` times in a row (``timelines/derivation.py``): it is
    # claimed again, alone, no sooner than ``retry_at``; after PODLIFE_DERIVE_MAX_FAILURES it moves to
    # ``QuarantinedKey``.
    failures = models.IntegerField(default=0, db_default=0)  # db_default: ``dirty.mark``'s raw INSERT
    retry_at = models.DateTimeField(null=True, blank=True)
    first_failed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="", db_default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "kind", "key"], name="dirty_key_unique_per_cluster")
        ]


class QuarantinedKey(models.Model):
    """A dirty key whose derivation kept failing, set aside so that the rest of the derive stage goes on.

    Moved here from ``DirtyKey`` after PODLIFE_DERIVE_MAX_FAILURES failed attempts (or at once, when the
    key itself cannot be stored: longer than its column, a NUL). While quarantined (``released_at`` is
    null) new marks of the key are not derived; ``manage.py derive --retry`` puts it back as a dirty key
    (after a fix) and sets ``released_at``. A row stays as history: ``moves`` counts how many times the
    key was quarantined (the ``/metrics`` counter sums it).
    """

    id = models.BigAutoField(primary_key=True)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16)
    key = models.CharField(max_length=520)
    t_min = models.DateTimeField(null=True, blank=True)
    t_max = models.DateTimeField(null=True, blank=True)
    error = models.TextField()
    failures = models.IntegerField(default=0)
    first_failed_at = models.DateTimeField()
    last_failed_at = models.DateTimeField()
    quarantined_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)
    moves = models.IntegerField(default=1)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "kind", "key"], name="quarantined_key_unique_per_cluster"
            )
        ]
        ordering = ["cluster", "kind", "key"]
