"""Ingest tokens: made by ``manage.py ingest_token``, stored as a hash, checked in constant time."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from collectors.models import BadIngestToken, IngestToken, hash_token
from timelines.models import Cluster

pytestmark = pytest.mark.django_db


def make_token(cluster: str, *extra: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command("ingest_token", cluster, *extra, stdout=out, stderr=err)
    assert "shown once" in err.getvalue()
    return out.getvalue().strip()


def test_command_prints_a_token_for_a_new_cluster_and_keeps_only_its_hash():
    token = make_token("edge-1", "--name", "otel-collector")
    assert token.startswith("pli_") and len(token) > 40
    cluster = Cluster.objects.get(name="edge-1")
    row = IngestToken.objects.get(cluster=cluster)
    assert (row.name, row.key_hash) == ("otel-collector", hash_token(token))
    stored_text = " ".join(str(v) for v in IngestToken.objects.values_list().get())
    assert token not in stored_text and token.split("_", 2)[2] not in stored_text
    assert IngestToken.authenticate(f"Bearer {token}") == row
    assert IngestToken.objects.get().last_used_at is not None


def test_tokens_of_an_existing_cluster_are_independent():
    first, second = make_token("prod"), make_token("prod")
    assert first != second and Cluster.objects.filter(name="prod").count() == 1
    assert IngestToken.authenticate(f"bearer {second}").cluster.name == "prod"


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        (None, "missing Authorization header"),
        ("", "missing Authorization header"),
        ("Token abc", "must be 'Bearer <ingest token>'"),
        ("Bearer ", "must be 'Bearer <ingest token>'"),
        ("Bearer pli_", "unknown"),
        ("Bearer pli_{key}_wrong-secret", "unknown"),
    ],
)
def test_bad_headers_say_what_is_wrong(header: str | None, fragment: str):
    token = make_token("prod")
    key = token.split("_")[1]
    with pytest.raises(BadIngestToken, match=fragment.replace("(", r"\(")):
        IngestToken.authenticate(header.format(key=key) if header else header)


def test_list_and_revoke():
    token = make_token("prod", "--name", "fluent-bit")
    key = token.split("_")[1]
    out = io.StringIO()
    call_command("ingest_token", "prod", "--list", stdout=out)
    assert key in out.getvalue() and "active" in out.getvalue() and "fluent-bit" in out.getvalue()
    call_command("ingest_token", "prod", "--revoke", key, stdout=io.StringIO())
    with pytest.raises(BadIngestToken, match="revoked"):
        IngestToken.authenticate(f"Bearer {token}")
    with pytest.raises(CommandError, match="no active token"):
        call_command("ingest_token", "prod", "--revoke", key, stdout=io.StringIO())


def test_invalid_or_read_only_cluster_is_refused():
    with pytest.raises(CommandError, match="cluster 'Not A Name!'"):
        call_command("ingest_token", "Not A Name!", stdout=io.StringIO(), stderr=io.StringIO())
    Cluster.objects.create(name="incident-7", origin=Cluster.Origin.IMPORTED, read_only=True)
    with pytest.raises(CommandError, match="read-only"):
        call_command("ingest_token", "incident-7", stdout=io.StringIO(), stderr=io.StringIO())
