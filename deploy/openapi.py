"""Schema dialect conversions: pydantic's JSON Schema -> a Kubernetes structural OpenAPI v3.0 schema,
and a CRD's OpenAPI v3.0 schema -> a JSON Schema that ``jsonschema`` validates the way the
apiserver would.

Kubernetes accepts a restricted OpenAPI v3.0: no ``$ref``, ``nullable`` instead of a ``null`` type,
boolean ``exclusiveMinimum``/``exclusiveMaximum`` beside ``minimum``/``maximum``, and only the known
formats. Pydantic emits JSON Schema 2020-12 (``$defs``/``$ref``, ``anyOf [.., {type: null}]``,
numeric exclusive bounds), so the generated CRD is converted, never hand-written: the tiers file
and the CRD stay two views of one model.
"""

from __future__ import annotations

import copy
from typing import Any

# Formats the apiserver knows; others are dropped (and replaced by a pattern where we have one).
_K8S_FORMATS = frozenset(
    {"int32", "int64", "float", "double", "byte", "date", "date-time", "password", "uri", "email", "uuid", "ipv4", "ipv6", "cidr"}
)
_FORMAT_PATTERNS = {"ipv4network": r"^([0-9]{1,3}\.){3}[0-9]{1,3}/[0-9]{1,2}$"}
_DROP_KEYS = frozenset({"title", "$defs", "examples"})


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(x, defs) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        merged = {**copy.deepcopy(defs[name]), **{k: v for k, v in node.items() if k != "$ref"}}
        return _inline(merged, defs)
    return {k: _inline(v, defs) for k, v in node.items()}


def _structural(node: Any) -> Any:
    if isinstance(node, list):
        return [_structural(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    any_of = node.get("anyOf")
    if isinstance(any_of, list) and any(s == {"type": "null"} for s in any_of):
        rest = [s for s in any_of if s != {"type": "null"}]
        base = {k: v for k, v in node.items() if k != "anyOf"}
        node = {**rest[0], **base, "nullable": True} if len(rest) == 1 else {**base, "anyOf": rest, "nullable": True}
    for key, value in node.items():
        if key in _DROP_KEYS:
            continue
        if key == "default" and value is None:
            continue  # a null default is the absence of the field
        if key == "additionalProperties" and value is False:
            continue  # structural schemas prune unknown fields instead
        if key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
            continue
        if key == "format" and value not in _K8S_FORMATS:
            if value in _FORMAT_PATTERNS:
                out["pattern"] = _FORMAT_PATTERNS[value]
            continue
        if key == "properties":
            out[key] = {name: _structural(sub) for name, sub in value.items()}
            continue
        out[key] = _structural(value)
    return out


def structural_schema(json_schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic ``model_json_schema()`` -> a structural OpenAPI v3.0 schema for a CRD."""
    defs = json_schema.get("$defs", {})
    result: dict[str, Any] = _structural(_inline(json_schema, defs))
    return result


def _to_jsonschema(node: Any) -> Any:
    if isinstance(node, list):
        return [_to_jsonschema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _to_jsonschema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if node.get("x-kubernetes-preserve-unknown-fields") and "type" not in out:
        out["type"] = ["object", "array", "string", "number", "boolean", "null"]
    out.pop("nullable", None)
    return out


def validation_schema(openapi_v3: dict[str, Any]) -> dict[str, Any]:
    """A CRD version's ``openAPIV3Schema`` -> a JSON Schema for ``jsonschema.Draft4Validator``
    (draft 4 has OpenAPI 3.0's boolean exclusive bounds; nullable and int-or-string rewritten)."""
    result: dict[str, Any] = _to_jsonschema(openapi_v3)
    return result
