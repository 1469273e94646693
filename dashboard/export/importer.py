"""Import a ``podlife.incident/v1`` bundle as a read-only cluster (``Cluster.origin = imported``).

The bundle's raw observations are the source of truth: they are verified against the digest in the
metadata, stored through ``store.begin_import`` (the only way into a read-only cluster), and every pod,
node and PDB is re-derived from them. The derived timelines in the bundle are then compared with what was
re-derived, and each difference is reported (with ``strict=True`` a difference refuses the import).

Everything is checked before the first row is written, and the writes are one transaction: a refused or
failed import leaves nothing behind. A file is refused with a message naming what is wrong when it is
not JSON, not a podlife incident bundle, another schema version, truncated, bigger than the limit, or
tampered with (a digest does not match its content).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import orjson
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, IntegrityError, transaction

from dashboard import serialize, timeline_reads
from dashboard.export.bundle import SCHEMA, SCHEMA_FAMILY, SECTIONS, canonical_observation, derived_line
from timelines import store
from timelines.derivation import drain
from timelines.lifecycle.observation import InvalidObservation, Observation
from timelines.lifecycle.timeline import SCHEMA as TIMELINE_SCHEMA
from timelines.lifecycle.timeline import parse_time
from timelines.models import Cluster, Pod, cluster_name_validator
from timelines.writer import StoreWriter


def max_bytes() -> int:
    return int(settings.PODLIFE_IMPORT_MAX_BYTES)


class BundleError(ValueError):
    """The file cannot be imported; the message says what is wrong with it (and nothing was written)."""


class BundleConflict(BundleError):
    """The cluster name is taken (also by an import that committed first while this one ran): HTTP 409."""


@dataclass
class ImportResult:
    cluster: Cluster
    pods: int
    observations: int
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- reading and verifying ----------------------------------------------------------------------------------
def _read_limited(stream: IO[bytes], limit: int, what: str) -> bytes:
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise BundleError(
            f"{what} is larger than the import limit of {limit:,} bytes (PODLIFE_IMPORT_MAX_BYTES)"
        )
    return data


def _gunzip(raw: bytes, limit: int, what: str) -> bytes:
    inflater = zlib.decompressobj(wbits=31)
    try:
        data = inflater.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise BundleError(f"{what} is damaged: the gzip stream cannot be read ({exc})") from None
    if len(data) > limit:
        raise BundleError(
            f"{what} is larger than the import limit of {limit:,} bytes once decompressed (PODLIFE_IMPORT_MAX_BYTES)"
        )
    if not inflater.eof:
        raise BundleError(f"{what} is truncated: the gzip stream ends before its end marker")
    return data


def read_bytes(source: str | Path | IO[bytes] | bytes, *, limit: int | None = None) -> bytes:
    """The bundle's JSON bytes (gunzipped when gzip), refusing anything past ``limit`` bytes."""
    limit = limit or max_bytes()
    if isinstance(source, bytes):
        raw, what = source, "the bundle"
        if len(raw) > limit and raw[:2] != b"\x1f\x8b":
            raise BundleError(f"the bundle is larger than the import limit of {limit:,} bytes")
    elif isinstance(source, str | Path):
        path = Path(source)
        what = str(path)
        try:
            with path.open("rb") as f:
                raw = _read_limited(f, limit, what)
        except OSError as exc:
            raise BundleError(f"{what}: cannot read it ({exc.strerror or exc})") from None
    else:
        what = getattr(source, "name", None) or "the upload"
        raw = _read_limited(source, limit, str(what))
    if raw[:2] == b"\x1f\x8b":
        return _gunzip(raw, limit, str(what))
    return raw


