"""Concurrent imports under one name (issue #18, finding 11): one 201 and clear 409s, never a 500 —
four clients posting the same bundle at once to the real ASGI server, each on its own thread."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from django.contrib.auth.models import User

from dashboard.web.access import create_token
from tests.export.conftest import source_cluster  # noqa: F401  (fixture)
from tests.export.helpers import export_json
from timelines.models import Cluster

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_databases]
CLIENTS = 4


def test_concurrent_imports_under_one_name_give_one_201_and_409s(
    live_server_asgi: Any,
    source_cluster: Any,  # noqa: F811
) -> None:
    bundle = export_json(source_cluster)
    token = create_token(User.objects.create_user("importer", password="pw", is_staff=True))
    start = threading.Barrier(CLIENTS)

    def post(_: int) -> requests.Response:
        start.wait()
        return requests.post(
            f"{live_server_asgi.url}/import",
            files={"bundle": ("incident.json", bundle, "application/json")},
            data={"name": "copy"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
        )

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(post, range(CLIENTS)))
    assert sorted(a.status_code for a in answers) == [201] + [409] * (CLIENTS - 1), [
        a.text[:200] for a in answers
    ]
    for a in answers:
        if a.status_code == 409:
            assert a.json()["error"] == (
                "refused: a cluster named 'copy' already exists; import under another name with --as NAME"
            )
    assert Cluster.objects.filter(name="copy").count() == 1
    won = next(a for a in answers if a.status_code == 201).json()
    assert won["cluster"] == "copy" and won["pods"] > 0


def test_a_user_who_is_not_staff_is_refused_before_the_upload_is_read(
    live_server_asgi: Any,
    source_cluster: Any,  # noqa: F811
) -> None:
    token = create_token(User.objects.create_user("reader", password="pw"))
    answer = requests.post(
        f"{live_server_asgi.url}/import",
        files={"bundle": ("incident.json", export_json(source_cluster), "application/json")},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert (
        answer.status_code == 403
        and answer.json()["error"] == "importing a bundle creates a cluster: staff only"
    )
