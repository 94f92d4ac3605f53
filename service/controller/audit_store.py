"""The audit trail on Kubernetes: one ``SliceAction`` object per decided action (what, why, who
approved, who applied and when, outcome), so the trail survives a controller restart without a
volume and approve mode is ``kubectl patch`` or the API. The single-machine default keeps SQLite.

``record`` is idempotent: the object name derives from the action id, so a second record of the
same action (a restarted or newly elected controller deciding it again) finds the first one
(409 AlreadyExists) instead of duplicating it. Phase changes are status-subresource patches with
the object's ``resourceVersion`` as precondition and follow ``custom_resources.TRANSITIONS``: two
controllers racing to mark the same action see one win and one conflict.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inferslice.actions import Action
from inferslice.control.actuators.base import ApplyStatus, PermanentActuatorError, RetryableActuatorError
from inferslice.deploy import custom_resources as cr
from inferslice.deploy.custom_resources import TRANSITIONS, Phase

MERGE = "application/merge-patch+json"


@dataclass(frozen=True)
class Recorded:
    action: Action
    phase: Phase
    status: dict[str, Any]
    resource_version: str


class PhaseConflict(RetryableActuatorError):
    """Someone else changed the action first (or the transition is no longer allowed from what is)."""


def _recorded(obj: dict[str, Any]) -> Recorded:
    status = obj.get("status", {}) or {}
    return Recorded(cr.action_from_cr(obj), Phase(status.get("phase", Phase.PENDING.value)), status, obj["metadata"]["resourceVersion"])


class SliceActionStore:
    def __init__(self, api_client: Any, namespace: str, clock: Callable[[], float] = time.time, request_timeout_s: float = 4.0) -> None:
        from kubernetes import client

        self._api = client.CustomObjectsApi(api_client)
        self.namespace = namespace
        self._clock = clock
        self.request_timeout_s = request_timeout_s  # every call: an unreachable apiserver fails the step, never hangs it

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, _request_timeout=self.request_timeout_s, **kwargs)
        except ApiException as err:
            if err.status == 409:  # the resourceVersion precondition: someone changed it since it was read
                raise PhaseConflict(f"sliceactions: {what}: changed since it was read") from err
            if err.status == 429 or (err.status or 0) >= 500:
                raise RetryableActuatorError(f"sliceactions: {what}: {err.status} {err.reason}") from err
            if err.status == 404:
                raise KeyError(what) from err
            raise PermanentActuatorError(f"sliceactions: {what}: {err.status} {err.reason}: {err.body}") from err
        except (HTTPError, OSError) as err:
            raise RetryableActuatorError(f"sliceactions: {what}: {err}") from err

    def _args(self) -> tuple[str, str, str, str]:
        return cr.GROUP, cr.VERSION, self.namespace, cr.ACTION_PLURAL

    def get(self, action_id: str) -> Recorded:
        name = cr.action_object_name(action_id)
        return _recorded(self._call(f"get {name}", self._api.get_namespaced_custom_object, *self._args(), name))

    def record(self, action: Action, diagnosis_id: str | None = None, status: dict[str, Any] | None = None) -> Recorded:
        """Create the action's object (status Pending, or ``status``), or return the one already there."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        body = cr.action_to_cr(action, self.namespace, diagnosis_id)
        try:
            self._api.create_namespaced_custom_object(*self._args(), body, _request_timeout=self.request_timeout_s)
        except ApiException as err:
            if err.status != 409:
                raise self._translate(err, "create") from err
            return self.get(action.id)
        except (HTTPError, OSError) as err:
            raise RetryableActuatorError(f"sliceactions: create: {err}") from err
        # A create never sets the status of a kind with a status subresource: set it now.
        name = body["metadata"]["name"]
        patch = {"status": status or {"phase": Phase.PENDING.value}}
        obj = self._call(f"status {name}", self._api.patch_namespaced_custom_object_status, *self._args(), name, patch, _content_type=MERGE)
        return _recorded(obj)

    def _translate(self, err: Any, what: str) -> Exception:
        if err.status in (429,) or (err.status or 0) >= 500:
            return RetryableActuatorError(f"sliceactions: {what}: {err.status}")
        return PermanentActuatorError(f"sliceactions: {what}: {err.status} {err.reason}")

    def set_phase(self, action_id: str, phase: Phase, by: str = "", message: str = "", outcome: str | None = None) -> Recorded:
        """Move an action to ``phase`` if the transition is allowed from its current phase."""
        current = self.get(action_id)
        if phase == current.phase:
            return current
        status: dict[str, Any] = {"phase": phase.value}
        if message:
            status["message"] = message
        if outcome is not None:
            status["outcome"] = outcome
        if phase == Phase.APPROVED:
            status["approvedBy"] = by
        if phase == Phase.APPLIED:
            status.update({"appliedBy": by, "appliedUnixS": self._clock()})
        return self.patch_status(current, status)

    def patch_status(self, current: Recorded, status: dict[str, Any]) -> Recorded:
        """Merge ``status`` into the object ``current`` was read from; ``PhaseConflict`` if it changed since."""
        if "phase" in status and Phase(status["phase"]) != current.phase and Phase(status["phase"]) not in TRANSITIONS[current.phase]:
            raise PhaseConflict(f"sliceaction {current.action.id}: {current.phase.value} -> {status['phase']} is not allowed")
        name = cr.action_object_name(current.action.id)
        patch = {"metadata": {"resourceVersion": current.resource_version}, "status": status}
        obj = self._call(f"status {name}", self._api.patch_namespaced_custom_object_status, *self._args(), name, patch, _content_type=MERGE)
        return _recorded(obj)

    def list(self, phase: Phase | None = None) -> list[Recorded]:
        resp = self._call("list", self._api.list_namespaced_custom_object, *self._args())
        items = [_recorded(o) for o in resp.get("items", [])]
        return [r for r in items if phase is None or r.phase == phase]


def to_json(rec: Recorded) -> str:
    return json.dumps({"action": rec.action.to_dict(), "phase": rec.phase.value, "status": rec.status}, sort_keys=True)


def apply_recorded(
    store: SliceActionStore, actuator: Any, action: Action, identity: str, auto: bool, diagnosis_id: str | None = None
) -> Recorded:
    """One action through the trail: record it (or find it), apply it when it may be (auto mode, or
    an operator approved it), then mark it Applied. Call it only while holding the Lease.

    A controller that dies between apply and mark leaves the action Pending/Approved; whoever leads
    next applies it again, which the actuator's idempotency turns into ALREADY_APPLIED: the change
    happens once, the trail says who finished it."""
    rec = store.record(action, diagnosis_id)
    if rec.phase not in (Phase.PENDING, Phase.APPROVED) or (rec.phase == Phase.PENDING and not auto):
        return rec
    result = actuator.apply(action)
    if result.status == ApplyStatus.IN_PROGRESS:
        return rec
    return store.set_phase(action.id, Phase.APPLIED, by=identity, message=f"{result.status.value}: {result.detail}")
