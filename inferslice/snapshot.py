"""``SliceSnapshot`` and ``Reference``: what the platform knows about one slice over one window.

Field names and units are the ``inferslice diagnose`` line contract (seconds, bits per second,
ratios 0-1). Every field but ``slice`` may be missing (``None``); consumers say what they lacked
rather than guess. ``snapshot_from_dict`` is the one place untrusted input becomes a snapshot.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from inferslice.errors import InputError


@dataclass(frozen=True)
class Reference:
    """A slice's unconstrained behaviour: low load, no binding link."""

    ttft_p50_s: float | None = None
    ttft_mean_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_mean_s: float | None = None
    output_tokens_per_s: float | None = None
    ttft_p99_s: float | None = None  # the tails, so that a P99 is compared with a P99
    tpot_p99_s: float | None = None
    # The output token rate at which decode saturates (TPOT = a / (1 - rate / saturation), fitted
    # over healthy windows at several loads); None: the classifier's prior.
    tokens_per_s_saturation: float | None = None
    source: str = "unset"  # "learned", "configured" or "unset": the evidence says which
    samples: int = 0


@dataclass(frozen=True)
class SliceSnapshot:
    slice: str
    id: str | None = None
    window_end_s: float | None = None  # unix time at the end of the window the values cover
    window_s: float | None = None
    slo_ttft_p99_s: float | None = None
    slo_tpot_p99_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    ttft_mean_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p99_s: float | None = None
    tpot_mean_s: float | None = None
    output_tokens_per_s: float | None = None
    request_rate: float | None = None
    # How many requests the window's quantiles rest on (the histograms' ``_count`` increase over the
    # window): a P99 from a handful of requests is not a P99 (bottleneck/sampling.py).
    request_count: float | None = None  # TTFT observations: requests whose first token the window saw
    tpot_request_count: float | None = None  # per-request TPOT observations: requests that finished in the window
    link_rx_bps: float | None = None
    link_tx_bps: float | None = None
    link_cap_bps: float | None = None
    # The interface's physical rate: what an uncapped link is judged against. The collectors report an
    # uncapped edge's cap as this rate (a cap at or above it is no cap); ``edge_cap_bps`` reads it so.
    link_capacity_bps: float | None = None
    # The WAN links the slice's replicas reach the gateway over (none: every replica at the gateway):
    # the fullest one (delivered / physical rate) by what it carries toward the gateway, all traffic
    # on it counted (other tiers', cross-traffic), and its physical rate; the one whose measured
    # round trip most exceeds its declared one, by both.
    # (Lead, for everyone merging: these four are the project's one WAN vocabulary, measured by the
    # network exporter's path source and joined by both collectors. The classifier and the controller
    # read them; an RTT excess is wan_rtt_s - wan_base_rtt_s. Do not add parallel WAN fields.)
    wan_rx_bps: float | None = None
    wan_capacity_bps: float | None = None
    wan_rtt_s: float | None = None
    wan_base_rtt_s: float | None = None
    requests_waiting: float | None = None
    requests_running: float | None = None
    queue_time_p99_s: float | None = None
    replicas: float | None = None
    replicas_max: float | None = None
    gpu_utilization: float | None = None
    gpu_share: float | None = None
    # The GPU share the slice's window before this one reported (``DiagnosisService`` fills it from
    # the window it diagnosed last; a posted body may carry it): requests that ran under a co-tenant
    # finish in the window after it leaves, their decode tail still showing its slower steps.
    prior_gpu_share: float | None = None
    kv_cache_usage: float | None = None
    preemptions_per_s: float | None = None
    ref_ttft_p50_s: float | None = None
    ref_ttft_mean_s: float | None = None
    ref_tpot_p50_s: float | None = None
    ref_tpot_mean_s: float | None = None
    ref_output_tokens_per_s: float | None = None
    ref_ttft_p99_s: float | None = None
    ref_tpot_p99_s: float | None = None

    def reference(self) -> Reference | None:
        """The reference carried inline (``ref_*`` keys), if any."""
        ref = Reference(
            ttft_p50_s=self.ref_ttft_p50_s,
            ttft_mean_s=self.ref_ttft_mean_s,
            tpot_p50_s=self.ref_tpot_p50_s,
            tpot_mean_s=self.ref_tpot_mean_s,
            output_tokens_per_s=self.ref_output_tokens_per_s,
            ttft_p99_s=self.ref_ttft_p99_s,
            tpot_p99_s=self.ref_tpot_p99_s,
            source="input",
        )
        inline = (
            ref.ttft_p50_s,
            ref.ttft_mean_s,
            ref.tpot_p50_s,
            ref.tpot_mean_s,
            ref.output_tokens_per_s,
            ref.ttft_p99_s,
            ref.tpot_p99_s,
        )
        if all(v is None for v in inline):
            return None
        return ref

    @property
    def edge_cap_bps(self) -> float | None:
        """The tier's client-edge cap where one holds below the link's physical rate; None where the
        edge is uncapped (its cap reported at or above ``link_capacity_bps``) or no cap is reported."""
        return edge_cap(self.link_cap_bps, self.link_capacity_bps)

    def with_reference(self, ref: Reference) -> SliceSnapshot:
        """Fill the ``ref_*`` fields from a learned/configured reference where the input left them out."""
        return dataclasses.replace(
            self,
            ref_ttft_p50_s=self.ref_ttft_p50_s if self.ref_ttft_p50_s is not None else ref.ttft_p50_s,
            ref_ttft_mean_s=self.ref_ttft_mean_s if self.ref_ttft_mean_s is not None else ref.ttft_mean_s,
            ref_tpot_p50_s=self.ref_tpot_p50_s if self.ref_tpot_p50_s is not None else ref.tpot_p50_s,
            ref_tpot_mean_s=self.ref_tpot_mean_s if self.ref_tpot_mean_s is not None else ref.tpot_mean_s,
            ref_output_tokens_per_s=(self.ref_output_tokens_per_s if self.ref_output_tokens_per_s is not None else ref.output_tokens_per_s),
            ref_ttft_p99_s=self.ref_ttft_p99_s if self.ref_ttft_p99_s is not None else ref.ttft_p99_s,
            ref_tpot_p99_s=self.ref_tpot_p99_s if self.ref_tpot_p99_s is not None else ref.tpot_p99_s,
        )

    def to_dict(self, drop_none: bool = True) -> dict[str, Any]:
        # Every field is a str, a float or None, so this is ``dataclasses.asdict`` without its recursive
        # deep copy (a third of a 1,000-slice round's ingest CPU); a test holds the two equal.
        names = _snapshot_field_names()
        if drop_none:
            return {k: v for k in names if (v := getattr(self, k)) is not None}
        return {k: getattr(self, k) for k in names}


