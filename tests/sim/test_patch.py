"""The demo cluster's three patch formats (demo_cluster/patch.py), from their specifications: RFC 7386's
examples, RFC 6902 errors, and Kubernetes' strategic merge patch directives."""

from __future__ import annotations

from typing import Any

import pytest

from demo_cluster.patch import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    PatchError,
    apply_patch,
    merge_patch,
    strategic_merge_patch,
)

# RFC 7386 appendix A: (target, patch, result)
RFC7386 = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC7386)
def test_merge_patch_follows_rfc7386(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


def test_merge_patch_does_not_modify_its_input() -> None:
    target = {"metadata": {"labels": {"a": "1"}}}
    apply_patch(target, {"metadata": {"labels": {"a": None}}}, MERGE_PATCH)
    assert target == {"metadata": {"labels": {"a": "1"}}}


POD = {
    "metadata": {"name": "p", "finalizers": ["a/x", "b/y"], "labels": {"app": "web"}},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "nginx:1",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            },
            {"name": "sidecar", "image": "busybox:1"},
        ],
        "tolerations": [{"key": "k", "operator": "Exists"}],
    },
    "status": {
        "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]
    },
}


def test_strategic_merge_merges_lists_by_their_merge_key() -> None:
    out = strategic_merge_patch(
        POD,
        {
            "spec": {
                "containers": [{"name": "app", "image": "nginx:2", "env": [{"name": "B", "value": "3"}]}]
            },
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}]
            },
        },
    )
    app, sidecar = out["spec"]["containers"]
    assert app["image"] == "nginx:2" and app["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "3"},
    ]
    assert sidecar == {"name": "sidecar", "image": "busybox:1"}
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
        {"type": "Initialized", "status": "True"},
    ]
    # tolerations carry no patch strategy: a list in the patch replaces them
    replaced = strategic_merge_patch(POD, {"spec": {"tolerations": [{"key": "z", "operator": "Exists"}]}})
    assert replaced["spec"]["tolerations"] == [{"key": "z", "operator": "Exists"}]


def test_strategic_merge_directives() -> None:
    out = strategic_merge_patch(
        POD,
        {
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a/x"], "finalizers": ["c/z"]},
            "spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]},
            "status": {"$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Ready"}]},
        },
    )
    assert out["metadata"]["finalizers"] == ["b/y", "c/z"]  # a primitive merge list: a set
    assert [c["name"] for c in out["spec"]["containers"]] == ["app"]
    assert [c["type"] for c in out["status"]["conditions"]] == ["PodScheduled", "Ready"]
    assert strategic_merge_patch(POD, {"metadata": {"labels": {"$patch": "replace", "tier": "db"}}})[
        "metadata"
    ]["labels"] == {"tier": "db"}
    retained = strategic_merge_patch(POD, {"spec": {"$retainKeys": ["containers"], "containers": []}})
    assert set(retained["spec"]) == {"containers"}
    assert strategic_merge_patch(POD, {"metadata": {"labels": None}})["metadata"] == {
        "name": "p",
        "finalizers": ["a/x", "b/y"],
    }


def test_strategic_merge_refuses_an_item_without_its_merge_key() -> None:
    with pytest.raises(PatchError) as err:
        apply_patch(POD, {"spec": {"containers": [{"image": "x"}]}}, STRATEGIC_MERGE_PATCH)
    assert err.value.code == 422 and "does not contain declared merge key: name" in err.value.message


def test_json_patch_applies_rfc6902_and_names_what_failed() -> None:
    out = apply_patch(
        POD,
        [
            {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:3"},
            {"op": "remove", "path": "/metadata/labels/app"},
        ],
        JSON_PATCH,
    )
    assert out["spec"]["containers"][0]["image"] == "nginx:3" and out["metadata"]["labels"] == {}
    with pytest.raises(PatchError) as failed:
        apply_patch(POD, [{"op": "test", "path": "/metadata/name", "value": "q"}], JSON_PATCH)
    assert failed.value.code == 422 and "the JSON patch could not be applied" in failed.value.message
    with pytest.raises(PatchError) as missing:
        apply_patch(POD, [{"op": "remove", "path": "/spec/nothing"}], JSON_PATCH)
    assert missing.value.code == 422
    with pytest.raises(PatchError) as shape:
        apply_patch(POD, {"op": "remove"}, JSON_PATCH)
    assert shape.value.code == 400


def test_unknown_patch_type_is_415() -> None:
    with pytest.raises(PatchError) as err:
        apply_patch(POD, {"a": 1}, "application/apply-patch+yaml")
    assert err.value.code == 415 and "server-side apply is not served" in err.value.message