def parse(raw: bytes, *, what: str = "the file") -> dict[str, Any]:
    """The parsed and verified bundle. Raises BundleError naming the first thing wrong."""
    if not raw.strip():
        raise BundleError(f"{what} is empty; expected a {SCHEMA} bundle")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "end of data" in str(exc) or (raw.lstrip().startswith(b'{"schema":"' + SCHEMA_FAMILY.encode())):
            raise BundleError(
                f"{what} is truncated or damaged: the JSON breaks off at byte {exc.pos:,} of {len(raw):,} ({exc})"
            ) from None
        raise BundleError(f"{what} is not JSON ({exc}); expected a {SCHEMA} bundle") from None
    if not isinstance(data, dict):
        raise BundleError(
            f"{what} is JSON but not a {SCHEMA} bundle: the top level is a {type(data).__name__}"
        )
    schema = data.get("schema")
    if schema != SCHEMA:
        if isinstance(schema, str) and schema.startswith(SCHEMA_FAMILY):
            raise BundleError(
                f"{what} is a {schema} bundle; this podlife reads {SCHEMA} only (a newer or older podlife wrote it)"
            )
        if schema is None:
            raise BundleError(f'{what} is JSON but not a podlife incident bundle: it has no "schema" key')
        raise BundleError(f"{what} has schema {str(schema)[:80]!r}, not a podlife incident bundle ({SCHEMA})")
    trailer = data.get("trailer")
    if not isinstance(trailer, dict) or trailer.get("complete") is not True:
        raise BundleError(f"{what} is truncated: it has no complete trailer (the export did not finish)")
    meta = data.get("metadata")
    if not isinstance(meta, dict):
        raise BundleError(f'{what}: "metadata" must be a JSON object')
    for section in (*SECTIONS, "observations"):
        if not isinstance(data.get(section), list):
            raise BundleError(f'{what}: "{section}" must be a list')
        if not all(isinstance(item, dict) for item in data[section]):
            raise BundleError(f'{what}: every item of "{section}" must be a JSON object')
    _verify(data, what)
    for section in serialize.BUNDLE_SECTIONS:
        for i, item in enumerate(data[section]):
            try:
                serialize.check_bundle_item(section, item)
            except ValueError as exc:
                pod = item.get("pod")
                name = (
                    (pod.get("uid") if isinstance(pod, dict) else None) or item.get("uid") or item.get("name")
                )
                kind = "a podlife.timeline document" if section == "pods" else f"a bundle's {section} item"
                raise BundleError(
                    f"{what}: {section}[{i}]{f' ({str(name)[:64]})' if name else ''} is not {kind}: {exc}"
                ) from None
    return data


def _verify(data: Mapping[str, Any], what: str) -> None:
    digest = (
        (data["metadata"].get("digest") or {}) if isinstance(data["metadata"].get("digest"), dict) else {}
    )
    expected = digest.get("observations_sha256")
    if digest.get("algorithm") != "sha256" or not isinstance(expected, str):
        raise BundleError(f"{what}: metadata.digest.observations_sha256 is missing; cannot check the content")
    sha = hashlib.sha256()
    for i, item in enumerate(data["observations"]):
        try:
            sha.update(canonical_observation(item))
        except (TypeError, ValueError, AttributeError) as exc:  # not an object, nested too deep, ...
            raise BundleError(f"{what}: observations[{i}] is not an observation ({exc})") from None
    if sha.hexdigest() != expected:
        raise BundleError(
            f"{what} was modified after export: the observations' sha256 is {sha.hexdigest()[:16]}…, "
            f"the metadata says {expected[:16]}… (digest mismatch)"
        )
    counts = data["trailer"].get("counts") or {}
    for section in (*SECTIONS, "observations"):
        if counts.get(section) != len(data[section]):
            raise BundleError(
                f"{what} is inconsistent: the trailer counts {counts.get(section)} {section}, "
                f"the file holds {len(data[section])}"
            )
    derived = hashlib.sha256()
    for section in SECTIONS:
        for item in data[section]:
            derived.update(derived_line(section, item))
    if derived.hexdigest() != data["trailer"].get("derived_sha256"):
        raise BundleError(
            f"{what} was modified after export: the derived timelines do not match trailer.derived_sha256 "
            "(digest mismatch)"
        )


def _observations(data: Mapping[str, Any], what: str) -> list[tuple[int, Observation, datetime]]:
    """(bundle id, observation, received_at), in bundle-id order: the source's insertion order, so that
    evidence capped per row picks the same observations here as it did there."""
    out = []
    seen_ids: set[int] = set()
    for i, item in enumerate(data["observations"]):
        where = f"{what}: observations[{i}] ({str(item.get('dedupe_key'))[:60]!r})"
        oid = item.get("id")
        if not isinstance(oid, int) or oid in seen_ids:
            raise BundleError(f"{where}: id must be a unique integer")
        seen_ids.add(oid)
        try:
            observed = parse_time(item.get("observed_at"))
            received = parse_time(item.get("received_at")) or observed
            if observed is None:
                raise ValueError("observed_at is required")
            obs = Observation(
                kind=item.get("kind"),
                source=item.get("source"),
                observed_at=observed,
                dedupe_key=item.get("dedupe_key"),
                pod_uid=item.get("pod_uid"),
                node=item.get("node"),
                namespace=item.get("namespace"),
                name=item.get("name"),
                payload=item.get("payload"),
            )
        except InvalidObservation as exc:
            raise BundleError(f"{where}: {'; '.join(exc.problems)}") from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise BundleError(f"{where}: {exc}") from None
        assert received is not None
        out.append((oid, obs, received))
    out.sort(key=lambda t: t[0])
    return out


