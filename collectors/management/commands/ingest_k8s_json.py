"""``manage.py ingest_k8s_json``: kubectl output and cluster-info dumps into a cluster's history.

For clusters podlife never watched (support bundles, postmortems): ``kubectl get … -o json|yaml`` lists,
the stream ``kubectl get -w -o json`` prints, and ``kubectl cluster-info dump`` output (a folder or the
single-stream form). Everything goes through the same parsers and store as the live collector.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from collectors.parsers.kubectl import OfflineResult, dump_member, read_kubectl_output
from timelines import store
from timelines.models import Cluster
from timelines.writer import observation_writer

MAX_FILE_BYTES = 2 * 1024**3  # a larger file is refused rather than read into memory


def read_path(path: Path, origin: str | None = None) -> OfflineResult:
    """Parse one file (kubectl output, or a cluster-info dump's stdout form) or one ``kubectl cluster-info
    dump --output-directory`` folder; errors name ``origin`` (the path by default), never raised."""
    origin = origin or str(path)
    if path.is_dir():
        return read_dump_folder(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            return OfflineResult(
                errors=[f"{origin}: {size} bytes is larger than the {MAX_FILE_BYTES} bytes accepted"],
                unreadable=[origin],
            )
        data = path.read_bytes()
    except FileNotFoundError:
        return OfflineResult(
            errors=[
                f"{origin}: expected kubectl output or a cluster-info dump folder, but it does not exist"
            ],
            unreadable=[origin],
        )
    except OSError as exc:
        return OfflineResult(errors=[f"{origin}: cannot read ({exc.strerror or exc})"], unreadable=[origin])
    if b"\x00" in data[:8192]:
        return OfflineResult(
            errors=[f"{origin}: binary data; expected kubectl JSON or YAML output"], unreadable=[origin]
        )
    result = read_kubectl_output(data.decode("utf-8", errors="replace"), origin=origin)
    if not result.observations and result.errors and not result.unreadable:
        result.unreadable.append(origin)  # nothing in it could be read
    return result


def read_dump_folder(path: Path) -> OfflineResult:
    """Every file of a cluster-info dump folder, in sorted order, read as ``dump_member`` says (container
    logs and other files counted as skipped); errors name the file relative to the folder."""
    result = OfflineResult()
    try:
        files = sorted(p for p in path.rglob("*") if p.is_file())
    except OSError as exc:
        result.errors.append(f"{path}: cannot list the cluster-info dump folder ({exc.strerror or exc})")
        return result
    if not files:
        result.errors.append(
            f"{path}: expected a cluster-info dump folder (nodes.json, <ns>/pods.json), empty"
        )
    for file in files:
        rel = str(file.relative_to(path))
        skip = dump_member(rel)
        if skip is not None:
            result.skipped[skip] += 1
        else:
            result.merge(read_path(file, rel))
    return result


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counter.items()))


# Storing is this command's whole job; timelines derive from what it stored in the derive stage (a Celery
# worker, or at once on the embedded default).
DERIVED_BY = "(the derive stage derives them; `manage.py derive` runs it in this process)"


class Command(BaseCommand):
    help = "Read kubectl -o json|yaml output, kubectl get -w -o json streams and cluster-info dumps."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH", help="files or cluster-info dump folders")
        parser.add_argument("--cluster", required=True, help="cluster name (created when new)")

    def handle(self, *args: object, paths: list[str], cluster: str, **options: object) -> None:
        try:
            target = store.cluster_for(cluster, origin=Cluster.Origin.OFFLINE)
        except ValidationError as exc:  # a new cluster's name that is not valid
            raise CommandError(f"--cluster {cluster!r}: {exc}") from None
        touched: set[str] = set()
        lost: Counter[str] = Counter()
        unreadable: list[str] = []
        rejected = 0
        for name in paths:
            parsed = read_path(Path(name))
            # One batch per input, as read (it is in memory whole): stored whole or not at all.
            writer = observation_writer(target, batch_size=None)
            writer.hold(parsed.observations)
            saved = writer.close()
            touched |= saved.pods_touched
            read = _counts(parsed.read) or "nothing"
            self.stdout.write(
                f"{name}: read {read}; {saved.received} observations "
                f"({saved.stored} stored, {saved.duplicates} already stored, {len(saved.rejected)} rejected)"
            )
            skipped = Counter(parsed.skipped)
            if skipped:
                self.stdout.write("  skipped: " + ", ".join(f"{r} {n}" for r, n in skipped.most_common()))
            if parsed.lost:
                self.stdout.write(f"  lost: {_counts(parsed.lost)} could not be read (see the errors)")
            for error in parsed.errors:
                self.stderr.write(f"error: {error}")
            for item in saved.rejected[:10]:
                self.stderr.write(f"  rejected {item}")
            lost.update(parsed.lost)
            unreadable += parsed.unreadable
            rejected += len(saved.rejected)
        self.stdout.write(f"total: {len(touched)} pods touched {DERIVED_BY}")
        # The summary names what was lost, so a damaged dump never passes for a complete one.
        losses = []
        if lost:
            losses.append(f"{sum(lost.values())} object(s) could not be read ({_counts(lost)})")
        if rejected:
            losses.append(f"{rejected} observation(s) were rejected by the store")
        if unreadable:
            losses.append(
                f"{len(unreadable)} of {len(paths)} input(s) could not be read at all ({', '.join(unreadable)})"
            )
        if losses:
            self.stdout.write("lost: " + "; ".join(losses) + "; everything else read was stored")
            raise CommandError("; ".join(losses))
