"""Request bodies the API validates with pydantic (snapshots go through ``snapshot_from_dict`` instead).

Alertmanager's webhook payload, version 4: https://prometheus.io/docs/alerting/latest/configuration/#webhook_config
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from inferslice.snapshot import SNAPSHOT_FIELDS, Reference

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


class AlertIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: datetime
    endsAt: datetime | None = None
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
    model_config = ConfigDict(extra="allow")

    version: Literal["4"]
    groupKey: str
    truncatedAlerts: int = Field(default=0, ge=0)
    status: Literal["firing", "resolved"]
    receiver: str
    groupLabels: dict[str, str] = Field(default_factory=dict)
    commonLabels: dict[str, str] = Field(default_factory=dict)
    commonAnnotations: dict[str, str] = Field(default_factory=dict)
    externalURL: str = ""
    alerts: list[AlertIn]


class ReferenceIn(BaseModel):
    """A configured reference; fields in seconds and tokens per second, all optional."""

    model_config = ConfigDict(extra="forbid")

    ttft_p50_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    ttft_mean_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    tpot_p50_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    tpot_mean_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    output_tokens_per_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)

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
