"""The labelled diagnosis corpus (issue 9): windows with their injected truth, from recorded runs.

Every label comes from what was done to the tier, never from a classifier:

- ``injection``: the diagnosis benchmark's recorded windows (``windows-<source>-4s.jsonl``; the
  4 s window, both sources). A window wholly after a change and before the tier's next one carries
  that change's regime (``revert``: healthy); the windows before the first change are healthy.
  Windows straddling a change are left out (their truth is a mixture).
- ``differentiation``: the concurrency sweep's operating points (client-side percentiles, token
  rate, link rate; no gauges). Truth: ``queue`` when the clients exceed the tier's admission
  capacity (``replicas_max x max_ongoing_requests`` of the tiers file), else healthy.
- ``client-bandwidth``: the cap sweep's points. Truth: ``network`` when the cap sits below the
  uncapped demand at the same concurrency (the ``fixed`` 0.5 Mbit/s cut), plus ``queue`` when the
  clients exceed the admission capacity. Counterfactual truth: the same point uncapped (the cap
  removed) and the tier's unloaded reference (the queue removed) give each cause's true share.
- ``compound``: ``bench.diagnosis_compound``'s phases (two causes on one tier, then each removed);
  truth: the phase's causes; counterfactual truth: the tier's phase with that cause removed.
- ``brief``: operating points written by hand from the brief's figures (``corpus_brief``).

The reference each window is judged against comes from truth-healthy windows of the same tier
(the baseline windows before the first change; the sweep's points below half the capacity), learned
with ``bottleneck.learn_reference`` (so tails, throughput and the load relation are learned as in
service). Each record carries it inline (``ref_*``) plus ``saturation``; every method sees the same.

Split: by scenario (a tier's change repetition, a sweep point), alternately into ``tune`` and
``test``: thresholds may be tuned on the first half only; figures are reported on the second.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from inferslice.bench.corpus_brief import brief_points
from inferslice.bench.corpus_eval import PEER_COLUMNS
from inferslice.bench.corpus_truth import primary_regime
from inferslice.bottleneck.reference import LearningPolicy, learn_reference
from inferslice.diagnosis import Diagnosis, Regime, SloState
from inferslice.snapshot import Reference, SliceSnapshot, snapshot_from_dict
from inferslice.topology import Topology

CORPUS_FILE = "corpus.jsonl"
INJECTION_SOURCES = ("prometheus", "embedded")
SERIES_FIELDS = frozenset(PEER_COLUMNS)  # what the RCA peers read of each window
_LEARN = LearningPolicy(alpha=0.1, min_confidence=0.0, min_samples=1)
_HEALTHY = Diagnosis(slice="", regime=Regime.HEALTHY, confidence=1.0, slo=SloState.MET)


def primary_of(causes: Iterable[str]) -> str:
    """The regime a truth set names first: the remedy that comes first (as the issue-17 corpus's)."""
    return primary_regime(tuple(causes))


def _reference_from(snaps: Sequence[SliceSnapshot]) -> Reference | None:
    ref: Reference | None = None
    for s in snaps:
        ref = learn_reference(ref, s, _HEALTHY, _LEARN)
    return ref


def _with_ref(snap: SliceSnapshot, ref: Reference | None) -> dict[str, Any]:
    out = snap.with_reference(ref).to_dict() if ref is not None else snap.to_dict()
    return out


def record(
    rid: str, family: str, scenario: str, causes: Sequence[str], snap: SliceSnapshot, ref: Reference | None, **extra: Any
) -> dict[str, Any]:
    return {
        "id": rid,
        "family": family,
        "scenario": scenario,
        "causes": sorted(causes),
        "primary": primary_of(causes),
        "snapshot": _with_ref(snap, ref),
        "saturation": ref.tokens_per_s_saturation if ref is not None else None,
        **extra,
    }


# -- the diagnosis benchmark's recorded windows --------------------------------------------------
def injection_windows(result: Mapping[str, Any], windows: Sequence[Mapping[str, Any]], source: str) -> list[dict[str, Any]]:
    changes = sorted(result["changes"], key=lambda c: c["at_s"])
    expected_cause = {
        Regime.QUEUE_LIMITED.value: "queue",
        Regime.NETWORK_LIMITED.value: "network",
        Regime.COMPUTE_LIMITED.value: "compute",
    }
    out: list[dict[str, Any]] = []
    by_tier: dict[str, list[Mapping[str, Any]]] = {}
    for w in windows:
        by_tier.setdefault(str(w["slice"]), []).append(w)
    for tier, rows in by_tier.items():
        tier_changes = [c for c in changes if c["tier"] == tier]
        if not tier_changes:
            continue
        first = tier_changes[0]["at_s"]
        snaps = [(float(w["ts"]), snapshot_from_dict(w["snapshot"])) for w in rows]
        baseline = [s for t, s in snaps if t <= first and s.ttft_p50_s is not None and s.tpot_p50_s is not None]
        ref = _reference_from(baseline[1:])  # the first window after the load started is partial
        history = [{"t": t, **{k: v for k, v in s.to_dict().items() if k in SERIES_FIELDS}} for t, s in snaps]
        for t, s in snaps:
            start = t - (s.window_s or 0.0)
            if s.ttft_p50_s is None and s.tpot_p50_s is None:
                continue
            if t <= first:
                if baseline and s is baseline[0]:
                    continue
                causes: list[str] = []
                scenario, change_at = f"{tier}-baseline", first
            else:
                change = next((c for c in tier_changes if c["at_s"] <= start and t <= c["until_s"]), None)
                if change is None:
                    continue  # the window straddles a change
                causes = [expected_cause[change["expected"]]] if change["expected"] in expected_cause else []
                scenario, change_at = f"{tier}-{change['kind']}-{change['repetition']}", change["at_s"]
            # The series a metric-based RCA method sees: 8 windows before the change, up to 8 since.
            before = [h for h in history if h["t"] <= change_at][-8:]
            since = [h for h in history if change_at < h["t"] <= t][-8:]
            out.append(
                record(
                    f"injection-{source}-{tier}-{t:.1f}",
                    "injection",
                    scenario,
                    causes,
                    s,
                    ref,
                    source=source,
                    change_at_s=change_at,
                    context=before + since,
                )
            )
    return out


# -- the compound scenarios (bench.diagnosis_compound) ---------------------------------------------
_STATS = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")


def _mean_stats(snaps: Sequence[SliceSnapshot]) -> dict[str, float]:
    out: dict[str, float] = {}
    for f in _STATS:
        vals = [getattr(s, f) for s in snaps if getattr(s, f) is not None]
        if vals:
            out[f] = sum(vals) / len(vals)
    return out


def compound_windows(
    result: Mapping[str, Any], windows: Sequence[Mapping[str, Any]], source: str, margin_s: float = 2.0
) -> list[dict[str, Any]]:
    """Windows wholly inside a phase, labelled with that phase's causes; each cause's counterfactual is
    the mean of the tier's phase with exactly that cause removed."""
    phases = result["phases"]
    out: list[dict[str, Any]] = []
    for tier in result["plans"]:
        rows = [(float(w["ts"]), snapshot_from_dict(w["snapshot"])) for w in windows if w["slice"] == tier]
        inside: dict[int, list[tuple[float, SliceSnapshot]]] = {}
        for t, s in rows:
            start = t - (s.window_s or 0.0)
            ph = next((p for p in phases if p["at_s"] + margin_s <= start and t <= p["until_s"]), None)
            if ph is not None and (s.ttft_p50_s is not None or s.tpot_p50_s is not None):
                inside.setdefault(int(ph["phase"]), []).append((t, s))
        # A cap is a cause only below the tier's demand at that load (the uncapped phase with the same clients).
        rx: dict[int, float] = {}
        for k, v in inside.items():
            rates = [s.link_rx_bps for _, s in v if s.link_rx_bps is not None]
            if rates:
                rx[k] = sum(rates) / len(rates)
        causes_of: dict[int, frozenset[str]] = {}
        for p in phases:
            k, plan = int(p["phase"]), p["tiers"][tier]
            causes = set(plan["causes"])
            twin = next((int(q["phase"]) for q in phases if q["tiers"][tier]["extra_clients"] == plan["extra_clients"]
                         and q["tiers"][tier]["cap_bps"] is None and int(q["phase"]) in rx), None)  # fmt: skip
            if "network" in causes and plan["cap_bps"] is not None and twin is not None and plan["cap_bps"] >= 0.95 * rx[twin]:
                causes.discard("network")
            causes_of[k] = frozenset(causes)
        ref = _reference_from([s for _, s in inside.get(0, [])][1:])
        means = {k: _mean_stats([s for _, s in v]) for k, v in inside.items()}
        history = [{"t": t, **{k: v for k, v in s.to_dict().items() if k in SERIES_FIELDS}} for t, s in rows]
        for k, members in sorted(inside.items()):
            phase_causes = causes_of[k]
            cf = {}
            for c in phase_causes:
                twin = next((j for j, cs in causes_of.items() if cs == phase_causes - {c} and j in means), None)
                if twin is not None:
                    cf[f"without_{c}"] = means[twin]
            change_at = next(p["at_s"] for p in phases if int(p["phase"]) == k)
            for t, s in members:
                before = [h for h in history if h["t"] <= change_at][-8:]
                since = [h for h in history if change_at < h["t"] <= t][-8:]
                out.append(record(f"compound-{source}-{tier}-{t:.1f}", "compound", f"{tier}-phase{k}", sorted(phase_causes), s, ref,
                                  source=source, change_at_s=change_at, context=before + since,
                                  **({"counterfactual": cf} if cf else {})))  # fmt: skip
    return out


# -- the sweeps' operating points -----------------------------------------------------------------
def _point_snapshot(p: Mapping[str, Any], slo_s: float) -> SliceSnapshot:
    return SliceSnapshot(
        slice=str(p["tier"]),
        slo_ttft_p99_s=slo_s,
        ttft_p50_s=p.get("p50_ttft_s"),
        ttft_p99_s=p.get("p99_ttft_s"),
        ttft_mean_s=p.get("mean_ttft_s"),
        tpot_p50_s=p.get("p50_tpot_s"),
        tpot_p99_s=p.get("p99_tpot_s"),
        tpot_mean_s=p.get("mean_tpot_s"),
        output_tokens_per_s=p.get("output_tokens_per_s"),
        request_rate=p.get("request_throughput"),
        link_rx_bps=p.get("link_rx_bps"),
        link_tx_bps=p.get("link_tx_bps"),
        link_cap_bps=p.get("cap_bps"),
    )


def capacity(top: Topology, tier: str) -> int:
    t = top.tier(tier)
    return int((t.replicas_max or 1) * (t.max_ongoing_requests or 1))


def sweep_points(family: str, points: Sequence[Mapping[str, Any]], top: Topology) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    tiers = sorted({str(p["tier"]) for p in points})
    for tier in tiers:
        mine = sorted((p for p in points if p["tier"] == tier), key=lambda p: (p["concurrency"], str(p["cap"])))
        cap_n = capacity(top, tier)
        slo = top.tier(tier).slo_ttft_p99_s or 0.5
        healthy = [p for p in mine if p["concurrency"] <= cap_n // 2 and p.get("cap_bps") is None]
        if family == "client-bandwidth":
            healthy = [p for p in mine if p["concurrency"] <= cap_n and p.get("cap_bps") is None][:1]
        ref = _reference_from([_point_snapshot(p, slo) for p in healthy])
        uncapped = {p["concurrency"]: p for p in mine if p.get("cap_bps") is None}
        for p in mine:
            causes: list[str] = []
            if p["concurrency"] > cap_n:
                causes.append("queue")
            base = uncapped.get(p["concurrency"])
            if p.get("cap_bps") is not None and base is not None and p["cap_bps"] < 0.95 * float(base["link_rx_bps"]):
                causes.append("network")
            extra: dict[str, Any] = {"concurrency": p["concurrency"], "cap": p["cap"]}
            if family == "client-bandwidth" and base is not None and p.get("cap_bps") is not None and "network" in causes:
                extra["counterfactual"] = {"without_network": _point_snapshot(base, slo).to_dict()}
            out.append(record(f"{family}-{tier}-{p['concurrency']}-{p['cap']}", family, f"{tier}-{p['concurrency']}", causes,
                              _point_snapshot(p, slo), ref, **extra))  # fmt: skip
    return out


def split(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Alternate scenarios (sorted within each family) into ``tune`` and ``test``."""
    for family in sorted({r["family"] for r in records}):
        scenarios = sorted({r["scenario"] for r in records if r["family"] == family})
        half = {s: ("tune" if i % 2 == 0 else "test") for i, s in enumerate(scenarios)}
        for r in records:
            if r["family"] == family:
                r["split"] = half[r["scenario"]]
    return records


def _recorded(run_dir: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each source's recorded 4 s windows in a run directory."""
    out = []
    for source in INJECTION_SOURCES:
        path = run_dir / f"windows-{source}-4s.jsonl"
        if path.exists():
            out.append((source, [json.loads(line) for line in path.read_text().splitlines() if line.strip()]))
    return out


def build(results_dir: Path, top: Topology, edge_dirs: Sequence[Path] = ()) -> list[dict[str, Any]]:
    """The whole corpus from the committed results under ``results_dir`` (``bench/results``)."""
    records: list[dict[str, Any]] = []
    diag = results_dir / "diagnosis"
    for run_dir in (diag, *edge_dirs):
        result_file = run_dir / "diagnosis-bench.json"
        if result_file.exists():
            result = json.loads(result_file.read_text())
            for source, rows in _recorded(run_dir):
                records.extend(injection_windows(result, rows, source if run_dir == diag else f"{source}-{run_dir.name}"))
    for run_dir in sorted(p for p in results_dir.glob("diagnosis-compound*") if p.is_dir()):
        phases_file = run_dir / "phases.json"
        if phases_file.exists():
            result = json.loads(phases_file.read_text())
            for source, rows in _recorded(run_dir):
                records.extend(compound_windows(result, rows, source))
    for family in ("differentiation", "client-bandwidth"):
        summary = results_dir / family / "summary.json"
        if summary.exists():
            records.extend(sweep_points(family, json.loads(summary.read_text()), top))
    for rid, causes, snap, ref in brief_points():
        records.append(record(rid, "brief", rid.rsplit("-", 1)[0], causes, snap, ref))
    return split(records)


def write(records: Sequence[Mapping[str, Any]], path: Path) -> None:
    with path.open("w") as fh:
        for r in records:
            fh.write(json.dumps(r, sort_keys=True) + "\n")


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
