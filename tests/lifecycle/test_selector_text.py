"""A PDB's selector as the pages print it: as kubectl writes a metav1.LabelSelector
(``labels.Selector.String()`` of k8s.io/apimachinery: requirements sorted by key, joined by commas; ``in``,
``notin``, a bare key for Exists, ``!key`` for DoesNotExist, values sorted). Moved from
tests/web/test_dense_views.py beside the lifecycle core it tests, where ``make mutation`` runs it."""

from __future__ import annotations

from typing import Any

import pytest

from timelines.lifecycle.cluster_objects import selector_text


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        ({"matchLabels": {"app": "web"}}, "app=web"),
        (
            {
                "matchLabels": {"tier": "front", "app": "web"},
                "matchExpressions": [
                    {"key": "track", "operator": "In", "values": ["stable", "canary"]},
                    {"key": "legacy", "operator": "DoesNotExist"},
                    {"key": "zone", "operator": "NotIn", "values": ["b"]},
                    {"key": "gpu", "operator": "Exists"},
                ],
            },
            "app=web,gpu,!legacy,tier=front,track in (canary,stable),zone notin (b)",
        ),
        ({}, "(every pod)"),  # policy/v1: an empty selector selects every pod of the namespace
        (None, "(none)"),
    ],
)
def test_a_selector_reads_as_kubectl_writes_it(selector: Any, text: str) -> None:
    assert selector_text(selector) == text
