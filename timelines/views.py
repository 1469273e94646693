from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from timelines.models import Cluster, Observation, Pod


def landing(request: HttpRequest) -> HttpResponse:
    """What podlife collects and how to connect a cluster, with what this instance holds so far."""
    context = {
        "clusters": Cluster.objects.all()[:50],
        "observation_count": Observation.objects.count(),
        "pod_count": Pod.objects.count(),
        "database": connection.vendor,
    }
    return render(request, "landing.html", context)


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok", "database": connection.vendor})
