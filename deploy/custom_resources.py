"""Our custom resources: ``InferSliceTier`` (a tier of the tiers file) and ``SliceAction`` (a decided
control action with its cause and lifecycle).

The ``InferSliceTier`` CRD's schema is generated from ``inferslice.topology.Tier`` (the pydantic
model the tiers file is validated with), keys in the Kubernetes camelCase convention; the tier's
name is the object's ``metadata.name``. ``tier_to_cr``/``tier_from_cr`` convert one way and back
and the CR half re-validates through the same model, so the two views cannot drift apart.

``SliceAction`` mirrors ``inferslice.actions.Action``: ``spec`` is the action (absolute target,
idempotency id) and its cause; ``status.phase`` walks Pending -> Approved -> (Applying ->
InProgress ->) Applied, ending Ineffective when the outcome check says so or RolledBack once its
rollback is applied, or Rejected by an operator; Failed, DryRun and Refused (by a guardrail, or by a
later leadership term: ``status.fencingToken`` names the term that owns an action) are the
controller's other ends, so the objects are its whole audit trail (service/controller/audit_cr.py). Approve mode is
``kubectl patch sliceaction X --subresource=status --type=merge -p '{"status":{"phase":"Approved"}}'``.
"""

from __future__ import annotations

import enum
import hashlib
import re
from typing import Any

from pydantic.alias_generators import to_camel

from inferslice.actions import Action, ActionKind
from inferslice.topology import Tier

from .openapi import structural_schema

GROUP = "inferslice.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
TIER_KIND = "InferSliceTier"
TIER_PLURAL = "inferslicetiers"
ACTION_KIND = "SliceAction"
ACTION_PLURAL = "sliceactions"


class Phase(enum.StrEnum):
    PENDING = "Pending"
    APPROVED = "Approved"
    APPLIED = "Applied"
    INEFFECTIVE = "Ineffective"  # applied, and the outcome check found it did not help
    ROLLED_BACK = "RolledBack"
    REJECTED = "Rejected"
    APPLYING = "Applying"  # apply started; a controller taking over applies it again (idempotent by id)
    IN_PROGRESS = "InProgress"  # accepted by the backend and advancing (make-before-break relocation)
    FAILED = "Failed"
    DRY_RUN = "DryRun"
    REFUSED = "Refused"


# The phases an action may move to from each phase (the stand-in apiserver and the store enforce it).
TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.PENDING: frozenset({Phase.APPROVED, Phase.REJECTED, Phase.APPLIED}),  # auto mode skips approval
    # REFUSED from the driven phases: a later term refuses an action an earlier (deposed) term recorded after the takeover
    Phase.APPROVED: frozenset({Phase.APPLIED, Phase.REJECTED, Phase.APPLYING, Phase.FAILED, Phase.REFUSED}),
    Phase.APPLYING: frozenset({Phase.APPLIED, Phase.APPROVED, Phase.IN_PROGRESS, Phase.FAILED, Phase.REFUSED}),  # APPROVED: retry
    Phase.IN_PROGRESS: frozenset({Phase.APPLIED, Phase.APPROVED, Phase.FAILED, Phase.REFUSED}),
    Phase.APPLIED: frozenset({Phase.INEFFECTIVE, Phase.ROLLED_BACK}),
    Phase.INEFFECTIVE: frozenset({Phase.ROLLED_BACK}),
    Phase.ROLLED_BACK: frozenset(),
    Phase.REJECTED: frozenset(),
    Phase.FAILED: frozenset(),
    Phase.DRY_RUN: frozenset(),
    Phase.REFUSED: frozenset(),
}


def _camel_keys(node: Any) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k == "properties":
                out[k] = {to_camel(name): _camel_keys(sub) for name, sub in v.items()}
            elif k == "required":
                out[k] = [to_camel(x) for x in v]
            else:
                out[k] = _camel_keys(v)
        return out
    if isinstance(node, list):
        return [_camel_keys(x) for x in node]
    return node


def tier_spec_schema() -> dict[str, Any]:
    schema = _camel_keys(structural_schema(Tier.model_json_schema()))
    schema["properties"].pop("name")
    schema["required"] = [r for r in schema["required"] if r != "name"]
    return dict(schema)


