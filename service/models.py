"""Request bodies the API validates with pydantic (snapshots go through ``snapshot_from_dict`` instead).

Alertmanager's webhook payload, version 4: https://prometheus.io/docs/alerting/latest/configuration/#webhook_config
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from inferslice.snapshot import NUMERIC_FIELDS, RATIO_FIELDS, SNAPSHOT_FIELDS, Reference

# The largest finite float: a larger JSON literal parses to inf (or overflows) and is rejected.
_MAX_NUMBER = sys.float_info.max
# Alertmanager writes the zero time for "no end yet" on firing alerts.
_NO_END_YEAR = 1


def _unix(dt: datetime | None) -> float | None:
    if dt is None or dt.year <= _NO_END_YEAR:
        return None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _iso(dt: datetime | None) -> str | None:
    if dt is None or dt.year <= _NO_END_YEAR:
        return None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).astimezone(UTC).isoformat().replace("+00:00", "Z")


def _timestamp_text(value: Any) -> Any:
    """Alertmanager writes RFC 3339 strings; a number is not a timestamp here (the schema says string)."""
    if value is not None and not isinstance(value, str | datetime):
        raise ValueError("must be an RFC 3339 date-time string")
    return value


def _json_integer(value: Any) -> Any:
    """JSON Schema's integer: 5 and 5.0, never "5" or true."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Strict models (a bool is not a number, "5" is not an integer), except that timestamps arrive as
# text and an integral float is an integer, as JSON Schema has it.
Timestamp = Annotated[datetime, Field(strict=False), BeforeValidator(_timestamp_text)]
JsonInt = Annotated[int, BeforeValidator(_json_integer)]


class AlertIn(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: Timestamp
    endsAt: Timestamp | None = None
    generatorURL: str = ""
    fingerprint: str | None = None

    def record(self) -> dict[str, Any]:
        """The row the store keeps; the fingerprint falls back to the sorted label set (Alertmanager < 0.19)."""
        fingerprint = self.fingerprint or ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        return {
            "fingerprint": fingerprint,
            "starts_at": _iso(self.startsAt) or self.startsAt.isoformat(),
            "ends_at": _iso(self.endsAt),
            "starts_at_s": _unix(self.startsAt),
            "ends_at_s": _unix(self.endsAt),
            "status": self.status,
            "alertname": self.labels.get("alertname"),
            "slice": self.labels.get("slice") or self.labels.get("tier"),
            "labels": self.labels,
            "annotations": self.annotations,
            "generator_url": self.generatorURL,
        }


class AlertmanagerWebhook(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    version: Literal["4"]
    groupKey: str = Field(min_length=1)  # Alertmanager always names the group ("{}:{alertname=...}")
    truncatedAlerts: JsonInt = Field(default=0, ge=0)
    status: Literal["firing", "resolved"]
    receiver: str
    groupLabels: dict[str, str] = Field(default_factory=dict)
    commonLabels: dict[str, str] = Field(default_factory=dict)
    commonAnnotations: dict[str, str] = Field(default_factory=dict)
    externalURL: str = ""
    alerts: list[AlertIn]


class ReferenceIn(BaseModel):
    """A configured reference; fields in seconds and tokens per second, all optional.

    Strict: a boolean or a numeric string is not a number (422 naming the field), as in snapshots.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    ttft_p50_s: float | None = Field(default=None, ge=0, le=_MAX_NUMBER, allow_inf_nan=False)
    ttft_mean_s: float | None = Field(default=None, ge=0, le=_MAX_NUMBER, allow_inf_nan=False)
    tpot_p50_s: float | None = Field(default=None, ge=0, le=_MAX_NUMBER, allow_inf_nan=False)
    tpot_mean_s: float | None = Field(default=None, ge=0, le=_MAX_NUMBER, allow_inf_nan=False)
    output_tokens_per_s: float | None = Field(default=None, ge=0, le=_MAX_NUMBER, allow_inf_nan=False)

    def to_reference(self) -> Reference:
        return Reference(**self.model_dump(), source="configured")


SNAPSHOT_EXAMPLE: dict[str, Any] = {
    "id": "w-1",
    "slice": "free",
    "ttft_p99_s": 5.0,
    "tpot_p50_s": 0.026,
    "ref_tpot_p50_s": 0.025,
    "link_rx_bps": 1.0e5,
    "link_cap_bps": 1.0e7,
    "requests_waiting": 4,
}
SNAPSHOT_DESCRIPTION = (
    "One snapshot in the `inferslice diagnose` line contract: `slice` required, every other key optional "
    "(seconds, bits per second, ratios 0-1; unknown keys ignored). Keys: " + ", ".join(SNAPSHOT_FIELDS)
)


# -- the OpenAPI document's error responses and the snapshot body's schema ------------------------

_DETAIL = {"type": "object", "properties": {"detail": {"type": "string"}}}
_VALIDATION = {"$ref": "#/components/schemas/HTTPValidationError"}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "unknown slice (or no reference / topology)", "content": {"application/json": {"schema": _DETAIL}}}
}
ELSEWHERE: dict[int | str, dict[str, Any]] = {
    307: {
        "description": "sharded diagnosis: another replica holds this slice's PoP group; `Location` is that replica's URL for it",
        "headers": {"Location": {"schema": {"type": "string"}}},
    }
}
BAD_BODY: dict[int | str, dict[str, Any]] = {
    400: {"description": "the body could not be parsed (not JSON, or not UTF-8)", "content": {"application/json": {"schema": _DETAIL}}}
}
UNPROCESSABLE: dict[int | str, dict[str, Any]] = {
    422: {"description": "invalid body: `detail[].loc` names the field", "content": {"application/json": {"schema": _VALIDATION}}}
}
UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"description": "the database is unreachable", "content": {"application/json": {"schema": _DETAIL}}}
}

def snapshot_schema() -> dict[str, Any]:
    """The schema ``snapshot_from_dict`` enforces: ``slice`` a non-empty string, ``id`` a string or an
    integer, every other known key a number >= 0 (ratios <= 1) or null; unknown keys ignored."""
    any_id = {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}
    props: dict[str, Any] = {"slice": {"type": "string", "minLength": 1}, "id": any_id}
    for key in sorted(NUMERIC_FIELDS):
        number: dict[str, Any] = {"type": "number", "minimum": 0, "maximum": 1 if key in RATIO_FIELDS else _MAX_NUMBER}
        props[key] = {"anyOf": [number, {"type": "null"}]}
    return {"type": "object", "required": ["slice"], "properties": props, "additionalProperties": True}


SNAPSHOT_REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": SNAPSHOT_DESCRIPTION,
        "content": {"application/json": {"schema": snapshot_schema(), "example": SNAPSHOT_EXAMPLE}},
    }
}
