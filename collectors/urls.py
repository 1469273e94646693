from __future__ import annotations

from django.urls import path

from collectors import views

urlpatterns = [
    path("metrics", views.metrics, name="collector-metrics"),
]
