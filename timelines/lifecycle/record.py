"""``record``: the decorator of the lifecycle core's per-pod records (the facts read from observations,
the worker lane's marks and bounds, the timeline's intervals, markers and findings). Pure: the standard
library only.

They are made by the thousand in every derive batch: a snapshot, each container status, run and
condition of it, every piece of evidence the worker lane weighs. A frozen dataclass sets each field
through ``object.__setattr__`` when it is made, which costs five times what a plain slots dataclass
costs (a snapshot's 22 fields: 3 µs against 0.6 µs). A record, written ``@record(frozen=True)``, is
therefore two things:

- to the type checker, ``dataclasses.dataclass`` itself (the import below, read only by it): frozen, so
  code that assigns to a field of one does not pass ``mypy``;
- at run time, a plain slots dataclass with the frozen one's equality and hash (``record`` below).

Why the type checker must see ``dataclasses.dataclass`` by name: mypyc (``make core-ext``) makes a class
of a compiled module a native class, whose fields compiled code reads straight from the object, only
when every decorator of it is one it knows, and the only dataclass decorator it knows is that one. Under a
decorator of our own (``dataclass_transform``, as this was before) every record stayed a Python class,
and compiled code read each field through Python's generic attribute look-up: a fifth of the core's time
(docs/performance-history.md, Derivation, eighth round). mypyc still calls the decorator found at run time (the
function below), so a compiled record is native *and* unfrozen: made as fast as a plain one.

A cache set on first use, through ``object.__setattr__`` as on a frozen value, stays possible.
``Observation``, the contract every collector builds, and ``PodTimeline`` stay really frozen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["record"]

if TYPE_CHECKING:
    from dataclasses import dataclass as record
else:
    from dataclasses import dataclass

    def record(*, frozen: bool) -> Any:
        """A slots dataclass, compared and hashed like a frozen one (``frozen`` must say True: it is what
        the type checker holds the record to)."""
        if frozen is not True:
            raise TypeError("a record is frozen to the type checker: write @record(frozen=True)")
        return dataclass(slots=True, unsafe_hash=True)
