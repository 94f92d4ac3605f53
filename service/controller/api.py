"""The control part of the API: actions from the controller's audit log, and operators' verdicts.

    GET  /v1/actions?state=pending&slice=premium   (read: open)
    GET  /v1/control/events?slice=free             (at_ceiling, effective, insufficient, ineffective, ...; read: open)
    POST /v1/actions/{id}/approve                  (bearer token; body optional: {"by": "alice"})
    POST /v1/actions/{id}/reject

A verdict is a state change in the audit log the controller reads on its next step (SQLite, shared
across processes); 404 for an unknown id, 409 unless the action is pending.

With the controller in this process (``inferslice api --control MODE``, ``mount_controller``):

    GET  /v1/control                               (mode, last step, pending, per-tier state; read: open)
    PUT  /v1/control/mode {"mode": "dry-run", "by": "alice"}   (bearer token: the switch is recorded)

``dry-run`` is the kill switch: from the next step nothing is applied, whatever was decided.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from fastapi import Body, FastAPI, HTTPException, Query, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from inferslice.service.controller.audit import ActionTrail, TransitionError
from inferslice.service.controller.core import Controller, Mode

STATES = ("pending", "approved", "applying", "in_progress", "applied", "failed", "rejected", "dry_run", "refused")


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    by: str = Field(default="api", min_length=1, max_length=100, description="who decided (recorded in the audit log)")


def mount_control(
    app: FastAPI, audit: ActionTrail, authorized: Sequence[Any], clock: Callable[[], float], responses: dict[int | str, Any] | None = None
) -> None:
    """Serve the actions from ``audit`` (replacing the store-backed ``GET /v1/actions``)."""
    app.router.routes[:] = [r for r in app.router.routes if not (isinstance(r, APIRoute) and r.path == "/v1/actions")]
    responses = responses or {401: {"description": "missing or wrong bearer token"}}

    def _json(obj: Any) -> Response:
        return Response(json.dumps(obj, default=str), media_type="application/json")

    @app.get("/v1/actions", tags=["actions"])
    def get_actions(
        state: Annotated[str | None, Query(description=f"one of {', '.join(STATES)}")] = None,
        slice_name: Annotated[str | None, Query(alias="slice")] = None,
        limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
    ) -> Response:
        if state is not None and state not in STATES:
            raise HTTPException(422, [{"loc": ["query", "state"], "msg": f"state must be one of {list(STATES)}", "type": "value_error"}])
        return _json(audit.actions(state=state, tier=slice_name, limit=limit))

    @app.get("/v1/control/events", tags=["actions"])
    def get_events(
        slice_name: Annotated[str | None, Query(alias="slice")] = None, limit: Annotated[int, Query(ge=1, le=10000)] = 1000
    ) -> Response:
        """The controller's events: at_ceiling (naming the admission policy), the outcome checks' verdicts (effective,
        insufficient, ineffective, superseded, unjudged), measured cold starts, mode switches."""
        return _json(audit.events(slice_name, limit))

    def _decide(action_id: str, approve: bool, body: Verdict | None) -> Response:
        if audit.action(action_id) is None:
            raise HTTPException(404, f"no action {action_id!r}")
        try:
            return _json(audit.decide_approval(action_id, approve, (body or Verdict()).by, clock()))
        except TransitionError as err:
            raise HTTPException(409, str(err)) from None

    @app.post("/v1/actions/{action_id}/approve", tags=["actions"], dependencies=list(authorized), responses=responses)
    def approve(action_id: str, body: Annotated[Verdict | None, Body()] = None) -> Response:
        return _decide(action_id, True, body)

    @app.post("/v1/actions/{action_id}/reject", tags=["actions"], dependencies=list(authorized), responses=responses)
    def reject(action_id: str, body: Annotated[Verdict | None, Body()] = None) -> Response:
        return _decide(action_id, False, body)


class ModeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode: Literal["auto", "approve", "dry-run"] = Field(description="auto applies, approve waits for an operator, dry-run applies nothing")
    by: str = Field(default="api", min_length=1, max_length=100, description="who switched (recorded in the audit trail)")


def mount_controller(
    app: FastAPI, controller: Controller, authorized: Sequence[Any], responses: dict[int | str, Any] | None = None
) -> None:
    """The mode and health of the controller running in this process."""
    responses = responses or {401: {"description": "missing or wrong bearer token"}}

    @app.get("/v1/control", tags=["actions"])
    def get_control() -> Response:
        """The controller in this process: mode, last step, what waits, each tier's control state."""
        return Response(json.dumps(controller.health(), default=str), media_type="application/json")

    @app.put("/v1/control/mode", tags=["actions"], dependencies=list(authorized), responses=responses)
    def put_mode(body: ModeIn) -> Response:
        previous = controller.set_mode(Mode(body.mode), body.by)
        return Response(json.dumps({"mode": body.mode, "previous": previous.value}), media_type="application/json")
