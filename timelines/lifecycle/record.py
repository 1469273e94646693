"""``record``: the decorator of the lifecycle core's per-pod records (the facts read from observations,
the worker lane's marks and bounds, the timeline's intervals, markers and findings). Pure: the standard
library only.

They are made by the thousand in every derive batch: a snapshot, each container status, run and
condition of it, every piece of evidence the worker lane weighs. A frozen dataclass sets each field
through ``object.__setattr__`` when it is made, which costs five times what a plain slots dataclass
costs (a snapshot's 22 fields: 3 µs against 0.6 µs). A ``record`` is a plain slots dataclass at run
time, with the frozen one's equality and hash, and a frozen dataclass to the type checker: code that
assigns to a field of one does not pass ``mypy``. (A cache set on first use, through
``object.__setattr__`` as on a frozen value, stays possible.)

The timeline's intervals, markers and findings are records too (a pod has tens of them, and settling a
lane copies them); ``Observation``, the contract every collector builds, and ``PodTimeline`` stay frozen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[T]) -> type[T]:
    """A slots dataclass, compared and hashed like a frozen one, and frozen to the type checker."""
    return dataclass(slots=True, unsafe_hash=True)(cls)
