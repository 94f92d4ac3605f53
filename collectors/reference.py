"""Learning each slice's unconstrained behaviour (its ``Reference``) from qualifying windows.

Pure: ``ReferenceLearner.observe(state, snapshot, now_s) -> state``; nothing here reads a clock.

A window qualifies when the slice is demonstrably unconstrained in it:
- it carried traffic (``request_rate`` or ``output_tokens_per_s`` > 0) and has a latency to learn;
- no queue: ``requests_waiting`` is 0 or not exported;
- the link is not near its cap: uncapped, or ``link_rx_bps < max_link_utilization x link_cap_bps``;
- the SLOs were met (``ttft_p99_s <= slo_ttft_p99_s``, same for TPOT) where both are known;
- no KV-cache preemptions (a preempting engine is memory-bound, not unconstrained).

The reference is the per-field median of the last ``max_observations`` qualifying windows (robust
to the odd cold-start excursion), published once ``min_observations`` are in. Throughput depends on
load, so besides tokens/s the learner keeps tokens/s per running request (``output_tokens_per_s /
requests_running``) for comparing throughput at another concurrency.

Explicit values from configuration win field by field; the result then says ``source="configured"``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

import yaml

from inferslice.errors import ConfigError, ParseError
from inferslice.snapshot import Reference, SliceSnapshot

REFERENCE_FIELDS: tuple[str, ...] = ("ttft_p50_s", "ttft_mean_s", "tpot_p50_s", "tpot_mean_s", "output_tokens_per_s")


@dataclass(frozen=True)
class Observation:
    """What one qualifying window showed."""

    at_s: float
    ttft_p50_s: float | None = None
    ttft_mean_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_mean_s: float | None = None
    output_tokens_per_s: float | None = None
    tokens_per_s_per_request: float | None = None


@dataclass(frozen=True)
class SliceLearning:
    """One slice's learning state: its recent qualifying observations, oldest first."""

    observations: tuple[Observation, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"observations": [asdict(o) for o in self.observations]}

    @staticmethod
    def from_dict(data: Any) -> SliceLearning:
        try:
            names = {f.name for f in fields(Observation)}
            return SliceLearning(
                tuple(Observation(**{k: v for k, v in o.items() if k in names}) for o in data.get("observations", []))
            )
        except (AttributeError, TypeError) as err:
            raise ParseError(f"reference state: {err}") from None


@dataclass(frozen=True)
class LearnerState:
    slices: Mapping[str, SliceLearning] = field(default_factory=dict)

    def of(self, slice: str) -> SliceLearning:
        return self.slices.get(slice, SliceLearning())


@dataclass(frozen=True)
class LearnerSettings:
    max_observations: int = 30  # five minutes of 10 s windows: recent enough to follow a redeploy
    min_observations: int = 3  # one window can be a fluke (a cold start); three agreeing ones are a baseline
    max_link_utilization: float = 0.7  # above 70 % of a cap, queueing in the shaper already shows in TPOT
    max_waiting: float = 0.0  # any queued request means the window was not unconstrained
    max_age_s: float | None = 3600.0  # older baselines may predate a model or engine change


