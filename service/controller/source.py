"""Where the controller reads its verdicts (``source() -> {tier: (diagnosis, snapshot)}``):

- ``InProcessSource``: co-located with the API (``inferslice api --control MODE``), the
  ``DiagnosisService``'s latest verdicts as the objects the diagnosis loop produced;
- ``ApiSource``: a split deployment (``inferslice control --api URL``), the diagnosis API's
  ``GET /v1/slices/{tier}`` (the latest snapshot and diagnosis, attribution included), turned back
  into the vocabulary's types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import httpx

from inferslice.diagnosis import Attribution, Diagnosis, LatencyShare, NetworkCause, Regime, SloState
from inferslice.errors import InputError, SourceUnavailable
from inferslice.snapshot import Reference, SliceSnapshot, snapshot_from_dict

Verdict = tuple[Diagnosis | None, SliceSnapshot | None]


class LatestVerdicts(Protocol):
    def latest_verdicts(self) -> Mapping[str, tuple[Diagnosis, SliceSnapshot]]: ...


class InProcessSource:
    """``source()`` -> the latest verdict of each of ``tiers`` the service has judged (a ``DiagnosisService``)."""

    def __init__(self, service: LatestVerdicts, tiers: Sequence[str]) -> None:
        self.service = service
        self.tiers = list(tiers)

    def __call__(self) -> dict[str, Verdict]:
        latest = self.service.latest_verdicts()
        return {t: latest[t] for t in self.tiers if t in latest}


def attribution_from_dict(data: Mapping[str, Any] | None) -> Attribution | None:
    if not data:
        return None
    shares = []
    for stat, v in data.items():
        if stat == "excess_share" or not isinstance(v, Mapping):
            continue
        shares.append(
            LatencyShare(
                stat=stat,
                observed_s=float(v.get("observed_s") or 0.0),
                reference_s=None if v.get("reference_s") is None else float(v["reference_s"]),
                queue_s=float(v.get("queue_s") or 0.0),
                network_s=float(v.get("network_s") or 0.0),
                compute_s=float(v.get("compute_s") or 0.0),
                base_s=float(v.get("base_s") or 0.0),
            )
        )
    excess = data.get("excess_share") or {}
    return Attribution(tuple(shares), tuple((str(k), float(x)) for k, x in excess.items()))


def diagnosis_from_dict(data: Mapping[str, Any]) -> Diagnosis:
    """Inverse of ``Diagnosis.to_dict`` for what the controller reads (evidence is not needed to act)."""
    try:
        return Diagnosis(
            slice=str(data["slice"]),
            regime=Regime(data["regime"]),
            secondary=tuple(Regime(r) for r in data.get("secondary") or ()),
            confidence=float(data.get("confidence") or 0.0),
            slo=SloState(data.get("slo") or "unknown"),
            id=None if data.get("id") is None else str(data["id"]),
            window_end_s=data.get("window_end_s"),
            attribution=attribution_from_dict(data.get("attribution")),
            slo_signal=data.get("slo_signal"),
            network_cause=NetworkCause(data["network_cause"]) if data.get("network_cause") else None,
            request_count=float(data["request_count"]) if data.get("request_count") is not None else None,
        )
    except (KeyError, ValueError, TypeError) as err:
        raise InputError(f"not a diagnosis: {err}") from None


class ApiSource:
    """``source()`` -> {tier: (diagnosis, snapshot)} from the diagnosis API; ``SourceUnavailable``
    when the API does not answer (the controller skips that step)."""

    def __init__(self, api_url: str, tiers: Sequence[str], client: httpx.Client | None = None) -> None:
        self.api_url = api_url.rstrip("/")
        self.tiers = list(tiers)
        # follow_redirects: with sharded diagnosis a replica answers 307 for a slice another one holds
        self.client = client or httpx.Client(timeout=5.0, follow_redirects=True)

    def __call__(self) -> dict[str, Verdict]:
        out: dict[str, Verdict] = {}
        for tier in self.tiers:
            try:
                resp = self.client.get(f"{self.api_url}/v1/slices/{tier}")
            except httpx.HTTPError as err:
                raise SourceUnavailable(f"diagnosis API {self.api_url}: {err}") from None
            if resp.status_code == 404:
                continue
            if resp.status_code >= 400:
                raise SourceUnavailable(f"diagnosis API {self.api_url}: HTTP {resp.status_code}")
            body = resp.json()
            diag = diagnosis_from_dict(body["diagnosis"]) if body.get("diagnosis") else None
            snap = snapshot_from_dict(body["snapshot"]) if body.get("snapshot") else None
            ref = body.get("reference")
            if snap is not None and isinstance(ref, Mapping):
                snap = snap.with_reference(
                    Reference(
                        ttft_p50_s=_num(ref.get("ttft_p50_s")),
                        ttft_mean_s=_num(ref.get("ttft_mean_s")),
                        tpot_p50_s=_num(ref.get("tpot_p50_s")),
                        tpot_mean_s=_num(ref.get("tpot_mean_s")),
                        output_tokens_per_s=_num(ref.get("output_tokens_per_s")),
                        source="learned",
                    )
                )
            out[tier] = (diag, snap)
        return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