# --- comparing what was re-derived with what the bundle says ------------------------------------------------
def _normalized(timeline: Mapping[str, Any], key_of: Mapping[str, str]) -> dict[str, Any]:
    """A timeline dict with its evidence as sorted dedupe keys. A bundle written since timeline documents
    cite keys holds them already; an older bundle cited its own ``observations[].id`` values, which
    ``key_of`` (bundle id text → key) translates. A dedupe key never reads as a bundle's id (it names its
    kind, ``pod:…``, ``audit:…``, or is a 40-character digest), so the two cannot be mistaken."""

    def ev(items: Iterable[str]) -> list[str]:
        return sorted({key_of.get(i, i) for i in items})

    out = dict(timeline)
    out.pop("cluster", None)
    out["lanes"] = {
        lane: [{**iv, "evidence": ev(iv.get("evidence", []))} for iv in ivs]
        for lane, ivs in timeline.get("lanes", {}).items()
    }
    out["markers"] = [{**m, "evidence": ev(m.get("evidence", []))} for m in timeline.get("markers", [])]
    out["findings"] = [{**f, "evidence": ev(f.get("evidence", []))} for f in timeline.get("findings", [])]
    return out


def _describe(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    parts = []
    if a.get("pod") != b.get("pod"):
        keys = [
            k for k in set(a.get("pod", {})) | set(b.get("pod", {})) if a["pod"].get(k) != b["pod"].get(k)
        ]
        parts.append("pod " + ", ".join(sorted(keys)))
    lanes = sorted(k for k in set(a["lanes"]) | set(b["lanes"]) if a["lanes"].get(k) != b["lanes"].get(k))
    if lanes:
        parts.append("lanes " + ", ".join(lanes[:5]))
    for section in ("markers", "findings"):
        if a.get(section) != b.get(section):
            parts.append(section)
    return "; ".join(parts) or "order"


def compare_pods(
    cluster: Cluster, bundle_pods: list[dict[str, Any]], bundle_key_of: Mapping[str, str]
) -> list[str]:
    """Every pod whose re-derived timeline differs from the bundle's, as one line each (the re-derived
    timelines cite dedupe keys already: ``timeline_reads.pod_timelines``)."""
    expected = {tl["pod"]["uid"]: _normalized(tl, bundle_key_of) for tl in bundle_pods}
    pods = list(Pod.objects.filter(cluster=cluster).order_by("namespace", "name", "uid"))
    got = {
        pod.uid: _normalized(serialize.to_builtins(tl), {})
        for pod, tl in timeline_reads.pod_timelines(cluster, pods)
    }
    differences = []
    for uid in sorted(set(expected) | set(got)):
        a, b = expected.get(uid), got.get(uid)
        label = f"{(a or b or {}).get('pod', {}).get('namespace')}/{(a or b or {}).get('pod', {}).get('name')} ({uid})"
        if a is None:
            differences.append(f"pod {label}: re-derived, but not in the bundle")
        elif b is None:
            differences.append(f"pod {label}: in the bundle, but nothing re-derived (no observations)")
        elif a != b:
            differences.append(
                f"pod {label}: re-derived timeline differs from the bundle's ({_describe(a, b)})"
            )
    return differences


# --- the import ---------------------------------------------------------------------------------------------
def import_incident(
    source: str | Path | IO[bytes] | bytes,
    *,
    name: str | None = None,
    strict: bool = False,
    limit: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> ImportResult:
    """Load a bundle (JSON or gzip JSON; a path, a binary stream or bytes) as a read-only cluster.

    ``name`` defaults to the bundle's cluster name. Raises BundleError (nothing written) when the file is
    refused, the name is taken, or, with ``strict``, when a re-derived timeline differs from the bundle's.
    """
    what = str(source) if isinstance(source, str | Path) else "the bundle"
    data = parse(read_bytes(source, limit=limit), what=what)
    meta = data["metadata"]
    name = name or str((meta.get("cluster") or {}).get("name") or "")
    try:
        cluster_name_validator(name)
    except ValidationError:
        raise BundleError(
            f"cluster name {name!r} is not valid: 1-63 ASCII letters, digits, '-' or '.'; choose one with --as"
        ) from None
    if Cluster.objects.filter(name=name).exists():
        raise BundleConflict(_name_taken(name))
    observations = _observations(data, what)
    bundle_key_of = {str(oid): obs.dedupe_key for oid, obs, _ in observations}
    report = progress or (lambda stage, done, total: None)
    window = meta.get("window") or {}
    scope = meta.get("scope") or {}
    description = (
        f"Imported incident bundle: cluster {(meta.get('cluster') or {}).get('name')!r}, "
        f"{scope.get('label') or scope.get('kind')}, {window.get('since')} to {window.get('until')}, "
        f"generated {meta.get('generated_at')} by podlife {meta.get('podlife_version')}."
    )
    try:
        return _import(name, description, data, what, observations, bundle_key_of, strict, report)
    except IntegrityError:
        # Two imports under one name at once: the cluster row's unique name lets exactly one commit; the
        # other's insert fails (PostgreSQL, after waiting for the first to commit) and nothing of it stays.
        if Cluster.objects.filter(name=name).exists():
            raise BundleConflict(_name_taken(name)) from None
        raise


def _name_taken(name: str) -> str:
    return f"a cluster named {name!r} already exists; import under another name with --as NAME"


def _import(
    name: str,
    description: str,
    data: Mapping[str, Any],
    what: str,
    observations: list[tuple[int, Observation, datetime]],
    bundle_key_of: Mapping[str, str],
    strict: bool,
    report: Callable[[str, int, int], None],
) -> ImportResult:
    with transaction.atomic():
        if Cluster.objects.filter(name=name).exists():  # on SQLite, seen once the other import committed
            raise BundleConflict(_name_taken(name))
        try:
            session = store.begin_import(name, description=description)
        except ValueError as exc:
            raise BundleError(str(exc)) from None
        cluster = session.cluster
        # The session's writes, in batches (timelines/writer.py), with the progress after each.
        writer: StoreWriter[tuple[Observation, datetime]] = StoreWriter(
            session.save_observations,
            on_stored=lambda _batch: report("observations", writer.result.received, len(observations)),
        )
        for _, obs, received in observations:
            writer.add((obs, received))
        stored = writer.close()
        if stored.rejected:
            raise BundleError(f"{what}: observation {stored.rejected[0]} was refused by the store")
        if stored.duplicates:
            raise BundleError(f"{what}: {stored.duplicates} observations repeat a dedupe key")
        uids = sorted({obs.pod_uid for _, obs, _ in observations if obs.pod_uid})
        # The store marked every key of the new cluster dirty; the derive stage runs here, inside this
        # transaction (no one else can see the cluster before it commits).
        # All or nothing: a key that cannot be derived fails the import (rolled back, named) instead of
        # going to the quarantine of a cluster no one could write to again.
        try:
            derived = drain(cluster=cluster, raise_failures=True)
        except DatabaseError:
            raise
        except Exception as exc:  # broad: a key the core cannot derive, for any reason, refuses the import
            # (rolled back) and is named to the user; the cause is chained for its traceback
            raise BundleError(
                f"{what}: its observations could not be derived ({type(exc).__name__}: {exc})"
            ) from exc
        report("derive", derived, derived)
        # A bundle of an older timeline schema (podlife.timeline/v1: no running phase, no kubelet grade)
        # is read and re-derived; its timelines cannot be compared with today's, and are not.
        bundle_schema = str(data["metadata"].get("timeline_schema") or TIMELINE_SCHEMA)
        comparable = bundle_schema == TIMELINE_SCHEMA
        differences = compare_pods(cluster, data["pods"], bundle_key_of) if comparable else []
        notes = _side_notes(cluster, data)
        if not comparable:
            notes.insert(
                0,
                f"the bundle's pod timelines are {bundle_schema}: re-derived as {TIMELINE_SCHEMA}, not compared",
            )
        if differences and strict:
            raise BundleError(
                f"{len(differences)} re-derived pod timeline(s) differ from the bundle (strict): {differences[0]}"
            )
        verdict = (
            f" Re-derived {len(uids)} pods as {TIMELINE_SCHEMA}; the bundle's are {bundle_schema}, not compared."
            if not comparable
            else f" Re-derived {len(uids)} pods: identical to the bundle."
            if not differences
            else f" Re-derived {len(uids)} pods: {len(differences)} differ from the bundle (podlife versions "
            "or thresholds may differ): " + " | ".join(differences[:20])
        )
        Cluster.objects.filter(pk=cluster.pk).update(description=description + verdict)
        cluster.description = description + verdict
    return ImportResult(cluster, len(uids), stored.stored, differences, notes)


def _side_notes(cluster: Cluster, data: Mapping[str, Any]) -> list[str]:
    """Node and PDB lanes are re-derived from the window's observations only (and the one before it), so
    intervals that began before the window may start later here; say where the lanes differ."""
    from timelines.models import Interval

    notes = []
    for node in data["nodes"]:
        got = set(
            Interval.objects.filter(cluster=cluster, pod_uid=None, node=node["name"]).values_list(
                "lane", "state", "start"
            )
        )
        want = {
            (lane, iv["state"], parse_time(iv["start"])) for lane, ivs in node["lanes"].items() for iv in ivs
        }
        missing = want - got
        if missing:
            notes.append(
                f"node {node['name']}: {len(missing)} interval(s) start differently (they began before the window)"
            )
    return notes
