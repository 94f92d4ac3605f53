"""The operators' diagnosis API (FastAPI): a thin HTTP layer over ``DiagnosisService``. No globals.

``api_app(service, token=...)`` serves a service built elsewhere (the ``Platform``, ``inferslice
api``); ``create_app(store, topology, ...)`` builds the service too (tests, benchmarks). Routes are
sync functions on purpose: SQLite calls block, so FastAPI runs them on its thread pool and the
store's lock serialises them. The exception is ``POST /v1/snapshots``, the one hot write: it
classifies in memory on the event loop and awaits the store's group commit (``Store.submit``), so
it holds no thread while its writes wait for the database, and answers 201 only once they are
durable. Mutating endpoints (``PUT .../reference``, ``POST /v1/snapshots``,
the Alertmanager webhook ``POST /v1/alerts``) need the bearer token; reads are open.

The OpenAPI document is meant to be true (schemathesis checks it in CI): every status a route can
answer is documented, the snapshot body has its real schema, and undocumented methods get 405.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from inferslice import __version__
from inferslice.bottleneck import DEFAULT, HysteresisPolicy, Thresholds
from inferslice.bottleneck.episodes import DEFAULT_HYSTERESIS
from inferslice.bottleneck.reference import DEFAULT_LEARNING, LearningPolicy
from inferslice.diagnosis import Diagnosis
from inferslice.errors import InputError, SourceUnavailable
from inferslice.service.console.links import LinkTelemetry
from inferslice.service.console.routes import console_feed, mount_console
from inferslice.service.diagnosis import DiagnosisService, tier_of
from inferslice.service.http import UNAUTHORIZED, BearerAuth, MethodNotAllowed, RequestMetrics
from inferslice.service.metrics import ApiMetrics
from inferslice.service.models import (
    BAD_BODY,
    ELSEWHERE,
    NOT_FOUND,
    SNAPSHOT_DESCRIPTION,
    SNAPSHOT_EXAMPLE,
    SNAPSHOT_REQUEST_BODY,
    UNAVAILABLE,
    UNPROCESSABLE,
    AlertmanagerWebhook,
    ReferenceIn,
)
from inferslice.service.store import Store
from inferslice.service.topology_view import topology_view
from inferslice.snapshot import SliceSnapshot, snapshot_from_dict
from inferslice.topology import Topology

SnapshotBody = Annotated[dict[str, Any], Body(description=SNAPSHOT_DESCRIPTION, examples=[SNAPSHOT_EXAMPLE])]


def _json(content: Any, status_code: int = 200) -> Response:
    # Pre-encoded: FastAPI's generic encoder costs ~1 ms per diagnosis (its evidence list), which
    # dominated request time; our bodies are plain JSON types already.
    return Response(json.dumps(content, separators=(",", ":")), status_code=status_code, media_type="application/json")


def _unprocessable(err: InputError) -> HTTPException:
    # Same shape as FastAPI's own validation errors, so clients handle one format.
    loc: list[str] = ["body", err.field] if err.field else ["body"]
    return HTTPException(status_code=422, detail=[{"loc": loc, "msg": str(err), "type": "value_error"}])


def _parse_snapshot(body: dict[str, Any]) -> tuple[SliceSnapshot, Any]:
    try:
        return snapshot_from_dict(body), body.get("id")
    except InputError as err:
        raise _unprocessable(err) from None


def _diagnosis_out(diagnosis: Diagnosis, raw_id: Any) -> dict[str, Any]:
    out = diagnosis.to_dict()
    out["id"] = raw_id  # the contract copies the id as given (an integer stays an integer)
    return out


def create_app(
    store: Store,
    topology: Topology | None,
    clock: Callable[[], float] = time.time,
    *,
    thresholds: Thresholds = DEFAULT,
    hysteresis: HysteresisPolicy = DEFAULT_HYSTERESIS,
    learning: LearningPolicy | None = DEFAULT_LEARNING,
    token: str | None = None,
    console_links: LinkTelemetry | None = None,
) -> FastAPI:
    """A ``DiagnosisService`` over ``store`` and the API over it."""
    return api_app(DiagnosisService(store, topology, clock, thresholds, hysteresis, learning), token=token, console_links=console_links)


def api_app(service: DiagnosisService, *, token: str | None = None, console_links: LinkTelemetry | None = None) -> FastAPI:
    """The HTTP layer over ``service``; ``token``: the bearer token mutations need (None: read-only);
    ``console_links``: WAN telemetry for the console's topology (None: configured RTTs only)."""
    store, topology, clock = service.store, service.topology, service.clock
    metrics = ApiMetrics(store)
    authorized = [Depends(BearerAuth(token))]
    app = FastAPI(
        title="inferslice diagnosis API",
        version=__version__,
        description="Per-slice snapshots, bottleneck diagnoses and episodes, topology, Alertmanager alerts and control actions.",
    )
    app.add_middleware(RequestMetrics, metrics=metrics)
    app.add_middleware(MethodNotAllowed, routes=app.router.routes)
    app.state.service = service  # for in-process wiring (a collector loop's sink is ``service.ingest``)
    app.state.metrics = metrics

    @app.exception_handler(SourceUnavailable)
    async def unavailable(request: Request, exc: SourceUnavailable) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": str(exc)})

    def require_slice(slice_name: str) -> None:
        if not service.is_known(slice_name):
            raise HTTPException(status_code=404, detail=f"unknown slice {slice_name!r}")

    # -- health ------------------------------------------------------------------------------
    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], responses=UNAVAILABLE)
    def readyz() -> JSONResponse:
        ok = store.ping()
        return JSONResponse(status_code=200 if ok else 503, content={"status": "ready" if ok else "database unreachable"})

    @app.get(
        "/metrics",
        tags=["health"],
        response_class=PlainTextResponse,
        responses={200: {"description": "Prometheus text exposition", "content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    def prometheus_metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    # -- slices ------------------------------------------------------------------------------
    @app.get("/v1/slices", tags=["slices"])
    def list_slices() -> Response:
        latest = store.latest_diagnoses()
        out = []
        for name in service.known_slices():
            diag = latest.get(name)
            out.append(
                {
                    "slice": name,
                    "configured": tier_of(topology, name) is not None,
                    "regime": diag["regime"] if diag else None,
                    "confidence": diag["confidence"] if diag else None,
                    "slo": diag["slo"] if diag else None,
                    "ts": diag["ts"] if diag else None,
                }
            )
        return _json(out)

    @app.get("/v1/slices/{slice_name}", tags=["slices"], responses={**NOT_FOUND, **ELSEWHERE})
    def get_slice(slice_name: str) -> Response:
        # Sharded (``inferslice api --shard-groups``): a slice of a group another replica holds is answered there.
        owner = getattr(app.state, "slice_owner", None)
        elsewhere = owner(slice_name) if owner is not None else None
        if elsewhere is not None:
            return Response(status_code=307, headers={"Location": f"{elsewhere}/v1/slices/{slice_name}"})
        require_slice(slice_name)
        tier = tier_of(topology, slice_name)
        snap = store.latest_snapshot(slice_name)
        ref = service.current_reference(slice_name)
        open_eps = [e for e in store.episodes(slice_name, limit=1) if e["open"]]
        return _json(
            {
                "slice": slice_name,
                "configured": tier is not None,
                "tier": tier.model_dump(mode="json") if tier is not None else None,
                "snapshot": snap.to_dict() if snap is not None else None,
                "reference": asdict(ref) if ref is not None else None,
                "diagnosis": store.latest_diagnosis(slice_name),
                "episode": open_eps[0] if open_eps else None,
            }
        )

    @app.get("/v1/slices/{slice_name}/diagnoses", tags=["slices"], responses=NOT_FOUND)
    def list_diagnoses(
        slice_name: str,
        since: Annotated[float | None, Query(description="unix seconds, inclusive")] = None,
        until: Annotated[float | None, Query(description="unix seconds, inclusive")] = None,
        limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
    ) -> Response:
        require_slice(slice_name)
        return _json(store.diagnoses(slice_name, since, until, limit))

    @app.get("/v1/slices/{slice_name}/episodes", tags=["slices"], responses=NOT_FOUND)
    def list_episodes(slice_name: str, limit: Annotated[int, Query(ge=1, le=10000)] = 1000) -> Response:
        require_slice(slice_name)
        return _json(store.episodes(slice_name, limit))

    @app.get("/v1/slices/{slice_name}/reference", tags=["slices"], responses=NOT_FOUND)
    def get_reference(slice_name: str) -> Response:
        require_slice(slice_name)
        ref = service.current_reference(slice_name)
        if ref is None:
            raise HTTPException(status_code=404, detail=f"no reference for slice {slice_name!r}")
        return _json(asdict(ref))

    @app.put("/v1/slices/{slice_name}/reference", tags=["slices"], dependencies=authorized, responses={**BAD_BODY, **UNAUTHORIZED})
    def put_reference(slice_name: str, body: ReferenceIn) -> Response:
        """Configure a slice's reference; a configured reference is never replaced by learning."""
        return _json(asdict(service.set_reference(slice_name, body.to_reference())))

    # -- diagnosis ---------------------------------------------------------------------------
    @app.post("/v1/diagnose", tags=["diagnosis"], responses={**BAD_BODY, **UNPROCESSABLE}, openapi_extra=SNAPSHOT_REQUEST_BODY)
    def diagnose(body: SnapshotBody) -> Response:
        """Classify one snapshot without storing it; the slice's stored reference is used when the body has none."""
        snap, raw_id = _parse_snapshot(body)
        return _json(_diagnosis_out(service.diagnose(snap), raw_id))

    @app.post(
        "/v1/snapshots",
        tags=["diagnosis"],
        status_code=201,
        dependencies=authorized,
        responses={**BAD_BODY, **UNPROCESSABLE, **UNAUTHORIZED},
        openapi_extra=SNAPSHOT_REQUEST_BODY,
    )
    async def post_snapshot(body: SnapshotBody) -> Response:
        """Store one window, classify it, store the diagnosis and step the episode machine; answered once stored."""
        snap, raw_id = _parse_snapshot(body)
        result, durable = service.ingest_deferred(snap)
        await asyncio.wrap_future(durable)  # SourceUnavailable (a failed commit) becomes a 503 below
        return _json(
            {"ts": result.ts, "diagnosis": _diagnosis_out(result.diagnosis, raw_id), "events": [e.to_dict() for e in result.events]}, 201
        )

    # -- topology, alerts, actions -----------------------------------------------------------
    @app.get("/v1/topology", tags=["topology"], responses=NOT_FOUND)
    def get_topology() -> Response:
        if topology is None:
            raise HTTPException(status_code=404, detail="no topology configured")
        return _json(topology_view(topology))

    @app.post("/v1/alerts", tags=["alerts"], dependencies=authorized, responses={**BAD_BODY, **UNAUTHORIZED})
    def post_alerts(body: AlertmanagerWebhook) -> Response:
        """Alertmanager webhook receiver (payload version 4)."""
        n = store.put_alerts((a.record() for a in body.alerts), body.receiver, clock())
        return _json({"stored": n})

    @app.get("/v1/alerts", tags=["alerts"])
    def get_alerts(
        slice_name: Annotated[str | None, Query(alias="slice")] = None, limit: Annotated[int, Query(ge=1, le=10000)] = 1000
    ) -> Response:
        return _json(store.alerts(slice_name, limit))

    @app.get("/v1/actions", tags=["actions"])
    def get_actions(
        slice_name: Annotated[str | None, Query(alias="slice")] = None, limit: Annotated[int, Query(ge=1, le=10000)] = 1000
    ) -> Response:
        return _json(store.actions(slice_name, limit))

    if topology is not None:  # the console is drawn from the topology; without one there is nothing to show
        mount_console(app, console_feed(app, store, topology, clock, console_links))

    return app