def edge_cap(cap_bps: float | None, capacity_bps: float | None) -> float | None:
    """A client-edge cap where it holds below the link's physical rate, else None: the collectors
    report an uncapped edge's cap at that rate (``SliceSnapshot.edge_cap_bps``; the console reads
    snapshots as JSON, the classifier its link state, and ask the same question here)."""
    if cap_bps is None or (capacity_bps is not None and capacity_bps > 0 and cap_bps >= capacity_bps):
        return None
    return cap_bps


_FIELD_NAMES: list[tuple[str, ...]] = []


def _snapshot_field_names() -> tuple[str, ...]:
    if not _FIELD_NAMES:
        _FIELD_NAMES.append(tuple(f.name for f in fields(SliceSnapshot)))
    return _FIELD_NAMES[0]


def with_configured_slos(snapshot: SliceSnapshot, slo_ttft_p99_s: float | None, slo_tpot_p99_s: float | None) -> SliceSnapshot:
    """The one rule for a slice's SLOs: the tiers file wins.

    A configured SLO replaces whatever the snapshot carried (an exporter's ``slo`` gauge or a posted
    body): the tiers file is the contract with the tenant, and a window must not be judged against a
    looser target because its source said so. Where the tiers file has none (an unconfigured slice),
    the snapshot's own SLO stands. Both the collectors and the diagnosis service apply this.
    """
    ttft = slo_ttft_p99_s if slo_ttft_p99_s is not None else snapshot.slo_ttft_p99_s
    tpot = slo_tpot_p99_s if slo_tpot_p99_s is not None else snapshot.slo_tpot_p99_s
    if ttft == snapshot.slo_ttft_p99_s and tpot == snapshot.slo_tpot_p99_s:
        return snapshot  # already so (the collectors applied it): a frozen copy of 40 fields costs more than the check
    return dataclasses.replace(snapshot, slo_ttft_p99_s=ttft, slo_tpot_p99_s=tpot)


SNAPSHOT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(SliceSnapshot))
NUMERIC_FIELDS: frozenset[str] = frozenset(SNAPSHOT_FIELDS) - {"slice", "id"}
# Ratios must lie in 0-1; everything else numeric must be finite and >= 0.
RATIO_FIELDS: frozenset[str] = frozenset({"gpu_utilization", "gpu_share", "prior_gpu_share", "kv_cache_usage"})


def snapshot_from_dict(data: Mapping[str, Any]) -> SliceSnapshot:
    """Validate one input object (unknown keys ignored); ``InputError`` names the bad field."""
    if not isinstance(data, Mapping):
        raise InputError("expected a JSON object")
    name = data.get("slice")
    if not isinstance(name, str) or not name:
        raise InputError("required, a non-empty string", "slice")
    raw_id = data.get("id")
    if (raw_id is not None and not isinstance(raw_id, (str, int))) or isinstance(raw_id, bool):
        raise InputError("must be a string or an integer", "id")
    values: dict[str, Any] = {"slice": name, "id": None if raw_id is None else str(raw_id)}
    for key in NUMERIC_FIELDS:
        if key not in data or data[key] is None:
            continue
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"must be a number, got {type(value).__name__}", key)
        try:
            value = float(value)
        except OverflowError:  # an integer literal beyond any float
            raise InputError(f"must be a finite number >= 0, got an integer of {len(str(value))} digits", key) from None
        if not math.isfinite(value) or value < 0:
            raise InputError(f"must be a finite number >= 0, got {value}", key)
        if key in RATIO_FIELDS and value > 1.0:
            raise InputError(f"is a ratio in 0-1, got {value}", key)
        values[key] = value
    return SliceSnapshot(**values)
