from __future__ import annotations

from django.urls import path

from dashboard import metrics

urlpatterns = [
    path("metrics", metrics.metrics, name="collector-metrics"),
]
