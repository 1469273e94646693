"""The compact form of an observation row and its exact inverse (issue #37; docs/storage.md). Pure: no
database, no Django. Its step 1, the stored payload (``pack_body`` / ``unpack_body`` with
``Dictionaries``), is what the store writes (``timelines/payloads.py``); the rest of the row below (step 2)
is not wired yet: ``bench/storage.py --compact`` measures it.

A row as the store holds it (``Row``: kind, source, observed_at, received_at, dedupe_key, pod_uid,
node, namespace, name, payload) becomes a ``Compact`` row:

- ``key_hash``: 16 bytes of BLAKE2b of the dedupe key, the column a unique index holds per cluster;
- ``pod_uid``: the UID's 16 bytes when it is a UUID in its canonical text form (lowercase, dashed, what an
  API server sends); any other text gets the 16 bytes of its BLAKE2b (the index by pod still finds it)
  and its exact text goes into ``body``;
- ``kind``, ``source``: small integers from the fixed tables ``KINDS`` and ``SOURCES`` (append-only: a
  code, once given, names the same text forever); an unknown text is code 0 and its text goes into
  ``body``;
- ``node``, ``namespace``, ``name``: ids into a per-cluster table of names (``NameTable``; 0 is "");
- ``observed_at``, ``received_at``: unchanged (the partition key, and the time reads bound);
- ``body``: the rest, ``flags | base distance | dictionary id | literals | data`` (see ``encode``), where
  data is the dedupe key (the pod UID in it replaced by one byte) and the payload, either whole or as the
  change against an earlier row of the same object (``base``: a row of the same ``chain_key``, at most
  ``Encoder.every - 1`` rows back, so any row is rebuilt from at most ``every`` rows), and compressed by
  zstd with the dictionary of the cluster and kind when that is shorter.

``decode(encode(x)) == x`` exactly, payload key order included (``tests/test_compact.py``). Payloads are
JSON values as orjson reads and writes them (what the store takes): integers within 64 bits, finite
floats, strings, booleans, null, lists and objects with string keys.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson
import zstandard

# Append-only: a code names the same text forever (rows written with it stay readable). 0 is "another
# text", carried in the row's body.
KINDS: tuple[str, ...] = (
    "",
    "pod",
    "pod_deleted",
    "event",
    "worker",
    "span",
    "kubelet_marker",
    "node",
    "node_deleted",
    "node_metrics",
    "pdb",
    "pdb_deleted",
    "workload",
    "workload_deleted",
    "audit",
    "kubelet_process",
)
SOURCES: tuple[str, ...] = (
    "",
    "api",
    "offline",
    "kubelet_log",
    "kubelet_span",
    "kubelet_metrics",
    "synthetic",
    "audit",
)
_KIND_CODE = {text: code for code, text in enumerate(KINDS) if text}
_SOURCE_CODE = {text: code for code, text in enumerate(SOURCES) if text}

# Flags, the body's first byte.
_DELTA = 1  # data's payload is a patch against the base row's payload; the base distance follows
_ZSTD = 2  # data is a zstd frame (magicless, no checksum); the dictionary id follows (0: none)
_KIND_TEXT = 4  # kind code 0: its text follows
_SOURCE_TEXT = 8  # source code 0: its text follows
_UID_TEXT = 16  # the pod UID is not a canonical UUID: its text follows
_SUBST = 32  # the row's own texts are written as one byte each in the data (``_substitutes``)

# A frame gives its content size (1-2 bytes a row, the window's byte left out): a reader decompresses a
# batch's frames in one call only when each says its size (``Dictionaries.decompress_each``).
_FRAME = {"write_checksum": False, "write_content_size": True, "write_dict_id": False}
_MAGIC = b"\x28\xb5\x2f\xfd"  # zstd's frame magic number, which the stored (magicless) frames leave out
# The most content one call decompresses (its output is allocated at once, ``decompress_each``): frames
# that say they hold more together go in several calls; a frame that says it holds more alone, or does
# not say, is decompressed alone, as a stream with no bound assumed.
BATCH_BYTES = 1 << 23
LEVEL = 3  # per row: 3 µs a pod snapshot; 19 saves 8 % of the bytes for 600 times the time


class CorruptRow(ValueError):
    """A compact row that cannot be decoded (truncated, unknown dictionary, base missing or wrong)."""


@dataclass(frozen=True)
class Row:
    """One observation row as ``timelines_observation`` holds it (``pod_uid`` None when it has none;
    ``node``, ``namespace``, ``name`` "" when absent), without the local ``id`` and ``cluster_id``."""

    kind: str
    source: str
    observed_at: datetime
    received_at: datetime
    dedupe_key: str
    pod_uid: str | None
    node: str
    namespace: str
    name: str
    payload: Any


@dataclass(frozen=True)
class Compact:
    """The columns of a compact row (``id`` and ``cluster`` are the store's)."""

    key_hash: bytes
    pod_uid: bytes | None
    kind: int
    source: int
    observed_at: datetime
    received_at: datetime
    node: int
    namespace: int
    name: int
    body: bytes


# -- columns -----------------------------------------------------------------------------------------------


def key_hash(dedupe_key: str, cluster: int = 0) -> bytes:
    """16 bytes of BLAKE2b of the dedupe key, salted with the cluster's id when one is given (then unique
    alone: docs/storage.md, layout "lean"). Two keys share a hash with probability about n²/2¹²⁹ for n
    keys of a cluster (10⁻¹⁹ at 10¹⁰ keys): never in practice. Were it to happen, the store would take the
    second fact for a re-delivery of the first; the store can tell (the first row's body holds its key)
    and log it rather than lose it silently."""
    salt = cluster.to_bytes(8, "big") if cluster else b""
    return hashlib.blake2b(dedupe_key.encode(), digest_size=16, salt=salt).digest()


def uid_bytes(uid: str) -> tuple[bytes, bool]:
    """The 16 bytes of the ``pod_uid`` column for ``uid``, and whether they are the UUID itself (else a
    hash, and the text goes into the body). A reader looks a pod up by the same bytes."""
    try:
        parsed = uuid.UUID(uid)
    except ValueError:
        parsed = None
    if parsed is not None and str(parsed) == uid:
        return parsed.bytes, True
    return hashlib.blake2b(uid.encode(), digest_size=16, person=b"podlife-uid").digest(), False


class NameTable:
    """A cluster's node, namespace and object names as small ids (0 is ""). In the store, a table
    (cluster, id, text) that only grows; here its in-memory image. ``added`` lists what ``ref`` made new
    since the last ``take_added`` (what the store would insert with the batch)."""

    def __init__(self, texts: Iterable[tuple[int, str]] = ()) -> None:
        self._ids: dict[str, int] = {"": 0}
        self._texts: dict[int, str] = {0: ""}
        for ref, text in texts:
            self._ids[text], self._texts[ref] = ref, text
        self.added: list[tuple[int, str]] = []

    def ref(self, text: str) -> int:
        ref = self._ids.get(text)
        if ref is None:
            ref = max(self._texts) + 1
            self._ids[text], self._texts[ref] = ref, text
            self.added.append((ref, text))
        return ref

    def text(self, ref: int) -> str:
        try:
            return self._texts[ref]
        except KeyError:
            raise CorruptRow(f"name id {ref} is not in the cluster's name table") from None

    def take_added(self) -> list[tuple[int, str]]:
        added, self.added = self.added, []
        return added


# -- structural patches ------------------------------------------------------------------------------------
# A patch turns one JSON value into another exactly (types, float signs and key order included):
#   [0, value]                            the new value whole
#   [1, sets, dels, subs, order]          an object: ``sets`` {key: value} replaces or adds, ``dels`` lists the
#                                         keys removed, ``subs`` {key: patch} edits a member in place,
#                                         ``order`` (or null) the new key order when it is not the old one's
#                                         with new keys appended; trailing empty parts are left out
#   [2, prefix, suffix, items]            an array: the first ``prefix`` and last ``suffix`` items are kept,
#                                         the ones between become ``items``, each a patch against the old
#                                         item at the same place between (or [0, value])


def same(a: Any, b: Any) -> bool:
    """JSON equality as the text shows it: 1, 1.0 and true differ, -0.0 is not 0.0, key order counts."""
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is str or ta is int or ta is bool or a is None:
        return bool(a == b)
    # Containers and floats: their JSON text (orjson's, in C, is several times faster than a walk here).
    return orjson.dumps(a) == orjson.dumps(b)


def diff(old: Any, new: Any) -> list[Any]:
    """A patch (above) that turns ``old`` into ``new``."""
    if type(old) is dict and type(new) is dict:
        sets: dict[str, Any] = {}
        subs: dict[str, Any] = {}
        for k, v in new.items():
            if k not in old:
                sets[k] = v
                continue
            was = old[k]
            if same(was, v):
                continue
            if type(was) is type(v) and type(v) in (dict, list):
                subs[k] = diff(was, v)
            else:
                sets[k] = v
        dels = [k for k in old if k not in new]
        made = [k for k in old if k in new] + [k for k in new if k not in old]
        order = None if made == list(new) else list(new)
        patch: list[Any] = [1, sets, dels, subs, order]
        while patch[-1] in ({}, [], None) and len(patch) > 2:
            patch.pop()
        return patch
    if type(old) is list and type(new) is list:
        n = min(len(old), len(new))
        prefix = 0
        while prefix < n and same(old[prefix], new[prefix]):
            prefix += 1
        suffix = 0
        while suffix < n - prefix and same(old[-1 - suffix], new[-1 - suffix]):
            suffix += 1
        was, now = old[prefix : len(old) - suffix], new[prefix : len(new) - suffix]
        items = [
            diff(was[i], v)
            if i < len(was) and type(was[i]) is type(v) and type(v) in (dict, list)
            else [0, v]
            for i, v in enumerate(now)
        ]
        return [2, prefix, suffix, items]
    return [0, new]


def apply(old: Any, patch: list[Any]) -> Any:
    """The value ``patch`` makes of ``old`` (``old`` is not changed)."""
    tag = patch[0]
    if tag == 0:
        return patch[1]
    if tag == 1:
        if type(old) is not dict:
            raise CorruptRow("an object patch meets a value that is not an object")
        sets = patch[1]
        dels = patch[2] if len(patch) > 2 else ()
        subs = patch[3] if len(patch) > 3 else {}
        order = patch[4] if len(patch) > 4 else None
        out = dict(old)
        for k in dels:
            del out[k]
        for k, sub in subs.items():
            out[k] = apply(out[k], sub)
        out.update(sets)
        return {k: out[k] for k in order} if order is not None else out
    if tag == 2:
        if type(old) is not list:
            raise CorruptRow("an array patch meets a value that is not an array")
        _, prefix, suffix, items = patch
        was = old[prefix : len(old) - suffix]
        middle = [
            item[1] if item[0] == 0 else apply(was[i] if i < len(was) else None, item)
            for i, item in enumerate(items)
        ]
        return [*old[:prefix], *middle, *old[len(old) - suffix :]]
    raise CorruptRow(f"unknown patch tag {tag!r}")


# -- bytes -------------------------------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if at >= len(data):
            raise CorruptRow("the body ends inside a number")
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return n, at
        shift += 7


def _text(value: str) -> bytes:
    raw = value.encode()
    return _varint(len(raw)) + raw


def _read_text(data: bytes, at: int) -> tuple[str, int]:
    size, at = _read_varint(data, at)
    if at + size > len(data):
        raise CorruptRow("the body ends inside a text")
    return data[at : at + size].decode(), at + size


class Dictionaries:
    """zstd dictionaries by id (0: none), as the store keeps them: a row names the dictionary it was
    compressed with, and a dictionary once stored never changes nor goes, so old rows stay readable when
    newer ones use a newer dictionary. Safe to share between threads: each thread compresses and
    decompresses with its own zstd objects (python-zstandard's are not thread-safe)."""

    def __init__(
        self, stored: Mapping[int, bytes] | None = None, load: Callable[[int], bytes | None] | None = None
    ) -> None:
        self._load = load  # reads a dictionary this object does not hold yet (the store's table), or None
        self._raw: dict[int, bytes] = {}
        self._zdicts: dict[int, zstandard.ZstdCompressionDict | None] = {}
        self._local = threading.local()
        for dict_id, data in (stored or {}).items():
            self.add(dict_id, data)
        self.add(0, b"")

    def add(self, dict_id: int, data: bytes) -> None:
        if dict_id in self._raw and self._raw[dict_id] != data:
            raise ValueError(f"dictionary {dict_id} is stored already with other bytes")
        zdict = zstandard.ZstdCompressionDict(data) if data else None
        if zdict is not None:
            zdict.precompute_compress(level=LEVEL)  # once, not each time a thread makes its compressor
        self._zdicts[dict_id] = zdict
        self._raw[dict_id] = data

    def raw(self, dict_id: int) -> bytes:
        return self._raw[dict_id]

    def _mine(
        self,
    ) -> tuple[dict[int, zstandard.ZstdCompressor], dict[tuple[int, bool], zstandard.ZstdDecompressor]]:
        local = self._local
        if not hasattr(local, "compress"):
            local.compress, local.decompress = {}, {}
        return local.compress, local.decompress

    def _compressor(self, dict_id: int) -> zstandard.ZstdCompressor:
        # Every stored batch comes here: the thread's compressor is found with two look-ups.
        compressors = getattr(self._local, "compress", None)
        compressor = compressors.get(dict_id) if compressors is not None else None
        if compressor is None:
            compressors, _ = self._mine()
            params = zstandard.ZstdCompressionParameters.from_level(
                LEVEL, format=zstandard.FORMAT_ZSTD1_MAGICLESS, **_FRAME
            )
            compressor = compressors[dict_id] = zstandard.ZstdCompressor(
                dict_data=self._zdicts[dict_id], compression_params=params
            )
        return compressor

    def compress(self, dict_id: int, data: bytes | bytearray | memoryview) -> bytes:
        return self._compressor(dict_id).compress(data)

    def compress_each(self, dict_id: int, data: list[bytes | bytearray | memoryview]) -> list[bytes]:
        """``compress`` of each of ``data`` (the same bytes), in one call. python-zstandard lets go of the
        GIL around each compression, and a thread that let go waits for it while another thread runs
        Python (up to ``sys.getswitchinterval()``): a store thread compressing row by row beside the
        watch's parsing took 109 µs a row, against 1.8 in one call (docs/performance-history.md,
        "Watch")."""
        if len(data) < 2 or not all(data):  # one row; and the call refuses a batch of nothing but b""
            return [self.compress(dict_id, one) for one in data]
        packed = self._compressor(dict_id).multi_compress_to_buffer(data, threads=1)
        return [packed[i].tobytes() for i in range(len(packed))]

    def _decompressor(self, dict_id: int, *, framed: bool = False) -> zstandard.ZstdDecompressor:
        """This thread's decompressor of ``dict_id``: for magicless frames, or with ``framed`` for frames
        given their magic number (``multi_decompress_to_buffer`` reads no other)."""
        _, decompressors = self._mine()
        decompressor = decompressors.get((dict_id, framed))
        if decompressor is None:
            if dict_id not in self._zdicts:
                found = self._load(dict_id) if self._load is not None else None
                if found is None:
                    raise CorruptRow(f"zstd dictionary {dict_id} is not stored")
                self.add(dict_id, found)
            decompressor = decompressors[dict_id, framed] = zstandard.ZstdDecompressor(
                dict_data=self._zdicts[dict_id],
                format=zstandard.FORMAT_ZSTD1 if framed else zstandard.FORMAT_ZSTD1_MAGICLESS,
            )
        return decompressor

    def decompress(self, dict_id: int, data: bytes) -> bytes:
        # A stream decompressor: a frame stored before its content size was written has none, and no
        # upper bound on a payload's size is assumed.
        try:
            return self._decompressor(dict_id).decompressobj().decompress(data)
        except zstandard.ZstdError as exc:
            raise CorruptRow(f"zstd: {exc}") from None

    def decompress_each(self, dict_id: int, frames: Sequence[bytes]) -> list[bytes]:
        """``decompress`` of each of ``frames``: those that say their content size in one call for each
        ``BATCH_BYTES`` of it, as ``compress_each`` (a reader thread beside another thread running Python
        waited for the GIL after each row: 674 µs a row against 2.4 alone, at the default switch
        interval). A frame that does not say its size, or a batch a frame of which fails, is decompressed
        row by row, each failure its own ``CorruptRow``."""
        out: list[bytes | None] = [None] * len(frames)
        framed: list[bytes | bytearray | memoryview] = []
        at: list[int] = []
        held = 0
        for i, frame in enumerate(frames):
            whole = _MAGIC + frame
            try:
                size = zstandard.frame_content_size(whole)
            except zstandard.ZstdError:
                continue  # a broken header: refused by name row by row below
            if not 0 <= size <= BATCH_BYTES:
                continue
            if held + size > BATCH_BYTES:
                self._decompress_batch(dict_id, framed, at, out)
                framed, at, held = [], [], 0
            framed.append(whole)
            at.append(i)
            held += size
        self._decompress_batch(dict_id, framed, at, out)
        return [one if one is not None else self.decompress(dict_id, frames[i]) for i, one in enumerate(out)]

    def _decompress_batch(
        self,
        dict_id: int,
        framed: list[bytes | bytearray | memoryview],
        at: list[int],
        out: list[bytes | None],
    ) -> None:
        """Decompress ``framed`` (frames given their magic number) in one call into ``out`` at ``at``; a
        batch of one, or one that fails, is left to ``decompress`` row by row."""
        if len(framed) < 2:
            return
        try:
            got = self._decompressor(dict_id, framed=True).multi_decompress_to_buffer(framed, threads=1)
        except zstandard.ZstdError:
            return
        for i, j in zip(at, range(len(got)), strict=True):
            out[i] = got[j].tobytes()


def train(samples: list[bytes | bytearray | memoryview], size: int = 16384) -> bytes:
    """A zstd dictionary of ``size`` bytes at most from ``samples`` (the plain data of rows: ``plain``).

    COVER with fixed parameters (segments of 8,192 bytes, d-mers of 8; a segment no longer than the
    dictionary) rather than its search for them: on the ``scale`` churn's rows that search settled on k
    1,998 and d 8 and took 2.5 to 3.5 times as long (53 ms against 15 for 2,000 pod snapshots) for
    dictionaries that compressed the next rows no better (68.2 B a pod against 65.4; from 40 samples, 127
    B against 60). Segments of 8,192 bytes rather than 2,048: trained on each of six windows of 2,000
    pod snapshots of the churn, the next 2,000 took 58.5-59.8 B a pod against 63.4-71.5 in four windows
    and the same in two; events and deletions the same; trained as fast (docs/performance-history.md,
    "Storage")."""
    return zstandard.train_dictionary(size, samples, k=min(8192, size), d=8).as_bytes()


# -- rows --------------------------------------------------------------------------------------------------


def chain_key(row: Row) -> tuple[str, str] | None:
    """The object whose earlier rows a row's payload may be stored against: a pod (its snapshots and its
    deletion), a node, a PDB or a workload; None for facts that are no snapshot of an object."""
    kind = row.kind
    if kind in ("pod", "pod_deleted") and row.pod_uid:
        return ("pod", row.pod_uid)
    if kind in ("node", "node_deleted"):
        return ("node", row.node)
    if kind in ("pdb", "pdb_deleted", "workload", "workload_deleted"):
        return (kind.split("_")[0], f"{row.namespace}/{row.name}")
    return None


def _substitutes(
    uid: str | None, node: str, name: str, namespace: str, at: datetime
) -> list[tuple[bytes, bytes]]:
    """(text, placeholder) pairs ``plain`` replaces: the row's pod UID, node, name, namespace and time
    as the payload spells them (UTC ISO 8601), where they are not empty and hold no control character,
    each written as one control byte (0x01-0x05), which JSON text never holds raw. A decoder knows the
    same texts from the row's columns."""
    return [*_text_pairs(uid, node, name, namespace), _stamp_pair(at)]


def _stamp_pair(at: datetime) -> tuple[bytes, bytes]:
    """The pair of a row's time: a time already in UTC (the collector's and every API server's) is not
    converted again; an ISO 8601 time holds no control byte. The rows of a list page share one time
    object: its text is made once (``isoformat`` is a tenth of a row's packing)."""
    global _last_stamp
    last = _last_stamp  # read once: another thread may replace it meanwhile, never change it
    if last[0] is at:
        return last[1]
    given = at
    if at.tzinfo is not UTC and at.tzinfo is not None:
        at = at.astimezone(UTC)
    pair = (at.isoformat().encode(), b"\x05")
    _last_stamp = (given, pair)
    return pair


_last_stamp: tuple[object, tuple[bytes, bytes]] = (object(), (b"", b""))  # (time object, its pair)


# Every row's writer and reader comes here (a few µs of the store's time a row, docs/storage.md). A pod's
# rows repeat its UID, node, name and namespace: their pairs are remembered (a bounded cache), and the
# common case is checked once on the four texts together. UTF-8 of a character at or above U+0020 holds
# no byte below 0x20, so checking the text is checking its bytes.
@functools.lru_cache(maxsize=16384)
def _text_pairs(uid: str | None, node: str, name: str, namespace: str) -> tuple[tuple[bytes, bytes], ...]:
    """The pairs of a row's four texts (``_substitutes`` without the time)."""
    texts = (uid or "", node, name, namespace)
    if _CONTROL_TEXT.search("".join(texts)) is None:
        return tuple((text.encode(), mark) for text, mark in zip(texts, _MARKS, strict=True) if text)
    out = []
    for text, mark in zip(texts, _MARKS, strict=True):
        raw = text.encode()
        if raw and not _CONTROL.search(raw):
            out.append((raw, mark))
    return tuple(out)


_CONTROL = re.compile(rb"[\x00-\x1f]")
_CONTROL_TEXT = re.compile("[\x00-\x1f]")
_MARKS = (b"\x01", b"\x02", b"\x03", b"\x04")


def _substitute(data: bytes, pairs: list[tuple[bytes, bytes]]) -> bytes:
    for text, mark in pairs:
        data = data.replace(text, mark)
    return data


def _restore(data: bytes, pairs: list[tuple[bytes, bytes]]) -> bytes:
    # In the reverse order: a text replaced later may hold the mark of one replaced earlier.
    for text, mark in reversed(pairs):
        data = data.replace(mark, text)
    return data


def plain(row: Row, base_payload: Any = None, *, delta: bool = False) -> tuple[bytes, bool, bool]:
    """The data of ``row`` before compression: its dedupe key then its payload as JSON, or as a patch
    against ``base_payload`` when ``delta`` and that is shorter, with the row's own texts written as one
    byte each (``_substitutes``) unless the key holds a control character. Returns (data, whether the
    payload is a patch, whether texts were replaced)."""
    key = row.dedupe_key.encode()
    payload = orjson.dumps(row.payload)
    is_patch = False
    if delta:
        patch = orjson.dumps(diff(base_payload, row.payload))
        if len(patch) < len(payload):
            payload, is_patch = patch, True
    if _CONTROL.search(key):
        return _varint(len(key)) + key + payload, is_patch, False
    pairs = _substitutes(row.pod_uid, row.node, row.name, row.namespace, row.observed_at)
    key = _substitute(key, pairs)
    return _varint(len(key)) + key + _substitute(payload, pairs), is_patch, True


def encode(
    row: Row,
    names: NameTable,
    dictionaries: Dictionaries,
    *,
    dictionary: int = 0,
    base: tuple[int, Any] | None = None,
) -> tuple[Compact, bool]:
    """The compact row of ``row``. ``base``: (how many ids back the base row is, its payload) to store the
    payload as a patch against, when shorter; ``dictionary``: the id of the zstd dictionary to compress
    with (0: none), when that is shorter. Returns the row and whether its payload is a patch.

    Body: flags (one byte); the base distance (varint) if a patch; the dictionary id (varint) if
    compressed; the kind's, source's and pod UID's texts (varint length + UTF-8) if their flags say so;
    then the data (``plain``), compressed or not."""
    flags = 0
    head = bytearray()
    data, is_patch, substituted = plain(row, base[1] if base else None, delta=base is not None)
    if substituted:
        flags |= _SUBST
    if is_patch:
        assert base is not None
        flags |= _DELTA
        head += _varint(base[0])
    packed = dictionaries.compress(dictionary, data)
    if len(packed) + len(_varint(dictionary)) < len(data):
        flags |= _ZSTD
        head += _varint(dictionary)
        data = packed
    kind = _KIND_CODE.get(row.kind, 0)
    if not kind:
        flags |= _KIND_TEXT
        head += _text(row.kind)
    source = _SOURCE_CODE.get(row.source, 0)
    if not source:
        flags |= _SOURCE_TEXT
        head += _text(row.source)
    uid: bytes | None = None
    if row.pod_uid is not None:
        uid, exact = uid_bytes(row.pod_uid)
        if not exact:
            flags |= _UID_TEXT
            head += _text(row.pod_uid)
    compact = Compact(
        key_hash=key_hash(row.dedupe_key),
        pod_uid=uid,
        kind=kind,
        source=source,
        observed_at=row.observed_at,
        received_at=row.received_at,
        node=names.ref(row.node),
        namespace=names.ref(row.namespace),
        name=names.ref(row.name),
        body=bytes([flags]) + bytes(head) + data,
    )
    return compact, is_patch


def base_distance(compact: Compact) -> int | None:
    """How many ids back the row's base is, or None when its payload is whole."""
    body = compact.body
    if not body or not body[0] & _DELTA:
        return None
    return _read_varint(body, 1)[0]


def decode(compact: Compact, names: NameTable, dictionaries: Dictionaries, base_payload: Any = None) -> Row:
    """The row ``compact`` was made from. ``base_payload``: the decoded payload of its base row (the one
    ``base_distance`` ids back) when it has one."""
    body = compact.body
    if not body:
        raise CorruptRow("empty body")
    flags, at = body[0], 1
    if flags & _DELTA:
        _distance, at = _read_varint(body, at)
    dict_id = None
    if flags & _ZSTD:
        dict_id, at = _read_varint(body, at)
    kind = KINDS[compact.kind] if 0 < compact.kind < len(KINDS) else None
    if flags & _KIND_TEXT:
        kind, at = _read_text(body, at)
    source = SOURCES[compact.source] if 0 < compact.source < len(SOURCES) else None
    if flags & _SOURCE_TEXT:
        source, at = _read_text(body, at)
    if kind is None or source is None:
        raise CorruptRow(f"kind {compact.kind} or source {compact.source} has no text")
    uid: str | None = None
    if compact.pod_uid is not None:
        if flags & _UID_TEXT:
            uid, at = _read_text(body, at)
        else:
            uid = str(uuid.UUID(bytes=compact.pod_uid))
    data = body[at:]
    if dict_id is not None:
        data = dictionaries.decompress(dict_id, data)
    size, at = _read_varint(data, 0)
    if at + size > len(data):
        raise CorruptRow("the data ends inside the dedupe key")
    key, rest = data[at : at + size], data[at + size :]
    node, namespace, name = names.text(compact.node), names.text(compact.namespace), names.text(compact.name)
    if flags & _SUBST:
        pairs = _substitutes(uid, node, name, namespace, compact.observed_at)
        key, rest = _restore(key, pairs), _restore(rest, pairs)
    value = orjson.loads(rest)
    payload = apply(base_payload, value) if flags & _DELTA else value
    return Row(
        kind=kind,
        source=source,
        observed_at=compact.observed_at,
        received_at=compact.received_at,
        dedupe_key=key.decode(),
        pod_uid=uid,
        node=node,
        namespace=namespace,
        name=name,
        payload=payload,
    )


# -- the stored payload: what the store writes today (docs/storage.md, "Step 1: the body") -----------------
# A row of ``timelines_observation`` keeps its other columns as they were and holds its payload in ``body``:
# a flags byte (``_BODY_*``), the dictionary id (varint) when compressed, then the payload's JSON text with
# the row's own texts written as one control byte each (``_substitutes``), compressed by zstd with the
# dictionary of the cluster and kind when that is shorter. The first byte is below 0x20, so a body is
# never taken for JSON text (the ``payload`` column of rows stored before it). Since migration 0028 the
# data also holds the row's dedupe key after the payload and one NUL (``_BODY_KEY``): JSON text holds no
# raw NUL and a stored key none either (the store writes U+FFFD for it), so the first NUL ends the
# payload; the key's texts are replaced as the payload's are, and zstd finds the rest of it (a UID, a
# resourceVersion) in the payload. The row keeps a hash of the key (``key_hash``) instead of its text.
_BODY_ZSTD = 1
_BODY_SUBST = 2
_BODY_KEY = 4
_BODY_FLAGS = _BODY_ZSTD | _BODY_SUBST | _BODY_KEY


class Texts(NamedTuple):
    """A row's own texts, which its body may hold as one byte each: its columns, so a reader has them.
    (A tuple: the store makes one a row, and a frozen dataclass took a µs to build.)"""

    pod_uid: str | None
    node: str
    namespace: str
    name: str
    observed_at: datetime

    def pairs(self) -> list[tuple[bytes, bytes]]:
        return _substitutes(self.pod_uid, self.node, self.name, self.namespace, self.observed_at)


def plain_body(payload_json: bytes, texts: Texts, key: str | None = None) -> tuple[bytes, int]:
    """The body's data before compression (what a dictionary is trained on) and its flags: the payload,
    then with ``key`` a NUL and the key, the row's texts replaced (a key holding a control character
    leaves the data as it is: its restore would change it)."""
    if key is None:
        # The pairs ``unpack_body`` restores (a row always has one: its time).
        return _substitute(payload_json, texts.pairs()), _BODY_SUBST
    raw = key.encode()
    if b"\x00" in raw:  # the store writes U+FFFD for a NUL, as in its text columns
        raise ValueError("a dedupe key holds a NUL, which ends the payload in a body")
    if _CONTROL.search(raw) is not None:
        return payload_json + b"\x00" + raw, _BODY_KEY
    return _substitute(payload_json + b"\x00" + raw, texts.pairs()), _BODY_SUBST | _BODY_KEY


def pack_body(
    payload_json: bytes, texts: Texts, dictionaries: Dictionaries, dictionary: int = 0, key: str | None = None
) -> bytes:
    """The ``body`` of a row whose payload is the JSON text ``payload_json`` (and with ``key``, whose
    dedupe key it is): compressed with ``dictionary`` (0: none) when that is shorter."""
    return pack_plain(*plain_body(payload_json, texts, key), dictionaries, dictionary)


def pack_plain(data: bytes, flags: int, dictionaries: Dictionaries, dictionary: int = 0) -> bytes:
    """``pack_body`` of the data and flags ``plain_body`` made."""
    return _packed_body(data, flags, dictionary, dictionaries.compress(dictionary, data))


def pack_plains(items: Sequence[tuple[bytes, int, int]], dictionaries: Dictionaries) -> list[bytes]:
    """``pack_plain`` of each (data, flags, dictionary), in order: the data of each dictionary's rows
    compressed in one call (``Dictionaries.compress_each``)."""
    rows_of: dict[int, list[int]] = {}
    for at, (_data, _flags, dictionary) in enumerate(items):
        rows_of.setdefault(dictionary, []).append(at)
    bodies = [b""] * len(items)
    for dictionary, rows in rows_of.items():
        packed = dictionaries.compress_each(dictionary, [items[at][0] for at in rows])
        for at, one in zip(rows, packed, strict=True):
            bodies[at] = _packed_body(items[at][0], items[at][1], dictionary, one)
    return bodies


def _packed_body(data: bytes, flags: int, dictionary: int, packed: bytes) -> bytes:
    """The body of ``data`` with ``flags``: ``packed`` (its compression with ``dictionary``) when shorter."""
    head = _BODY_HEADS.get((flags, dictionary))
    if head is None:  # made once for each flags and dictionary: a row's bytes are not built twice
        head = _BODY_HEADS.setdefault((flags, dictionary), bytes([flags | _BODY_ZSTD]) + _varint(dictionary))
    if len(packed) + len(head) - 1 < len(data):
        return head + packed
    return _PLAIN_HEADS[flags] + data


_BODY_HEADS: dict[tuple[int, int], bytes] = {}  # (flags, dictionary id) -> a compressed body's first bytes
_PLAIN_HEADS = {flags: bytes([flags]) for flags in range(_BODY_FLAGS + 1) if not flags & _BODY_ZSTD}


def _body_flags(body: bytes) -> int:
    """The flags byte ``body`` starts with; CorruptRow when it starts with anything else."""
    if not body or body[0] & ~_BODY_FLAGS:
        raise CorruptRow(f"a body starts with {body[:1]!r}, not with a flags byte")
    return body[0]


def body_dictionary(body: bytes) -> int | None:
    """The id of the dictionary ``body`` was compressed with (0: none), or None when not compressed."""
    return _read_varint(body, 1)[0] if _body_flags(body) & _BODY_ZSTD else None


def _bodies_data(bodies: Sequence[bytes], dictionaries: Dictionaries) -> list[tuple[int, bytes]]:
    """The flags of each of ``bodies`` and its data, decompressed (its texts still marks), in order: each
    dictionary's frames decompressed together (``Dictionaries.decompress_each``; one frame alone is
    decompressed as a stream)."""
    out: list[tuple[int, bytes]] = []
    frames: dict[int, list[tuple[int, bytes]]] = {}  # dictionary id -> (index in out, frame)
    for i, body in enumerate(bodies):
        flags = _body_flags(body)
        if not flags & _BODY_ZSTD:
            out.append((flags, body[1:]))
            continue
        dict_id, at = _read_varint(body, 1)
        frames.setdefault(dict_id, []).append((i, body[at:]))
        out.append((flags, b""))
    for dict_id, held in frames.items():
        for (i, _frame), data in zip(
            held, dictionaries.decompress_each(dict_id, [frame for _i, frame in held]), strict=True
        ):
            out[i] = (out[i][0], data)
    return out


def _key_at(data: bytes) -> int:
    """Where the key starts in the data of a body that holds one (after its payload and a NUL)."""
    end = data.find(b"\x00")
    if end < 0:
        raise CorruptRow("a body that holds a key has no NUL after its payload")
    return end + 1


def unpack_body(body: bytes, texts: Texts, dictionaries: Dictionaries) -> tuple[bytes, str | None]:
    """The payload's JSON text that ``pack_body`` made ``body`` of (``texts``: the same row's), and the
    dedupe key it holds (None: a body made before migration 0028, whose row holds the key's text)."""
    return unpack_bodies([body], [texts], dictionaries)[0]


def unpack_bodies(
    bodies: Sequence[bytes], texts: Sequence[Texts], dictionaries: Dictionaries
) -> list[tuple[bytes, str | None]]:
    """``unpack_body`` of each of ``bodies`` (with the same row's ``texts``), in order; a batch's frames
    decompressed together (``_bodies_data``)."""
    return [
        _unpacked(flags, data, one)
        for (flags, data), one in zip(_bodies_data(bodies, dictionaries), texts, strict=True)
    ]


def _unpacked(flags: int, data: bytes, texts: Texts) -> tuple[bytes, str | None]:
    """``unpack_body`` of a body's flags and decompressed data."""
    if flags & _BODY_SUBST:
        data = _restore(data, texts.pairs())
    if not flags & _BODY_KEY:
        return data, None
    at = _key_at(data)
    return data[: at - 1], data[at:].decode()


def body_key(body: bytes, texts: Texts, dictionaries: Dictionaries) -> str | None:
    """The dedupe key alone that ``body`` holds (``unpack_body``'s, None the same way), its payload left
    as it is: what a read of evidence keys by id needs."""
    return body_keys([body], [texts], dictionaries)[0]


def body_keys(
    bodies: Sequence[bytes], texts: Sequence[Texts], dictionaries: Dictionaries
) -> list[str | None]:
    """``body_key`` of each of ``bodies`` (with the same row's ``texts``), in order; a batch's frames
    decompressed together (``_bodies_data``)."""
    return [
        _held_key(flags, data, one)
        for (flags, data), one in zip(_bodies_data(bodies, dictionaries), texts, strict=True)
    ]


def _held_key(flags: int, data: bytes, texts: Texts) -> str | None:
    """``body_key`` of a body's flags and decompressed data."""
    if not flags & _BODY_KEY:
        return None
    key = data[_key_at(data) :]
    if flags & _BODY_SUBST and _CONTROL.search(key) is not None:  # it holds marks: the row's texts
        pairs = list(_text_pairs(texts.pod_uid, texts.node, texts.name, texts.namespace))
        if (
            b"\x05" in key
        ):  # the time's mark (the texts' own restore puts none back: they hold no control byte)
            pairs.append(_stamp_pair(texts.observed_at))
        key = _restore(key, pairs)
    return key.decode()


# -- a writer's and a reader's view of chains ----------------------------------------------------------------


@dataclass
class _Last:
    id: int
    payload: Any
    depth: int  # rows since the last whole one (0: this one is whole)
    span: Any  # the partition it is in: a base is never in another one (retention drops them whole)


@dataclass
class Encoder:
    """What a store writer keeps to encode a cluster's rows: each chain's last stored row, the dictionary
    of each kind, the name table. A row is stored as a patch against its chain's last row when that row is
    in the same ``span`` (partition, or the day in the default partition and on SQLite: retention drops
    or cuts whole spans, ``partitions.retention_cut``) and fewer than ``every - 1`` patches follow the last
    whole row; so any row is rebuilt from at most ``every`` rows, all in its span. After a restart the
    chains are empty: each object's next row is whole.

    **A base is a row that exists.** The writer stores a cluster's batches on several threads, and a batch
    can fail, or lose rows found stored already. So rows are encoded in a ``Batch`` (``begin``): a row's
    base is an earlier row of the same batch, or a row of a batch that committed (``Batch.commit``, called
    after the database committed it); what a batch that did not commit encoded is forgotten, and a batch
    whose set of rows changed is encoded again in a new ``Batch``. The committed chains are shared by the
    cluster's threads under a lock. Names are the caller's to store before the rows that name them
    (``NameTable.take_added``, committed on their own: the table only grows, and a name a failed batch
    added is only unused)."""

    names: NameTable
    dictionaries: Dictionaries
    every: int = 16
    kind_dictionary: dict[str, int] = field(default_factory=dict)
    last: dict[tuple[str, str], _Last] = field(default_factory=dict)  # committed rows only
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def begin(self) -> Batch:
        """A batch to encode rows in (in the order of their ids), then ``commit`` or drop."""
        return Batch(self)

    def encode(self, row_id: int, row: Row, span: Any = None) -> Compact:
        """One row as a batch of its own, committed at once (rows stored one by one, in id order)."""
        batch = self.begin()
        compact = batch.encode(row_id, row, span)
        batch.commit()
        return compact

    def committed(self, chain: tuple[str, str]) -> _Last | None:
        with self._lock:
            return self.last.get(chain)

    def _commit(self, heads: Mapping[tuple[str, str], _Last]) -> None:
        with self._lock:
            for chain, head in heads.items():
                prior = self.last.get(chain)
                # Another thread's batch of higher ids may have committed first: a chain only moves forward.
                if prior is None or prior.id < head.id:
                    self.last[chain] = head


class Batch:
    """Rows of one store batch being encoded (``Encoder.begin``); bases come from the batch's own earlier
    rows or from the encoder's committed rows, never from another batch still in flight."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.heads: dict[tuple[str, str], _Last] = {}
        self._done = False

    def encode(self, row_id: int, row: Row, span: Any = None) -> Compact:
        if self._done:
            raise RuntimeError("this batch was committed: begin another")
        enc = self.encoder
        chain = chain_key(row)
        prior = None
        if chain is not None:
            prior = self.heads.get(chain) or enc.committed(chain)
        base = None
        if prior is not None and prior.span == span and prior.depth < enc.every - 1 and prior.id < row_id:
            base = (row_id - prior.id, prior.payload)
        compact, is_patch = encode(
            row, enc.names, enc.dictionaries, dictionary=enc.kind_dictionary.get(row.kind, 0), base=base
        )
        if chain is not None:
            depth = prior.depth + 1 if is_patch and prior is not None else 0
            self.heads[chain] = _Last(row_id, row.payload, depth, span)
        return compact

    def commit(self) -> None:
        """The batch's rows are stored (its transaction committed): later batches may use them as bases."""
        if not self._done:
            self._done = True
            self.encoder._commit(self.heads)


def rebuild(row_id: int, rows: Mapping[int, Compact], names: NameTable, dictionaries: Dictionaries) -> Row:
    """Row ``row_id`` of ``rows`` (compact rows by id), following its chain of bases back to a whole row."""
    chain = [row_id]
    while (distance := base_distance(rows[chain[-1]])) is not None:
        base_id = chain[-1] - distance
        if base_id not in rows:
            raise CorruptRow(f"row {chain[-1]}'s base {base_id} is missing")
        chain.append(base_id)
    payload: Any = None
    row: Row | None = None
    for rid in reversed(chain):
        row = decode(rows[rid], names, dictionaries, payload)
        payload = row.payload
    assert row is not None
    return row
