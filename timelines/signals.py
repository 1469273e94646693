"""Signals between the store and the derive stage (connected in ``TimelinesConfig.ready``).

``observations_stored(cluster_id)`` is sent after a transaction that stored new observations (and marked
their keys dirty) commits: the derive stage takes it as a request to run. The store cannot call the derive
stage itself (the derive stage writes through the store), so the dependency runs one way.
"""

from __future__ import annotations

from django.dispatch import Signal

observations_stored = Signal()
DERIVE_RECEIVER = "podlife-derive-stage"  # the dispatch uid of the derive stage's receiver
