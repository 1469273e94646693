"""Ingestion endpoints, included at the site root (OTLP exporters append ``/v1/traces`` to a base URL)."""

from __future__ import annotations

from django.urls import path

from collectors import ingest_audit, ingest_http

urlpatterns = [
    path("v1/traces", ingest_http.otlp_traces, name="otlp-traces"),
    path("ingest/v1/kubelet-logs", ingest_http.kubelet_logs, name="ingest-kubelet-logs"),
    path("ingest/v1/audit", ingest_audit.audit_webhook, name="ingest-audit"),
]
