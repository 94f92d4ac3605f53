"""inferslice's peers on the issue-17 corpus, given what inferslice is given (pure but for ``run_rca``).

Every method sees the same window: the snapshot (its cap, link rate and physical capacity, the WAN
path, gauges, the SLO) and the reference learned from the seed's clean twin.

- **Naive rules** (what a team without a diagnosis writes): link utilisation (a link at >= 0.9 of
  its cap, physical rate or WAN capacity -> network; else P99 TTFT over the SLO -> queue; else P99
  TPOT over twice its reference -> compute), TTFT (over the SLO -> queue), queue length (anything
  waiting -> queue), max normalised utilisation (the resource whose utilisation is highest, when it
  is >= 0.9: link/WAN rate over capacity, requests waiting over running, GPU utilisation or KV
  cache).
- **RCAEval's BARO, NSigma, CIRCA and RCD** (RCD in its own environment, ``bench/rcaeval-rcd/``)
  rank the metric series of a case: the seed's clean twin, same tier and source, as the normal period, then this run's windows
  up to the window scored; ``inject_time`` between them. The columns are every number inferslice
  reads, raw and normalised by what inferslice judges them against (the SLO, the reference, the
  cap and capacities), so the reference and the SLO are in the data the peers rank.
- Two **mappings** of a ranked column to a cause: per metric family (link/WAN -> network;
  waiting, queue time, replicas -> queue; GPU share/utilisation, KV cache, preemptions -> compute;
  latency and throughput columns are symptoms, not causes, and are skipped), and the best mapping
  learned on the tune seeds (each column to the class that is most often right when it ranks first).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from inferslice.bench.corpus_metrics import Verdict
from inferslice.bench.corpus_windows import LabelledWindow
from inferslice.snapshot import SliceSnapshot

RCA_METHODS = ("baro", "nsigma", "circa", "rcd")
# RCD runs in its own interpreter: causal-learn 0.1.2.3 with RCAEval's patch (bench/rcaeval-rcd/), which
# CIRCA's causal-learn cannot share; the others in RCAEval's environment.
OWN_INTERPRETER = ("rcd",)
RULE_LINK_RATIO = 0.9  # the NOC rule's "link at >= 90 % of the cap" (CONTRACTS: peers as their users configure them)
RULE_UTIL = 0.9


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None and b > 0 else None


def _slo(s: SliceSnapshot) -> float:
    return s.slo_ttft_p99_s if s.slo_ttft_p99_s else 0.5


def link_utilisation(s: SliceSnapshot) -> float | None:
    """The highest of the link's rate over its cap, over its physical rate, and the WAN path's."""
    vals = [_div(s.link_rx_bps, s.link_cap_bps), _div(s.link_rx_bps, s.link_capacity_bps), _div(s.wan_rx_bps, s.wan_capacity_bps)]
    known = [v for v in vals if v is not None]
    return max(known) if known else None


def _rule(primary: str) -> Verdict:
    return Verdict(primary, (primary,) if primary != "healthy" else (), (primary,) if primary != "healthy" else ())


def rule_link(s: SliceSnapshot) -> Verdict:
    util = link_utilisation(s)
    if util is not None and util >= RULE_LINK_RATIO:
        return _rule("network")
    if s.ttft_p99_s is not None and s.ttft_p99_s > _slo(s):
        return _rule("queue")
    ref = s.ref_tpot_p99_s or s.ref_tpot_p50_s
    if s.tpot_p99_s is not None and ref and s.tpot_p99_s > 2 * ref:
        return _rule("compute")
    return _rule("healthy")


def rule_ttft(s: SliceSnapshot) -> Verdict:
    return _rule("queue" if s.ttft_p99_s is not None and s.ttft_p99_s > _slo(s) else "healthy")


def rule_queue_length(s: SliceSnapshot) -> Verdict:
    return _rule("queue" if s.requests_waiting is not None and s.requests_waiting > 0 else "healthy")


def rule_max_utilisation(s: SliceSnapshot) -> Verdict:
    util = {
        "network": link_utilisation(s),
        "queue": _div(s.requests_waiting, max(s.requests_running or 0.0, 1.0)) if s.requests_waiting is not None else None,
        "compute": max((v for v in (s.gpu_utilization, s.kv_cache_usage) if v is not None), default=None),
    }
    known = {k: v for k, v in util.items() if v is not None}
    if not known:
        return _rule("healthy")
    best = max(known, key=lambda k: known[k])
    return _rule(best if known[best] >= RULE_UTIL else "healthy")


RULES: dict[str, Callable[[SliceSnapshot], Verdict]] = {
    "rule-link-util": rule_link,
    "rule-ttft-slo": rule_ttft,
    "rule-queue-length": rule_queue_length,
    "rule-max-util": rule_max_utilisation,
}


# -- RCAEval ---------------------------------------------------------------------------------------
# column -> (how it is read from a snapshot, its family's cause or None for a symptom)
def columns(s: SliceSnapshot) -> dict[str, float | None]:
    """Every number inferslice reads, raw and normalised the way inferslice judges it."""
    return {
        "latency_ttftp50": s.ttft_p50_s,
        "latency_ttftp99": s.ttft_p99_s,
        "latency_tpotp50": s.tpot_p50_s,
        "latency_tpotp99": s.tpot_p99_s,
        "latency_ttftoverslo": _div(s.ttft_p99_s, _slo(s)),
        "latency_ttftoverref": _div(s.ttft_p99_s, s.ref_ttft_p99_s),
        "latency_tpotoverref": _div(s.tpot_p99_s, s.ref_tpot_p99_s),
        "throughput_tokens": s.output_tokens_per_s,
        "throughput_tokensoverref": _div(s.output_tokens_per_s, s.ref_output_tokens_per_s),
        "throughput_requests": s.request_rate,
        "link_rx": s.link_rx_bps,
        "link_cap": s.link_cap_bps,
        "link_overcap": _div(s.link_rx_bps, s.link_cap_bps),
        "link_overcapacity": _div(s.link_rx_bps, s.link_capacity_bps),
        "wan_overcapacity": _div(s.wan_rx_bps, s.wan_capacity_bps),
        "wan_rttexcess": (s.wan_rtt_s - s.wan_base_rtt_s) if s.wan_rtt_s is not None and s.wan_base_rtt_s is not None else None,
        "queue_waiting": s.requests_waiting,
        "queue_running": s.requests_running,
        "queue_time": s.queue_time_p99_s,
        "queue_replicasatceiling": _div(s.replicas, s.replicas_max),
        "gpu_share": s.gpu_share,
        "gpu_utilization": s.gpu_utilization,
        "gpu_kvcache": s.kv_cache_usage,
        "gpu_preemptions": s.preemptions_per_s,
    }


def peer_python(repo: Path, peer: str) -> str | None:
    """A peer environment's interpreter: ``$INFERSLICE_<PEER>_PYTHON``, else ``.venv-<peer>`` under the
    repository when built (``make rcaeval-venv``, ``make rcd-venv``), else None (the peer is left out)."""
    env = os.environ.get(f"INFERSLICE_{peer.upper()}_PYTHON")
    if env:
        return env
    local = repo / f".venv-{peer}" / "bin" / "python"
    return str(local) if local.exists() else None


FAMILY_CAUSE = {"link": "network", "wan": "network", "queue": "queue", "gpu": "compute", "latency": None, "throughput": None}


def family_cause(column: str) -> str | None:
    return FAMILY_CAUSE.get(column.split("_", 1)[0])


def _series_key(w: LabelledWindow) -> tuple[int, str, str, str]:
    return (w.seed, w.run, w.tier, w.source)


def rca_cases(windows: Sequence[LabelledWindow]) -> list[dict[str, Any]]:
    """One case per caused window: the clean twin's windows (normal), then this run's windows up to it."""
    series: dict[tuple[int, str, str, str], list[LabelledWindow]] = defaultdict(list)
    for w in windows:
        series[_series_key(w)].append(w)
    for ws in series.values():
        ws.sort(key=lambda x: x.window)
    cases = []
    for w in windows:
        if not w.truth.get("causes") or w.run == "clean":
            continue
        normal = series.get((w.seed, "clean", w.tier, w.source), [])
        run = [x for x in series[_series_key(w)] if x.window <= w.window]
        if len(normal) < 3 or not run:
            continue
        rows = []
        for i, x in enumerate([*normal, *run]):
            row: dict[str, float] = {"time": float(i)}
            for col, v in columns(x.snapshot).items():
                if v is not None and math.isfinite(v):
                    row[col] = float(v)
            rows.append(row)
        cases.append({"id": w.id, "inject_time": float(len(normal)) - 0.5, "rows": rows})
    return cases


def run_rca(cases: Sequence[Mapping[str, Any]], python: str, methods: Sequence[str] = RCA_METHODS) -> dict[str, dict[str, Any]]:
    """``{method: {window id: {"ranks": [columns], "error": ...}}}`` from RCAEval's own interpreter,
    on ``rca_cases`` of the windows."""
    runner = Path(__file__).with_name("rcaeval_runner.py")
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        with inp.open("w") as fh:
            for case in cases:
                fh.write(json.dumps(case) + "\n")
        subprocess.run([python, str(runner), str(inp), str(out), "--methods", ",".join(methods)], check=True, timeout=7200)
        results: dict[str, dict[str, Any]] = defaultdict(dict)
        for line in out.read_text().splitlines():
            r = json.loads(line)
            results[r["method"]][r["id"]] = {"ranks": r["ranks"], "error": r["error"]}
    return dict(results)


def ranked_causes(ranks: Sequence[str], mapping: Mapping[str, str | None]) -> tuple[str, ...]:
    out: list[str] = []
    for col in ranks:
        c = mapping.get(col)
        if c is not None and c not in out:
            out.append(c)
    return tuple(out)


def family_mapping(cols: Sequence[str]) -> dict[str, str | None]:
    return {c: family_cause(c) for c in cols}


def learn_mapping(ranks: Mapping[str, Sequence[str]], truth_primary: Mapping[str, str]) -> dict[str, str | None]:
    """Each column to the cause class most often right when that column ranks first (tune windows only)."""
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for wid, rs in ranks.items():
        if rs and wid in truth_primary:
            votes[rs[0]][truth_primary[wid]] += 1
    return {col: c.most_common(1)[0][0] for col, c in votes.items()}


def rca_verdict(ranks: Sequence[str], mapping: Mapping[str, str | None], fallback: Sequence[str]) -> Verdict:
    """A peer's ranking as a verdict: its causes in order (unmapped columns skipped; classes it never
    reached appended in ``fallback`` order, so AC@1 counts only what it ranked first)."""
    causes = ranked_causes(ranks, mapping)
    full = tuple([*causes, *(c for c in fallback if c not in causes)])
    top = causes[0] if causes else "unknown"
    return Verdict(top, causes[:1], full if causes else ())
