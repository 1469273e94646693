"""Storage benchmark (issue #37): bytes on disk per observation over the demo cluster's ``scale`` churn,
against what a general compressor that sees everything makes of the same observations, and the store rate
against raw COPY in the same run. PostgreSQL only (the disk a fleet pays for).

    DATABASE_URL=postgres://... python bench/storage.py [--observations 100000] [--nodes 100]
        [--pods-per-node 100] [--churn 200] [--backlog 10] [--compact [--every 16]]

1. The collector lists nodes, pods and events of the ``scale`` scenario (a demo cluster in a subprocess,
   through the real kubernetes client over loopback HTTP). Then, until ``--observations`` are stored, the
   cluster replaces ``--churn`` pods a second for ``--backlog`` seconds while nobody watches, stands still,
   and watch steps replay that backlog. The cluster then stands still.
2. On disk: ``pg_total_relation_size`` (heap + TOAST + every index) of every partition of
   ``timelines_observation`` after a ``VACUUM ANALYZE``, divided by the observations they hold (the scratch
   database holds this run's only), and each index's share (summed over the partitions by what it indexes). Per kind: that kind's rows copied into a table made ``LIKE`` the
   partition ``INCLUDING ALL`` (the same indexes), vacuumed and measured alone. Then every partition is
   closed as beat closes a day that has ended (``partitions.close_partition``: its indexes rebuilt with
   full pages) and measured again; the goal is checked on a 30-day month, 29 days closed and the one
   being written.
3. The same observations as JSON lines (every stored column but the two local ids, in id order) compressed
   as one stream by ``zstd -19 --long`` (all cores), per kind and in total: the practical limit of a general
   compressor. The ratio on disk / zstd says how far the table is from it.
4. The store rate: the collector's observations a second while it was busy (the lists and the replays,
   each watch step's idle tail excluded), against a raw binary COPY of the same rows into a scratch table like the partition, in
   batches of the collector's size (median of three), as bench/watch.py measures it. Ratio goal >= 0.5.

5. With ``--compact``: the same observations encoded by ``timelines/compact.py`` (the design of
   docs/storage.md, not wired into the store) into scratch tables of the proposed schema, once per index
   layout of ``LAYOUTS``, each vacuumed and measured as in 2 (in total and per kind), with the cluster's
   name table and zstd dictionaries counted apart. Every encoded row is decoded again (its chain followed)
   and checked equal, canonical JSON, to the row PostgreSQL returned.

Goal (issue #37): <= 300 bytes on disk per observation, all indexes included.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import IO, Any

import orjson
from _collector import checkpoint, copy_baselines, sim_hook, start_sim
from _setup import derive_stage_elsewhere, setup_django

os.environ.setdefault("DEBUG", "0")
setup_django(scratch_database=True)

from django.db import connection  # noqa: E402

from collectors.kube import config  # noqa: E402
from collectors.kube.config import ClusterSource, Tunables  # noqa: E402
from collectors.kube.watch import StepControl, run_step  # noqa: E402
from podlife_site import tuning  # noqa: E402
from timelines import compact, observation_rows, partitions  # noqa: E402
from timelines.models import Cluster  # noqa: E402
from timelines.models import Observation as ObservationRow  # noqa: E402

tuning.start(tuning.Role.COLLECTOR)  # as the collector processes it stands for start (podlife_site/tuning.py)

GOAL_BYTES = 300
RESOURCES = ("nodes", "pods", "events")
# Every stored column but ``id`` and ``cluster_id`` (local to one database), as the rows hold them.
JSON_COLUMNS = (
    "kind", "source", "observed_at", "received_at", "dedupe_key", "pod_uid", "node", "namespace", "name",
    "payload",
)  # fmt: skip


def collect(cluster: str, control: StepControl, target: int, backlog: float) -> tuple[int, float]:
    """List, then rounds of churn until ``target`` observations are stored: the cluster churns ``backlog``
    seconds while nobody watches, stands still, and watch steps replay that backlog as fast as the collector
    takes it (as bench/watch.py does). Returns (observations stored, seconds the collector was busy: the
    lists and the replays, the idle tail of each watch step excluded)."""
    busy = 0.0
    for resource in RESOURCES:
        started = time.perf_counter()
        result = run_step(cluster, resource, control=control)
        assert result.ok, result.error
        busy += time.perf_counter() - started
    stored = stored_count(cluster)
    while stored < target:
        sim_hook(cluster, "resume")
        time.sleep(backlog)  # churn builds a history nobody has read yet
        sim_hook(cluster, "pause")
        for resource in RESOURCES:
            while True:  # watch steps until one finds nothing left of the backlog
                result = run_step(cluster, resource, control=control)
                assert result.ok, result.error
                busy += result.busy_seconds
                if result.events == 0:
                    break
        stored = stored_count(cluster)
        print(f"  {stored:,} observations stored", flush=True)
    return stored, busy


def stored_count(cluster: str) -> int:
    return ObservationRow.objects.filter(cluster__name=cluster).count()  # as bench/watch.py counts them


@dataclasses.dataclass
class Disk:
    heap: int = 0
    toast: int = 0  # TOAST and the free-space and visibility maps
    indexes: int = 0

    @property
    def total(self) -> int:
        return self.heap + self.toast + self.indexes

    def add(self, table: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_relation_size(%s), pg_table_size(%s), pg_indexes_size(%s)", [table, table, table]
            )
            heap, table_size, indexes = cursor.fetchone()
        self.heap += heap
        self.toast += table_size - heap
        self.indexes += indexes


def observation_tables() -> list[str]:
    """Every table that holds observations: the partitions, or the one table where it is not partitioned."""
    if not partitions.is_partitioned():
        return ["timelines_observation"]
    return [p.name for p in partitions.partitions()]


def vacuum(tables: list[str]) -> None:
    """VACUUM ANALYZE (outside a transaction): the maps exist and the sizes stop moving."""
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")


def disk_total(tables: list[str]) -> Disk:
    disk = Disk()
    for table in tables:
        disk.add(table)
    return disk


def index_sizes(tables: list[str]) -> dict[str, int]:
    """Bytes of each index of ``tables``, summed over the partitions by what it indexes (its definition
    from ``USING`` on, the partition's name left out): where the indexes' share goes."""
    sizes: dict[str, int] = defaultdict(int)
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(
                "SELECT pg_get_indexdef(indexrelid), pg_relation_size(indexrelid) FROM pg_index "
                "WHERE indrelid = to_regclass(%s)",
                [table],
            )
            for definition, size in cursor.fetchall():
                sizes[definition[definition.index(" USING ") + 7 :]] += size
    return dict(sizes)


def fullest(tables: list[str]) -> str:
    """The table holding most rows: the partition of today (others are made ahead, empty)."""
    counts = []
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT count(*) FROM {table}")
            counts.append((int(cursor.fetchone()[0]), table))
    return max(counts)[1]


def disk_of_kind(cluster_id: int, kind: str, like: str) -> Disk:
    """The rows of one kind alone in a table made like the partition (same columns and indexes)."""
    table = "bench_storage_kind"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
        cursor.execute(f"CREATE TABLE {table} (LIKE {like} INCLUDING ALL)")
        columns = partitions.column_list(cursor)  # the partition's may lie in another order
        cursor.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM timelines_observation "
            "WHERE cluster_id = %s AND kind = %s ORDER BY id",
            [cluster_id, kind],
        )
    vacuum([table])
    disk = disk_total([table])
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {table}")
    return disk


def write_json_lines(
    rows: list[tuple[int, compact.Row]], folder: Path
) -> tuple[dict[str, Path], Counter[str]]:
    """The observations (``stored_rows``) as JSON lines, one file per kind and one of all, in id order."""
    files: dict[str, IO[bytes]] = {}
    counts: Counter[str] = Counter()
    every = (folder / "all.jsonl").open("wb")
    for _oid, row in rows:
        line = orjson.dumps({column: getattr(row, column) for column in JSON_COLUMNS}) + b"\n"
        if row.kind not in files:
            files[row.kind] = (folder / f"{row.kind}.jsonl").open("wb")
        files[row.kind].write(line)
        every.write(line)
        counts[row.kind] += 1
    paths = {kind: Path(f.name) for kind, f in files.items()}
    for f in [*files.values(), every]:
        f.close()
    paths["all"] = Path(every.name)
    return paths, counts


def zstd_bytes(path: Path) -> int:
    """Bytes of ``path`` compressed by ``zstd -19 --long`` (all cores)."""
    done = subprocess.run(
        ["zstd", "-19", "--long=27", "-T0", "-q", "-c", str(path)], capture_output=True, check=True
    )
    return len(done.stdout)


# -- the compact form (timelines/compact.py, docs/storage.md), measured without being wired ----------------
COMPACT_TABLE = "bench_storage_compact"
# Columns widest-aligned first: no padding between them (8-byte, then the 16-byte uuids, 4, 2, the body).
COMPACT_COLUMNS = (
    "id bigint NOT NULL, observed_at timestamptz NOT NULL, received_at timestamptz NOT NULL, "
    "key_hash {key_type} NOT NULL, pod_uid uuid, cluster_id integer NOT NULL, node integer NOT NULL, "
    "namespace integer NOT NULL, name integer NOT NULL, kind smallint NOT NULL, source smallint NOT NULL, "
    "body bytea NOT NULL"
)
# The same with node, namespace and name as their texts (no name table): after the smallints, as varlena
# columns are aligned by the byte when short.
COMPACT_COLUMNS_TEXT_NAMES = (
    "id bigint NOT NULL, observed_at timestamptz NOT NULL, received_at timestamptz NOT NULL, "
    "key_hash {key_type} NOT NULL, pod_uid uuid, cluster_id integer NOT NULL, kind smallint NOT NULL, "
    "source smallint NOT NULL, node varchar(253) NOT NULL, namespace varchar(253) NOT NULL, "
    "name varchar(253) NOT NULL, body bytea NOT NULL"
)
_UIDLESS = ", ".join(
    str(compact.KINDS.index(k)) for k in ("audit", "kubelet_marker", "kubelet_process", "worker")
)
_PARTIALS = (
    f"(cluster_id, namespace, name) WHERE pod_uid IS NULL AND kind IN ({_UIDLESS})",
    f"(cluster_id, observed_at) WHERE pod_uid IS NULL AND name = 0 AND kind IN ({_UIDLESS})",
)
_PARTIALS_TEXT_NAMES = (_PARTIALS[0], _PARTIALS[1].replace("name = 0", "name = ''"))
# The lean layout's indexes but the two partial ones (below).
_LEAN = (
    "USING brin (id) WITH (pages_per_range = 16)",
    "UNIQUE (key_hash)",
    "(cluster_id, pod_uid)",
    "(cluster_id, kind)",
    "USING brin (observed_at)",
)
# name -> (key column type, indexes): what each layout keeps of the reads' indexes (docs/storage.md).
LAYOUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    # Today's indexes, over the compact columns (the key hash as bytea(16), as first proposed).
    "today's indexes": (
        "bytea",
        (
            "(id)",
            "UNIQUE (cluster_id, key_hash)",
            "(cluster_id, pod_uid, observed_at)",
            "(cluster_id, kind, observed_at)",
            "USING brin (observed_at)",
            *_PARTIALS,
        ),
    ),
    # The key hash as uuid (16 bytes, no length byte); by pod and by kind without the time (btree
    # deduplication folds a pod's or a kind's entries into posting lists of 6 bytes a row): the reads
    # by pod take all of a pod's rows and sort them, the time bounds of reads by kind go to the BRIN.
    "slim": (
        "uuid",
        (
            "(id)",
            "UNIQUE (cluster_id, key_hash)",
            "(cluster_id, pod_uid)",
            "(cluster_id, kind)",
            "USING brin (observed_at)",
            *_PARTIALS,
        ),
    ),
    # As slim, and ids found through a BRIN: rows go in in id order, so a range of 16 pages holds an
    # interval of ids and an evidence link reads at most 16 pages (128 KiB) instead of a btree entry a row.
    # The key hash salted with the cluster (``compact.key_hash(key, cluster)``) is unique alone.
    "lean": ("uuid", (*_LEAN, *_PARTIALS)),
    # As lean, with the names as text in each row instead of ids into the cluster's name table.
    "lean, names as text": ("uuid", (*_LEAN, *_PARTIALS_TEXT_NAMES)),
}
TEXT_NAMES = {"lean, names as text"}  # layouts whose rows name their node, namespace and pod as text
COPY_BATCH = 1000
DICTIONARY_TRAINING_ROWS = 2000  # a kind's dictionary is trained on its first rows (the store would, too)
DICTIONARY_BYTES = 16384


def stored_rows(cluster_id: int) -> list[tuple[int, compact.Row]]:
    """(id, row) of the cluster's observations in id order, read back as every reader reads them."""
    selected = observation_rows.selection(cluster_id).order_by("id")
    return [
        (r.id, compact.Row(r.kind, r.source, r.observed_at, r.received_at, r.dedupe_key, r.pod_uid, r.node,
                           r.namespace, r.name, r.payload))
        for r in observation_rows.iter_rows(selected, chunk_size=5000)
    ]  # fmt: skip


def train_dictionaries(
    rows: list[tuple[int, compact.Row]], every: int
) -> tuple[compact.Dictionaries, dict[str, int]]:
    """A dictionary per kind from the plain data (patches where a chain allows) of its first rows."""
    probe = compact.Encoder(compact.NameTable(), compact.Dictionaries(), every=every)
    samples: dict[str, list[bytes]] = defaultdict(list)
    for oid, row in rows:
        if len(samples[row.kind]) >= DICTIONARY_TRAINING_ROWS:
            continue
        chain = compact.chain_key(row)
        prior = probe.last.get(chain) if chain is not None else None
        base = prior.payload if prior is not None and prior.depth < every - 1 else None
        samples[row.kind].append(compact.plain(row, base, delta=base is not None)[0])
        probe.encode(oid, row)
    dictionaries, by_kind = compact.Dictionaries(), {}
    for n, (kind, data) in enumerate(sorted(samples.items()), 1):
        if len(data) >= 100:  # fewer rows train no useful dictionary; they go without
            dictionaries.add(n, compact.train(data, DICTIONARY_BYTES))
            by_kind[kind] = n
    return dictionaries, by_kind


def _span(at: Any) -> Any:
    return partitions.span_start(at, partitions.configured_span())


def encode_all(
    rows: list[tuple[int, compact.Row]], every: int
) -> tuple[dict[int, compact.Compact], compact.NameTable, compact.Dictionaries, dict[str, int], float]:
    dictionaries, by_kind = train_dictionaries(rows, every)
    names = compact.NameTable()
    encoder = compact.Encoder(names, dictionaries, every=every, kind_dictionary=by_kind)
    started = time.perf_counter()
    encoded = {oid: encoder.encode(oid, row, _span(row.observed_at)) for oid, row in rows}
    return encoded, names, dictionaries, by_kind, time.perf_counter() - started


def check_exact(
    rows: list[tuple[int, compact.Row]],
    encoded: dict[int, compact.Compact],
    names: compact.NameTable,
    dictionaries: compact.Dictionaries,
) -> float:
    """Decode every row in id order (a base is decoded before the rows on it) and compare it, canonical
    JSON, with the row PostgreSQL returned. Returns the seconds decoding took."""
    payloads: dict[int, Any] = {}
    elapsed = 0.0
    for oid, row in rows:
        started = time.perf_counter()
        item = encoded[oid]
        distance = compact.base_distance(item)
        back = compact.decode(item, names, dictionaries, payloads[oid - distance] if distance else None)
        elapsed += time.perf_counter() - started
        payloads[oid] = back.payload
        if compact.chain_key(row) is None:
            payloads.pop(oid)
        if _canonical(back) != _canonical(row):
            raise SystemExit(f"compact form of observation {oid} reads back different:\n{back}\n{row}")
    return elapsed


def _canonical(row: compact.Row) -> bytes:
    return orjson.dumps(dataclasses.asdict(row), option=orjson.OPT_SORT_KEYS)


def copy_compact(
    table: str,
    cluster_id: int,
    encoded: dict[int, compact.Compact],
    ids: list[int],
    *,
    key_uuid: bool,
    names: compact.NameTable | None = None,
) -> None:
    """COPY the compact rows ``ids`` into ``table`` (the key hash as uuid when ``key_uuid``; with ``names``,
    the node, namespace and name as their texts)."""
    columns = "id, observed_at, received_at, key_hash, pod_uid, cluster_id, node, namespace, name, kind, source, body"
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for oid in ids:
            c = encoded[oid]
            key: bytes | uuid.UUID = uuid.UUID(bytes=c.key_hash) if key_uuid else c.key_hash
            uid = uuid.UUID(bytes=c.pod_uid) if c.pod_uid is not None else None
            named: tuple[Any, ...] = (c.node, c.namespace, c.name)
            if names is not None:
                named = tuple(names.text(ref) for ref in named)
            copy.write_row(
                (oid, c.observed_at, c.received_at, key, uid, cluster_id, *named, c.kind, c.source, c.body)
            )


def compact_disk(
    layout: str,
    cluster_id: int,
    encoded: dict[int, compact.Compact],
    ids: list[int],
    names: compact.NameTable,
) -> tuple[Disk, list[int]]:
    """``ids``' compact rows alone in a table of ``layout``, vacuumed: its size, and each index's."""
    key_type, indexes = LAYOUTS[layout]
    text_names = layout in TEXT_NAMES
    columns = COMPACT_COLUMNS_TEXT_NAMES if text_names else COMPACT_COLUMNS
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {COMPACT_TABLE}")
        cursor.execute(f"CREATE TABLE {COMPACT_TABLE} ({columns.format(key_type=key_type)})")
    with connection.cursor() as cursor:
        for n, index in enumerate(indexes):
            unique = index.startswith("UNIQUE ")
            spec = index.removeprefix("UNIQUE ")
            cursor.execute(
                f"CREATE {'UNIQUE ' if unique else ''}INDEX {COMPACT_TABLE}_{n} ON {COMPACT_TABLE} {spec}"
            )
    # Indexed as rows arrive, in the collector's batches (a btree built at once packs tighter than one
    # that grows by page splits, as a partition's do).
    for at in range(0, len(ids), COPY_BATCH):
        copy_compact(
            COMPACT_TABLE,
            cluster_id,
            encoded,
            ids[at : at + COPY_BATCH],
            key_uuid=key_type == "uuid",
            names=names if text_names else None,
        )
    vacuum([COMPACT_TABLE])
    disk = disk_total([COMPACT_TABLE])
    sizes = []
    with connection.cursor() as cursor:
        for n in range(len(indexes)):
            cursor.execute("SELECT pg_relation_size(%s)", [f"{COMPACT_TABLE}_{n}"])
            sizes.append(int(cursor.fetchone()[0]))
        cursor.execute(f"DROP TABLE {COMPACT_TABLE}")
    return disk, sizes


def side_tables(
    names: compact.NameTable, dictionaries: compact.Dictionaries, by_kind: dict[str, int]
) -> tuple[int, int]:
    """Bytes on disk of the cluster's name table and of its dictionaries, as tables with their indexes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE bench_storage_names (cluster_id integer, id integer, text varchar(253), "
            "PRIMARY KEY (cluster_id, id), UNIQUE (cluster_id, text))"
        )
        with cursor.cursor.copy("COPY bench_storage_names FROM STDIN") as copy:
            for ref in range(1, len(names.added) + 1):
                copy.write_row((1, ref, names.text(ref)))
        cursor.execute(
            "CREATE TABLE bench_storage_dictionaries (id integer PRIMARY KEY, cluster_id integer, "
            "kind smallint, data bytea)"
        )
        cursor.executemany(
            "INSERT INTO bench_storage_dictionaries VALUES (%s, 1, %s, %s)",
            [(n, compact.KINDS.index(kind), dictionaries.raw(n)) for kind, n in by_kind.items()],
        )
    tables = ["bench_storage_names", "bench_storage_dictionaries"]
    vacuum(tables)
    sizes = (disk_total(tables[:1]).total, disk_total(tables[1:]).total)
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"DROP TABLE {table}")
    return sizes


def report_compact(
    cluster_id: int,
    rows: list[tuple[int, compact.Row]],
    counts: Counter[str],
    today: dict[str, Disk],
    every: int,
) -> None:
    encoded, names, dictionaries, by_kind, encoding = encode_all(rows, every)
    decoding = check_exact(rows, encoded, names, dictionaries)
    n = len(rows)
    print(
        f"\ncompact form (timelines/compact.py, a whole payload every {every} rows of an object): "
        f"{n:,} rows decoded back exact (canonical JSON); encode {encoding / n * 1e6:,.0f} µs, "
        f"decode {decoding / n * 1e6:,.0f} µs an observation"
    )
    by_kind_ids: dict[str, list[int]] = defaultdict(list)
    for oid, row in rows:
        by_kind_ids[row.kind].append(oid)
    body = Counter[str]()
    for oid, row in rows:
        body[row.kind] += len(encoded[oid].body)
    name_bytes, dictionary_bytes = side_tables(names, dictionaries, by_kind)
    named = len(names.added)
    print(
        f"name table: {named:,} names, {name_bytes / 1024:,.0f} KiB ({name_bytes / max(1, named):,.0f} B a name, "
        f"{name_bytes / n:,.1f} B/obs: pods' names are new with each pod); {len(by_kind)} dictionaries "
        f"of {DICTIONARY_BYTES // 1024} KiB: {dictionary_bytes / 1024:,.0f} KiB (per cluster and kind, not per row)"
    )
    for layout, (_key, indexes) in LAYOUTS.items():
        print(f"\nlayout {layout!r}:")
        print(f"{'kind':<16}{'rows':>9}{'body B':>9}{'heap':>7}{'index':>7}{'total B/obs':>13}{'today':>8}")
        for kind in sorted(counts, key=lambda k: -counts[k]):
            alone, _sizes = compact_disk(layout, cluster_id, encoded, by_kind_ids[kind], names)
            k = len(by_kind_ids[kind])
            print(
                f"{kind:<16}{k:>9,}{body[kind] / k:>9,.1f}{(alone.heap + alone.toast) / k:>7,.0f}"
                f"{alone.indexes / k:>7,.0f}{alone.total / k:>13,.0f}{today[kind].total / k:>8,.0f}"
            )
        disk, sizes = compact_disk(layout, cluster_id, encoded, [oid for oid, _ in rows], names)
        with_names = (disk.total + (0 if layout in TEXT_NAMES else name_bytes)) / n
        verdict = "met" if with_names <= GOAL_BYTES else "MISSED"
        print(
            f"{'all':<16}{n:>9,}{sum(body.values()) / n:>9,.1f}{(disk.heap + disk.toast) / n:>7,.0f}"
            f"{disk.indexes / n:>7,.0f}{disk.total / n:>13,.0f}{today['all'].total / n:>8,.0f}"
        )
        for index, size in zip(indexes, sizes, strict=True):
            print(f"  index {size / n:6,.1f} B/obs  {index}")
        side = "no name table" if layout in TEXT_NAMES else "with the name table"
        print(f"  {side}: {with_names:,.0f} B/obs (goal <= {GOAL_BYTES}: {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--observations", type=int, default=100_000, help="stop once this many are stored")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods-per-node", type=int, default=100)
    parser.add_argument("--churn", type=float, default=200.0, help="pods replaced per second")
    parser.add_argument("--backlog", type=float, default=10.0, help="seconds of churn between two replays")
    parser.add_argument(
        "--compact", action="store_true", help="also measure the compact form (timelines/compact.py)"
    )
    parser.add_argument(
        "--every", type=int, default=16, help="--compact: a whole payload every this many rows"
    )
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        raise SystemExit("bench/storage.py measures PostgreSQL's disk: set DATABASE_URL to a postgres:// URL")
    if shutil.which("zstd") is None:
        raise SystemExit("bench/storage.py compares with the zstd command line tool: install zstd")
    tunables = dataclasses.replace(Tunables.from_settings(), watch_timeout_s=3)
    tmp = Path(tempfile.mkdtemp(prefix="podlife-bench-storage-"))
    kubeconfig = tmp / "kubeconfig"
    sim = start_sim(args.nodes, args.pods_per_node, args.churn, kubeconfig)
    name = f"bench-{uuid.uuid4().hex[:8]}"
    config.register_cluster(ClusterSource(name, str(kubeconfig), "podlife-demo", False, False, False))
    print(f"database: {connection.vendor}; {derive_stage_elsewhere()}")
    try:
        control = StepControl(tunables=tunables)
        stored, busy = collect(name, control, args.observations, args.backlog)  # the cluster ends paused
        checkpoint()
        ((baseline, _),) = copy_baselines(name, tunables.batch_size)
        cluster_id = Cluster.objects.get(name=name).pk
        tables = observation_tables()
        vacuum(tables)
        total = disk_total(tables)
        rows = stored_rows(cluster_id)
        json_files, counts = write_json_lines(rows, tmp)
        like = fullest(tables)
        print(f"\n{stored:,} observations of the scale churn ({args.nodes} nodes × {args.pods_per_node} pods, "
              f"{args.churn:g} pods replaced a second)\n")  # fmt: skip
        print(
            f"{'kind':<16}{'rows':>9}{'disk B/obs':>12}{'JSON B/obs':>12}{'zstd B/obs':>12}{'disk/zstd':>11}"
        )
        today: dict[str, Disk] = {"all": total}
        for kind in sorted(counts, key=lambda k: -counts[k]):
            n = counts[kind]
            alone = today[kind] = disk_of_kind(cluster_id, kind, like)
            raw, packed = json_files[kind].stat().st_size, zstd_bytes(json_files[kind])
            print(
                f"{kind:<16}{n:>9,}{alone.total / n:>12,.0f}{raw / n:>12,.0f}{packed / n:>12,.1f}"
                f"{alone.total / max(1, packed):>10,.1f}×"
            )
        n = sum(counts.values())
        raw, packed = json_files["all"].stat().st_size, zstd_bytes(json_files["all"])
        print(
            f"{'all':<16}{n:>9,}{total.total / n:>12,.0f}{raw / n:>12,.0f}{packed / n:>12,.1f}"
            f"{total.total / max(1, packed):>10,.1f}×"
        )
        print(
            f"\non disk, all partitions: {total.total / 2**20:,.1f} MiB = heap {total.heap / n:,.0f} + TOAST and "
            f"maps {total.toast / n:,.0f} + indexes {total.indexes / n:,.0f} bytes an observation"
        )
        for what, size in sorted(index_sizes(tables).items(), key=lambda item: -item[1]):
            print(f"  index {size / n:6.1f} B/obs  {what[:100]}")
        ours, raw_rate = stored / busy, stored / baseline
        print(
            f"store rate: collector {ours:,.0f} obs/s while busy; raw COPY of the same rows {raw_rate:,.0f} obs/s;"
            f" ratio {ours / raw_rate:.2f}  (goal >= 0.5)"
        )
        # A day that has ended is closed (beat, hourly): its indexes rebuilt with full pages. A month of
        # retention is 29 such days and the one being written.
        for table in tables:
            if table != partitions.DEFAULT:
                partitions.close_partition(table)
        vacuum(tables)
        closed = disk_total(tables)
        print(
            f"after the day closes (partitions.close_past): heap {closed.heap / n:,.0f} + TOAST and maps "
            f"{closed.toast / n:,.0f} + indexes {closed.indexes / n:,.0f} = {closed.total / n:,.0f} bytes an observation"
        )
        for what, size in sorted(index_sizes(tables).items(), key=lambda item: -item[1]):
            print(f"  index {size / n:6.1f} B/obs  {what[:100]}")
        month = (29 * closed.total + total.total) / 30 / n
        verdict = "met" if month <= GOAL_BYTES else "MISSED"
        print(
            f"bytes on disk per observation: {total.total / n:,.0f} as written, {closed.total / n:,.0f} closed; "
            f"{month:,.0f} over a 30-day month (29 days closed, 1 written)  (goal <= {GOAL_BYTES}: {verdict})"
        )
        if args.compact:
            report_compact(cluster_id, rows, counts, today, args.every)
    finally:
        sim.terminate()
        sim.wait(10)
        Cluster.objects.filter(name=name).delete()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
