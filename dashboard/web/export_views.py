"""Export and import over HTTP: the dashboard's Export button, the REST endpoints, the upload form.

* ``GET c/<cluster>/export?node=N|namespace=NS|pod=UID&pod=UID|workload=K/NS/N|pdb=NS/N&since=&until=&format=``
  streams the bundle (``format``: ``json`` (default), ``json.gz``, ``csv``, ``html``) as a download;
  ``tz`` (``utc`` or an IANA name) is the zone an HTML file opens in.
  Past ``SYNC_MAX_PODS`` pods it answers 413 and names the job endpoint instead.
* ``POST c/<cluster>/export/jobs`` (same parameters, form or query) starts a background export and
  answers 202 ``{job, status_url, download_url}``; ``GET export/jobs/<job>`` is its status and progress,
  ``GET export/jobs/<job>/download`` the file once done. A job is visible to the user who started it.
* ``GET import`` is the upload form; ``POST import`` (multipart ``bundle``, optional ``name``) imports a
  JSON bundle as a read-only cluster. Staff only (it creates a cluster).

Every endpoint takes a session or ``Authorization: Bearer TOKEN`` (dashboard/web/access.py). Exports hold only
what the user may read: other namespaces are left out, node lanes need the whole cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from dashboard import tasks
from dashboard.export import (
    CONTENT_TYPES,
    FORMATS,
    Scope,
    ScopeError,
    filename,
    gzip_chunks,
    iter_export,
    jobs,
)
from dashboard.export.importer import BundleConflict, BundleError, import_incident, max_bytes
from dashboard.export.scope import parse_window, parse_zone, resolve
from dashboard.queries import NotFound
from dashboard.web.access import Access, BadToken, access_for, user_from_bearer
from timelines.models import Cluster

SYNC_MAX_PODS = 2000  # past this a download would hold a request for too long: use a job


def _authenticated(fn: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Bearer token, else session (CSRF-checked on POST); anonymous: login page or 401 JSON."""

    @wraps(fn)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        header = request.headers.get("Authorization", "")
        if header:
            try:
                request.user = user_from_bearer(header)
            except BadToken as exc:
                return JsonResponse({"error": str(exc)}, status=401)
        else:
            if not request.user.is_authenticated:
                if _wants_json(request):
                    return JsonResponse({"error": "authentication required"}, status=401)
                return redirect_to_login(request.get_full_path())
            if request.method == "POST":
                rejected = CsrfViewMiddleware(lambda r: HttpResponse()).process_view(
                    request, fn, args, kwargs
                )
                if rejected is not None:
                    return rejected
        return fn(request, access_for(request), *args, **kwargs)

    wrapper.csrf_exempt = True  # type: ignore[attr-defined]  # checked above for cookie sessions only
    return wrapper


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "") or bool(
        request.headers.get("Authorization")
    )


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def _readable_cluster(access: Access, name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None or not access.can_cluster(cluster):
        raise NotFound(f"no cluster named {name!r}")
    return cluster


def parse_scope(params: Any) -> Scope:
    """The scope from request parameters: exactly one of node, namespace, pod (repeatable), workload, pdb."""
    given = [k for k in ("node", "namespace", "pod", "workload", "pdb") if params.get(k)]
    if len(given) != 1:
        raise ScopeError(
            "give exactly one of node, namespace, pod (repeatable), workload (KIND/NS/NAME), pdb (NS/NAME)"
        )
    kind = given[0]
    return Scope.pods(params.getlist("pod")) if kind == "pod" else Scope.one(kind, params.get(kind))


def _format(params: Any) -> tuple[str, bool]:
    fmt = params.get("format") or "json"
    if fmt == "json.gz":
        return "json", True
    if fmt not in FORMATS:
        raise ScopeError(f"format {fmt!r} is not one of {[*FORMATS, 'json.gz']}")
    return fmt, False


@_authenticated
def export_download(request: HttpRequest, access: Access, cluster: str) -> HttpResponseBase:
    if request.method != "GET":
        return _error(405, "GET only")
    try:
        c = _readable_cluster(access, cluster)
        scope = parse_scope(request.GET)
        fmt, gz = _format(request.GET)
        since, until = parse_window(request.GET.get("since") or "", request.GET.get("until") or "")
        tz = parse_zone(request.GET.get("tz"))
        resolved = resolve(c, scope, since, until, namespaces=access.namespace_filter(c))
    except (ScopeError, NotFound) as exc:
        return _error(404 if isinstance(exc, NotFound) else 400, str(exc))
    if len(resolved.pods) > SYNC_MAX_PODS:
        return _error(
            413,
            f"{len(resolved.pods)} pods are more than {SYNC_MAX_PODS} for a direct download: POST the same "
            f"parameters to {reverse('export-job-create', args=[c.name])} to export in the background",
        )
    chunks = iter_export(resolved, fmt, tz=tz)
    response = StreamingHttpResponse(
        gzip_chunks(chunks) if gz else chunks, content_type=CONTENT_TYPES["json.gz" if gz else fmt]
    )
    response["Content-Disposition"] = f'attachment; filename="{filename(c, scope, since, fmt, gz=gz)}"'
    response["Cache-Control"] = "no-store"
    return response


def _job_urls(job_id: str) -> dict[str, str]:
    return {
        "status_url": reverse("export-job-status", args=[job_id]),
        "download_url": reverse("export-job-download", args=[job_id]),
    }


@_authenticated
def export_job_create(request: HttpRequest, access: Access, cluster: str) -> HttpResponse:
    if request.method != "POST":
        return _error(405, "POST only")
    params = request.POST if request.POST else request.GET
    try:
        c = _readable_cluster(access, cluster)
        scope = parse_scope(params)
        fmt, gz = _format(params)
        job_id = tasks.start_export(
            c.name,
            scope,
            params.get("since") or "",
            params.get("until") or "",
            fmt,
            gz=gz,
            user_id=request.user.pk,
            namespaces=access.namespace_filter(c),
            tz=params.get("tz") or "utc",
        )
    except (ScopeError, NotFound) as exc:
        return _error(404 if isinstance(exc, NotFound) else 400, str(exc))
    return JsonResponse({"job": job_id, **_job_urls(job_id)}, status=202)


def _own_job(request: HttpRequest, job_id: str) -> dict[str, Any] | None:
    try:
        status = jobs.job_status(job_id)
    except ValueError:
        return None
    if status is None or (status.get("user_id") != request.user.pk and not request.user.is_superuser):
        return None
    return status


@_authenticated
def export_job_status(request: HttpRequest, access: Access, job_id: str) -> HttpResponse:
    status = _own_job(request, job_id)
    if status is None:
        return _error(404, f"no export job {job_id!r}")
    public = {
        k: status.get(k)
        for k in (
            "id",
            "state",
            "cluster",
            "scope",
            "since",
            "until",
            "format",
            "progress",
            "bytes",
            "error",
            "created_at",
            "finished_at",
        )
    }
    return JsonResponse({**public, **_job_urls(job_id)})


@_authenticated
def export_job_download(request: HttpRequest, access: Access, job_id: str) -> HttpResponseBase:
    status = _own_job(request, job_id)
    if status is None:
        return _error(404, f"no export job {job_id!r}")
    path = jobs.job_file(job_id)
    if path is None or not path.exists():
        return _error(409, f"export job {job_id} is {status['state']}, not done")
    return FileResponse(path.open("rb"), as_attachment=True, filename=status["file"])


@_authenticated
def import_bundle(request: HttpRequest, access: Access) -> HttpResponse:
    if not (request.user.is_staff or request.user.is_superuser):
        return _error(403, "importing a bundle creates a cluster: staff only")
    if request.method == "GET":
        return render(request, "export/import_form.html", {"limit": max_bytes()})
    if request.method != "POST":
        return _error(405, "GET or POST")
    upload = request.FILES.get("bundle")
    if upload is None:
        return _error(400, "no file: send the bundle as multipart field 'bundle'")
    if upload.size is not None and upload.size > max_bytes():
        return _error(413, f"{upload.name} is {upload.size:,} bytes; the import limit is {max_bytes():,}")
    try:
        with upload.open("rb") as f:
            result = import_incident(f, name=(request.POST.get("name") or "").strip() or None)
    except BundleError as exc:
        status = 409 if isinstance(exc, BundleConflict) else 400  # the name is taken: another import won
        if _wants_json(request):
            return _error(status, f"refused: {exc}")
        return render(
            request, "export/import_form.html", {"limit": max_bytes(), "error": str(exc)}, status=status
        )
    body = {
        "cluster": result.cluster.name,
        "pods": result.pods,
        "observations": result.observations,
        "differences": result.differences,
        "notes": result.notes,
        "imported_at": timezone.now().isoformat(),
    }
    if _wants_json(request):
        return JsonResponse(body, status=201)
    try:
        next_url = reverse("cluster", args=[result.cluster.name])
    except NoReverseMatch:
        next_url = None
    return render(
        request,
        "export/import_form.html",
        {"limit": max_bytes(), "result": body, "next_url": next_url},
        status=201,
    )