class ReferenceLearner:
    def __init__(self, settings: LearnerSettings | None = None, overrides: Mapping[str, Reference] | None = None) -> None:
        self.settings = settings or LearnerSettings()
        self.overrides = dict(overrides or {})

    def disqualification(self, snap: SliceSnapshot) -> str | None:
        """Why this window must not teach the reference, or ``None`` when it qualifies."""
        if not ((snap.request_rate or 0.0) > 0 or (snap.output_tokens_per_s or 0.0) > 0):
            return "no traffic"
        if all(getattr(snap, f) is None for f in ("ttft_p50_s", "ttft_mean_s", "tpot_p50_s", "tpot_mean_s")):
            return "no latency measured"
        if snap.requests_waiting is not None and snap.requests_waiting > self.settings.max_waiting:
            return f"queue of {snap.requests_waiting:g}"
        if (
            snap.link_cap_bps is not None
            and snap.link_rx_bps is not None
            and snap.link_rx_bps >= self.settings.max_link_utilization * snap.link_cap_bps
        ):
            return "link near its cap"
        if snap.slo_ttft_p99_s is not None and snap.ttft_p99_s is not None and snap.ttft_p99_s > snap.slo_ttft_p99_s:
            return "TTFT SLO missed"
        if snap.slo_tpot_p99_s is not None and snap.tpot_p99_s is not None and snap.tpot_p99_s > snap.slo_tpot_p99_s:
            return "TPOT SLO missed"
        if snap.preemptions_per_s is not None and snap.preemptions_per_s > 0:
            return "KV-cache preemptions"
        return None

    def observe(self, state: LearnerState, snap: SliceSnapshot, now_s: float) -> LearnerState:
        """The state after this window (unchanged when the window does not qualify, bar expiry)."""
        learning = self._expire(state.of(snap.slice), now_s)
        if self.disqualification(snap) is None:
            per_request = None
            if snap.output_tokens_per_s is not None and snap.requests_running:
                per_request = snap.output_tokens_per_s / snap.requests_running
            obs = Observation(
                at_s=snap.window_end_s if snap.window_end_s is not None else now_s,
                ttft_p50_s=snap.ttft_p50_s,
                ttft_mean_s=snap.ttft_mean_s,
                tpot_p50_s=snap.tpot_p50_s,
                tpot_mean_s=snap.tpot_mean_s,
                output_tokens_per_s=snap.output_tokens_per_s,
                tokens_per_s_per_request=per_request,
            )
            learning = SliceLearning((*learning.observations, obs)[-self.settings.max_observations :])
        if learning == state.of(snap.slice):
            return state
        return LearnerState({**state.slices, snap.slice: learning})

    def _expire(self, learning: SliceLearning, now_s: float) -> SliceLearning:
        if self.settings.max_age_s is None:
            return learning
        horizon = now_s - self.settings.max_age_s
        kept = tuple(o for o in learning.observations if o.at_s >= horizon)
        return learning if len(kept) == len(learning.observations) else SliceLearning(kept)

    def learned(self, state: LearnerState, slice: str) -> Reference:
        """The reference learned so far (``source="unset"`` until ``min_observations`` qualified)."""
        obs = state.of(slice).observations
        if len(obs) < self.settings.min_observations:
            return Reference(source="unset", samples=len(obs))
        values: dict[str, Any] = {f: _median(getattr(o, f) for o in obs) for f in REFERENCE_FIELDS}
        return Reference(**values, source="learned", samples=len(obs))

    def reference(self, state: LearnerState, slice: str) -> Reference:
        """Learned values with configured ones winning field by field."""
        ref = self.learned(state, slice)
        override = self.overrides.get(slice)
        if override is None:
            return ref
        configured: dict[str, Any] = {f: getattr(override, f) for f in REFERENCE_FIELDS if getattr(override, f) is not None}
        if not configured:
            return ref
        return replace(ref, **configured, source="configured")

    def tokens_per_s_per_request(self, state: LearnerState, slice: str) -> float | None:
        """Unconstrained decode throughput of one running request (compare at another concurrency)."""
        obs = state.of(slice).observations
        if len(obs) < self.settings.min_observations:
            return None
        return _median(o.tokens_per_s_per_request for o in obs)


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(known) if known else None


# -- configuration overrides -------------------------------------------------------------------


def reference_overrides_from_dict(data: Any) -> dict[str, Reference]:
    """``{references: {slice: {ttft_p50_s: ..., ...}}}`` (or the inner mapping alone) -> references."""
    if isinstance(data, dict) and "references" in data:
        data = data["references"]
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping of slice -> reference values", "references")
    out: dict[str, Reference] = {}
    for slice_name, values in data.items():
        if not isinstance(values, dict):
            raise ConfigError("expected a mapping of field -> value", f"references.{slice_name}")
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            where = f"references.{slice_name}.{key}"
            if key not in REFERENCE_FIELDS:
                raise ConfigError(f"unknown field (expected one of {', '.join(REFERENCE_FIELDS)})", where)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"must be a finite number >= 0, got {value!r}", where)
            kwargs[key] = float(value)
        out[str(slice_name)] = replace(Reference(source="configured"), **kwargs)
    return out


def load_reference_overrides(path: str | Path) -> dict[str, Reference]:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    return reference_overrides_from_dict(data or {})


# -- persistence ---------------------------------------------------------------------------------


class ReferenceStore(Protocol):
    """Where learning state lives between runs (JSON file here; the API keeps it in SQLite)."""

    def get(self, slice: str) -> SliceLearning | None: ...

    def put(self, slice: str, learning: SliceLearning) -> None: ...


class JsonFileReferenceStore:
    """All slices in one JSON file, rewritten atomically on each ``put``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError as err:
            raise ParseError(f"{self.path}: not JSON: {err}") from None
        if not isinstance(data, dict):
            raise ParseError(f"{self.path}: expected an object")
        return data

    def get(self, slice: str) -> SliceLearning | None:
        data = self._read().get(slice)
        return None if data is None else SliceLearning.from_dict(data)

    def put(self, slice: str, learning: SliceLearning) -> None:
        data = self._read()
        data[slice] = learning.to_dict()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def load_state(store: ReferenceStore, slices: Iterable[str]) -> LearnerState:
    found = {s: learning for s in slices if (learning := store.get(s)) is not None}
    return LearnerState(found)


def save_state(store: ReferenceStore, state: LearnerState, previous: LearnerState | None = None) -> None:
    """Write the slices whose learning changed since ``previous`` (all of them without it)."""
    for slice_name, learning in state.slices.items():
        if previous is None or previous.of(slice_name) != learning:
            store.put(slice_name, learning)