def _crd(kind: str, plural: str, short: list[str], schema: dict[str, Any], columns: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(), "shortNames": short},
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def _object_schema(description: str, spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


def tier_crd() -> dict[str, Any]:
    status = {
        "type": "object",
        "description": "what the controller last observed and applied",
        "properties": {
            "observedGeneration": {"type": "integer", "format": "int64"},
            "replicas": {"type": "integer", "minimum": 0},
            "ingressRateMbps": {"type": "integer", "minimum": 0},
            "regime": {"type": "string"},
        },
    }
    columns = [
        {"name": "Subnet", "type": "string", "jsonPath": ".spec.subnet"},
        {"name": "Max", "type": "integer", "jsonPath": ".spec.replicasMax"},
        {"name": "GPU quota", "type": "number", "jsonPath": ".spec.gpuQuota"},
        {"name": "Priority", "type": "integer", "jsonPath": ".spec.priority"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".status.replicas"},
        {"name": "Regime", "type": "string", "jsonPath": ".status.regime"},
    ]
    schema = _object_schema("A service tier of InferSlice: network, compute and serving guarantees", tier_spec_schema(), status)
    return _crd(TIER_KIND, TIER_PLURAL, ["ist"], schema, columns)


_TARGET_KEY: dict[ActionKind, str] = {
    ActionKind.SET_REPLICAS: "replicas",
    ActionKind.SET_CAP: "capBps",
    ActionKind.RELOCATE: "pop",
    ActionKind.SET_GPU_SHARE: "gpuShare",
}


def _target_schema(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description + "; exactly the key of the action's kind",
        "properties": {
            "replicas": {"type": "integer", "minimum": 0},
            "capBps": {"type": "number", "minimum": 0},
            "pop": {"type": "string"},
            "gpuShare": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "maxProperties": 1,
    }


def action_crd() -> dict[str, Any]:
    spec = {
        "type": "object",
        "required": ["actionId", "kind", "slice", "cause"],
        "properties": {
            "actionId": {"type": "string", "description": "idempotency key: applying the same id twice does the work once"},
            "kind": {"type": "string", "enum": [k.value for k in ActionKind]},
            "slice": {"type": "string"},
            "target": _target_schema("absolute target value"),
            "previous": _target_schema("value before the action (rollback)"),
            "replica": {"type": "string", "description": "relocate: the replica that moves"},
            "cause": {
                "type": "object",
                "required": ["reason"],
                "properties": {
                    "regime": {"type": "string", "description": "the diagnosed regime the action answers"},
                    "reason": {"type": "string"},
                    "diagnosisId": {"type": "string"},
                },
            },
            "decidedUnixS": {"type": "number"},
            "expectedByUnixS": {"type": "number", "description": "when the cause should have cleared"},
        },
    }
    status = {
        "type": "object",
        "properties": {
            "phase": {"type": "string", "enum": [p.value for p in Phase]},
            "approvedBy": {"type": "string"},
            "approvedUnixS": {"type": "number"},
            "mode": {"type": "string", "enum": ["auto", "approve", "dry-run"], "description": "the controller's mode when it decided"},
            "recordedUnixS": {"type": "number", "description": "when the controller recorded the decision"},
            "attempts": {"type": "integer", "minimum": 0, "description": "apply attempts (retryable failures give up after five)"},
            "outcomeUnixS": {"type": "number"},
            "appliedBy": {"type": "string", "description": "the controller replica (lease holder) that applied it"},
            "fencingToken": {
                "type": "string",
                "pattern": "^[0-9]+/.+$",
                "description": "the leadership term that owns the action, <leaseTransitions>/<holder>; a later term adopts"
                " what is unfinished when it takes over and refuses what an earlier term records after that",
            },
            "appliedUnixS": {"type": "number"},
            "outcome": {"type": "string"},
            "message": {"type": "string"},
        },
    }
    columns = [
        {"name": "Slice", "type": "string", "jsonPath": ".spec.slice"},
        {"name": "Kind", "type": "string", "jsonPath": ".spec.kind"},
        {"name": "Regime", "type": "string", "jsonPath": ".spec.cause.regime"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    schema = _object_schema("A control action decided by InferSlice, with its cause and lifecycle", spec, status)
    return _crd(ACTION_KIND, ACTION_PLURAL, ["sla"], schema, columns)


def crds() -> list[dict[str, Any]]:
    return [tier_crd(), action_crd()]


# -- conversions -------------------------------------------------------------------------------


def tier_to_cr(tier: Tier, namespace: str) -> dict[str, Any]:
    data = tier.model_dump(mode="json", exclude={"name"}, exclude_none=True)
    spec = {to_camel(k): v for k, v in data.items()}
    return {
        "apiVersion": API_VERSION,
        "kind": TIER_KIND,
        "metadata": {"name": tier.name, "namespace": namespace, "labels": {"inferslice.io/tier": tier.name}},
        "spec": spec,
    }


_SNAKE = {to_camel(name): name for name in Tier.model_fields}


def tier_from_cr(obj: dict[str, Any]) -> Tier:
    """An ``InferSliceTier`` object -> the tiers-file model (pydantic validation applies)."""
    spec = obj.get("spec", {})
    unknown = sorted(set(spec) - set(_SNAKE))
    if unknown:
        raise ValueError(f"spec has unknown fields {unknown}")
    data = {_SNAKE[k]: v for k, v in spec.items()}
    return Tier.model_validate({"name": obj["metadata"]["name"], **data})


_NAME_SAFE = re.compile(r"[^a-z0-9-]+")


def action_object_name(action_id: str) -> str:
    """A DNS-1123 object name for an action id (ids may hold ':' or '/'); deterministic, so a
    second create of the same action collides (409) instead of duplicating it. A short hash of the
    exact id keeps two ids that differ only in punctuation apart."""
    readable = _NAME_SAFE.sub("-", action_id.lower()).strip("-")[:200].strip("-")
    if not readable:
        raise ValueError(f"action id {action_id!r} gives no object name")
    return f"{readable}-{hashlib.sha256(action_id.encode()).hexdigest()[:10]}"


def _target(kind: ActionKind, value: float | str | None) -> dict[str, Any]:
    key = _TARGET_KEY.get(kind)
    if key is None or value is None:
        return {}
    if key == "replicas":
        return {key: int(value)}
    if key == "pop":
        return {key: str(value)}
    return {key: float(value)}


def action_to_cr(action: Action, namespace: str, diagnosis_id: str | None = None) -> dict[str, Any]:
    if not action.id:
        raise ValueError("an action without an id cannot be recorded")
    spec: dict[str, Any] = {
        "actionId": action.id,
        "kind": action.kind.value,
        "slice": action.slice,
        "target": _target(action.kind, action.value),
        "previous": _target(action.kind, action.previous),
        "cause": {"reason": action.reason, **({"regime": action.regime} if action.regime else {})},
    }
    if diagnosis_id:
        spec["cause"]["diagnosisId"] = diagnosis_id
    if action.replica:
        spec["replica"] = action.replica
    if action.decided_s is not None:
        spec["decidedUnixS"] = action.decided_s
    if action.expected_by_s is not None:
        spec["expectedByUnixS"] = action.expected_by_s
    return {
        "apiVersion": API_VERSION,
        "kind": ACTION_KIND,
        "metadata": {"name": action_object_name(action.id), "namespace": namespace, "labels": {"inferslice.io/tier": action.slice}},
        "spec": spec,
        "status": {"phase": Phase.PENDING.value},
    }


def action_from_cr(obj: dict[str, Any]) -> Action:
    spec = obj["spec"]
    kind = ActionKind(spec["kind"])
    key = _TARGET_KEY.get(kind)
    cause = spec.get("cause", {})
    return Action(
        kind=kind,
        slice=spec["slice"],
        value=spec.get("target", {}).get(key) if key else None,
        previous=spec.get("previous", {}).get(key) if key else None,
        reason=cause.get("reason", ""),
        regime=cause.get("regime"),
        id=spec["actionId"],
        replica=spec.get("replica"),
        decided_s=spec.get("decidedUnixS"),
        expected_by_s=spec.get("expectedByUnixS"),
    )
