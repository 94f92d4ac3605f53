"""The figures issue 17 names, over counterfactually labelled windows (pure).

Definitions (the report repeats them):

- A window's **class** is its truth's primary: the cause class, among those in its truth set, whose
  remedy comes first (network, compute, queue); ``healthy`` with none.
- **AC@1** per (class, tier): of the windows of that class, the share whose top-ranked verdict is that
  class (``healthy`` for a healthy window); the lenient form counts a top verdict anywhere in the
  truth set (a compound window's other cause). Peers that never say ``healthy`` (the RCA methods)
  are scored on caused windows only; ``inferslice (forced choice)`` is inferslice on those terms
  (``forced_choice``), reported beside its own figure, never instead of it.
- **Exact cause set** per compound pair: of the windows whose truth set is that pair, the share whose
  predicted set (primary plus secondaries) is exactly it.
- **Attribution error** per (window, material statistic, class): |predicted - true| share of the
  statistic's excess, in percentage points; the true share is what removing the class's causes
  alone removes (the counterfactual twin), the predicted one the classifier's attributed seconds
  over its excess. Mean and P90 over the pairs whose true share is > 0; all pairs beside.
- **Cause shown** (beside AC@1, never instead of it): a caused window whose cause shows in a gauge
  of the window itself (``cause_shown``). A cause that ended leaves requests finishing slow in the
  next windows; the truth counts them, and no gauge of those windows can: the split says how much
  of a class's miss is that.
- **SLO met or breached** (beside AC@1, never instead of it): the truth counts a cause by the excess
  it adds over the window's reference, so a cause can bind a window whose own P99 TTFT (from the
  load generator's records) still meets the SLO, where nobody is paged and ``healthy`` is the
  classifier's reading of the SLO. The split says how much of a class's miss lies there.
- **By cause kind** (beside AC@1): the caused windows per injected kind or pair of kinds in the
  truth set (``cap``, ``wan_cross``, ``gpu+load``), so a class's figure does not hide which
  physical cause it misses.
- **A cause on the tier the truth did not count** (beside AC@1): a run that injected two causes on
  one tier gives windows where removing one of them took a share of the excess under the truth's
  bar, so the truth holds only the other; the classifier may still see, and name, the one left out.
  The split reads the caused windows by whether such an uncounted cause acted on them.
- **Calibration**: expected calibration error over 10 equal-width confidence bins (correct = the
  verdict's class is the window's class) and the bins for the reliability plot; the **confident
  share** per class: windows at or above the confident bar with a verdict other than ``unknown``.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from inferslice.bench.corpus_truth import PRIORITY as PRIORITY  # the remedy that comes first: a truth's primary
from inferslice.snapshot import SliceSnapshot

CLASSES = ("healthy", "queue", "network", "compute")
CAUSE_CLASSES = ("queue", "network", "compute")
COMPOUND_PAIRS = (("network", "queue"), ("compute", "queue"), ("compute", "network"))
REGIME_CLASS = {
    "healthy": "healthy",
    "queue_limited": "queue",
    "network_limited": "network",
    "compute_limited": "compute",
    "unknown": "unknown",
}
STATS = ("ttft", "tpot")
# The network cause a network kind calls for (inferslice.diagnosis.NetworkCause values)
EXPECTED_NETWORK_CAUSE = {"cap": "edge_cap", "wan_cross": "wan_link", "wan_rate": "wan_link", "wan_delay": "wan_delay"}


@dataclass(frozen=True)
class Verdict:
    """What one method said of one window, in cause classes."""

    primary: str  # a CLASSES value or "unknown"
    causes: tuple[str, ...] = ()  # the predicted cause set (primary first)
    ranking: tuple[str, ...] = ()  # every cause class ranked, most suspect first (RCA peers: their only output)
    confidence: float | None = None
    shares: Mapping[tuple[str, str], float] = field(default_factory=dict)  # (stat, class) -> fraction of the excess
    network_cause: str | None = None
    caps: tuple[str, ...] = ()  # why its confidence is held below the bar (inferslice only)
    requests: float | None = None  # the requests its TTFT quantiles rest on


@dataclass(frozen=True)
class Truth:
    """The parts of a window's counterfactual truth the figures use."""

    primary: str  # a CLASSES value
    causes: tuple[str, ...]
    kinds: tuple[str, ...]
    tier: str
    excess: Mapping[str, float | None]  # per stat, seconds (None: immaterial)
    shares: Mapping[tuple[str, str], float]  # (stat, class) -> true share of that stat's excess
    # The clean twin's same window breached the SLO (or had a material excess) itself: no injected
    # cause explains that breach, so the counterfactual labels it healthy; the figures keep it there.
    clean_breach: bool = False

    @classmethod
    def of(cls, truth: Mapping[str, Any], tier: str) -> Truth:
        primary = REGIME_CLASS.get(str(truth.get("primary", "healthy")), "healthy")
        excess = {s: (truth.get("excess_s") or {}).get(s) for s in STATS}
        shares: dict[tuple[str, str], float] = {}
        for eff in truth.get("effects") or ():
            c = str(eff.get("cls"))
            for s in STATS:
                v = (eff.get("share") or {}).get(s)
                if v is not None and excess.get(s) is not None:
                    shares[(s, c)] = min(1.0, shares.get((s, c), 0.0) + float(v))
        causes, kinds = tuple(truth.get("causes") or ()), tuple(truth.get("kinds") or ())
        return cls(primary, causes, kinds, tier, excess, shares, bool(truth.get("clean_breach")))


def forced_choice(v: Verdict) -> Verdict:
    """``v`` on the RCA peers' terms: every cause class ranked, "no cause" not an answer. The peers
    are scored on caused windows and never say healthy, so their AC@1 is a choice among causes; this
    puts inferslice to the same choice. A verdict with a cause keeps its ranking; a healthy or
    unknown one ranks the classes by attributed share (summed over the statistics), ties and zero
    shares by remedy priority, the order the peers fall back to."""
    if v.ranking:
        return v
    share = {c: sum(s for (_, k), s in v.shares.items() if k == c) for c in CAUSE_CLASSES}
    return replace(v, ranking=tuple(sorted(CAUSE_CLASSES, key=lambda c: (-share[c], PRIORITY.index(c)))))


def ranked_primary(v: Verdict) -> str:
    return v.ranking[0] if v.ranking else v.primary


def rate(hits: int, n: int) -> float | None:
    """A share to four places; ``None`` of nothing."""
    return round(hits / n, 4) if n else None


def ac1(pairs: Sequence[tuple[Truth, Verdict]], *, ranked: bool = False, caused_only: bool = False) -> dict[str, Any]:
    """AC@1 per class and per (class, tier), strict and lenient, with window counts."""
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])  # n, strict hits, lenient hits
    for t, v in pairs:
        if caused_only and t.primary == "healthy":
            continue
        top = ranked_primary(v) if ranked else v.primary
        strict = top == t.primary
        lenient = strict or (top in t.causes)
        for key in ((t.primary, t.tier), (t.primary, "all")):
            c = cells[key]
            c[0] += 1
            c[1] += strict
            c[2] += lenient
    per_class: dict[str, Any] = {}
    for (cls, tier), (n, s, le) in sorted(cells.items()):
        per_class.setdefault(cls, {})[tier] = {"windows": n, "ac1": rate(s, n), "ac1_lenient": rate(le, n)}
    return per_class


def healthy_by_clean_twin(pairs: Sequence[tuple[Truth, Verdict]]) -> dict[str, Any]:
    """AC@1 on the healthy windows split by whether their clean twin met the SLO, and what the verdict
    said on those whose twin breached it (the workload queued on its own: no injected cause, so the
    truth says healthy while the SLO is missed). Beside the healthy AC@1, never instead of it."""
    out: dict[str, Any] = {}
    for key, breach in (("clean_met", False), ("clean_breached", True)):
        said: dict[str, int] = defaultdict(int)
        for t, v in pairs:
            if t.primary == "healthy" and t.clean_breach is breach:
                said[v.primary] += 1
        n = sum(said.values())
        out[key] = {"windows": n, "ac1": rate(said.get("healthy", 0), n), "said": dict(sorted(said.items()))}
    return out


def named(pairs: Sequence[tuple[Truth, Verdict]], *, ranked: bool = False) -> dict[str, Any]:
    """On the caused windows: how often each class is named first, and the share named right over all
    classes together. Beside the per-class AC@1, never instead of it: a method that names one class on
    nearly every window reaches a high AC@1 on that class, and this says so."""
    said: dict[str, int] = defaultdict(int)
    n = right = 0
    for t, v in pairs:
        if t.primary == "healthy":
            continue
        top = ranked_primary(v) if ranked else v.primary
        said[top] += 1
        n += 1
        right += top == t.primary
    return {"windows": n, "accuracy": rate(right, n), "share": {c: rate(k, n) for c, k in sorted(said.items())}}


SHOWN_LINK_RATIO = 0.8  # a link at 80 % of its cap or rate: a shaper delivers 85-95 % of its rate when it binds
SHOWN_RTT_S = 0.025  # a WAN RTT 25 ms over its base: half the truth's 50 ms TTFT floor, in the one round trip a first token pays
SHOWN_GPU_SHARE = 0.9  # a share under 0.9 of the allocation: a neighbour takes more than a tenth of the GPU
SHOWN_KV_CACHE = 0.9  # vLLM preempts sequences as the paged KV cache fills


def cause_shown(cls: str, snap: SliceSnapshot) -> bool:
    """Whether a gauge of the window shows a cause of class ``cls`` (not a quantile: a gauge a
    cause moves while it acts). Network: the edge at ``SHOWN_LINK_RATIO`` of its cap (or of its
    physical rate when uncapped), the path's WAN link at it of its rate, or the path's RTT
    ``SHOWN_RTT_S`` over its base. Compute: the GPU share under ``SHOWN_GPU_SHARE``, preemptions, or
    the KV cache at 90 %. Queue: a request waiting (the queue-time histogram keeps a drained queue's
    waits, so it is not a gauge of one standing now)."""
    if cls == "network":
        cap = snap.edge_cap_bps or snap.link_capacity_bps
        edge = snap.link_rx_bps is not None and cap is not None and cap > 0 and snap.link_rx_bps >= SHOWN_LINK_RATIO * cap
        wan_cap = snap.wan_capacity_bps
        wan = snap.wan_rx_bps is not None and wan_cap is not None and wan_cap > 0 and snap.wan_rx_bps >= SHOWN_LINK_RATIO * wan_cap
        base = snap.wan_base_rtt_s  # a base of 0 is none (as ``attribution.added_delay_s`` reads it)
        rtt = snap.wan_rtt_s is not None and base is not None and base > 0 and snap.wan_rtt_s - base >= SHOWN_RTT_S
        return bool(edge or wan or rtt)
    if cls == "compute":
        return (
            (snap.gpu_share is not None and snap.gpu_share < SHOWN_GPU_SHARE)
            or (snap.preemptions_per_s is not None and snap.preemptions_per_s > 0)
            or (snap.kv_cache_usage is not None and snap.kv_cache_usage >= SHOWN_KV_CACHE)
        )
    if cls == "queue":
        return snap.requests_waiting is not None and snap.requests_waiting > 0
    return False


def ac1_cause_shown(pairs: Iterable[tuple[Truth, Verdict, SliceSnapshot]]) -> dict[str, Any]:
    """AC@1 per cause class on the caused windows whose cause shows in a gauge (``cause_shown``) and
    on those where none does, with window counts: beside the per-class AC@1, never instead of it."""
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # shown, shown right, not shown, not shown right
    for t, v, snap in pairs:
        if t.primary == "healthy":
            continue
        c = tally[t.primary]
        k = 0 if cause_shown(t.primary, snap) else 2
        c[k] += 1
        c[k + 1] += v.primary == t.primary
    return {
        cls: {"shown": {"windows": a, "ac1": rate(b, a)}, "not_shown": {"windows": x, "ac1": rate(y, x)}}
        for cls, (a, b, x, y) in sorted(tally.items())
    }


def ac1_by_slo(rows: Iterable[tuple[Truth, Verdict, float | None, float | None]]) -> dict[str, Any]:
    """AC@1 per cause class on caused windows whose P99 TTFT (the truth's own, from the request
    records) breached the SLO and on those that met it, with how many of each were read healthy.
    ``rows``: (truth, verdict, P99 TTFT s, SLO s); a window missing either latency is left out."""
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])  # windows, right, said healthy
    for t, v, p99, slo in rows:
        if t.primary == "healthy" or p99 is None or slo is None:
            continue
        c = tally[(t.primary, "breached" if p99 > slo else "met")]
        c[0] += 1
        c[1] += v.primary == t.primary
        c[2] += v.primary == "healthy"
    out: dict[str, Any] = {}
    for (cls, side), (n, right, healthy) in sorted(tally.items()):
        out.setdefault(cls, {})[side] = {"windows": n, "ac1": rate(right, n), "said_healthy": healthy}
    return out


def confusion(pairs: Iterable[tuple[Truth, Verdict]]) -> dict[str, dict[str, int]]:
    out: dict[str, Counter[str]] = {c: Counter() for c in CLASSES}
    for t, v in pairs:
        out[t.primary][v.primary] += 1
    return {c: dict(row) for c, row in out.items() if row}


def compound(pairs: Iterable[tuple[Truth, Verdict]]) -> dict[str, dict[str, Any]]:
    """Exact cause-set accuracy per compound pair (truth set == that pair)."""
    tally: dict[tuple[str, ...], list[int]] = {tuple(sorted(p)): [0, 0] for p in COMPOUND_PAIRS}
    for t, v in pairs:
        key = tuple(sorted(t.causes))
        if key in tally:
            tally[key][0] += 1
            tally[key][1] += set(v.causes) == set(t.causes)
    return {"+".join(k): {"windows": n, "exact": hits, "accuracy": rate(hits, n)} for k, (n, hits) in tally.items()}


def _p90(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    ordered = sorted(xs)
    # The nearest-rank P90: the smallest value with at least 90 % of the pairs at or below it.
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def attribution(pairs: Iterable[tuple[Truth, Verdict]]) -> dict[str, Any]:
    """Attribution error in percentage points over (window, material statistic, class)."""
    positive: list[float] = []
    every: list[float] = []
    by_class: dict[str, list[float]] = defaultdict(list)
    for t, v in pairs:
        for s in STATS:
            if t.excess.get(s) is None:
                continue
            for c in CAUSE_CLASSES:
                true = t.shares.get((s, c), 0.0)
                err = 100.0 * abs(v.shares.get((s, c), 0.0) - true)
                every.append(err)
                if true > 0:
                    positive.append(err)
                    by_class[c].append(err)

    def summary(xs: Sequence[float]) -> dict[str, Any]:
        p90 = _p90(xs)
        return {
            "pairs": len(xs),
            "mean_pp": round(sum(xs) / len(xs), 2) if xs else None,
            "p90_pp": round(p90, 2) if p90 is not None else None,
        }

    return {
        "true_share_positive": summary(positive),
        "all_pairs": summary(every),
        "by_class_true_share_positive": {c: summary(xs) for c, xs in sorted(by_class.items())},
    }


def calibration(pairs: Sequence[tuple[Truth, Verdict]], bins: int = 10) -> dict[str, Any]:
    """Expected calibration error and the reliability bins (windows without a confidence left out)."""
    rows = [(float(v.confidence), v.primary == t.primary) for t, v in pairs if v.confidence is not None]
    table = []
    ece = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, ok) for c, ok in rows if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if not inside:
            continue
        conf = sum(c for c, _ in inside) / len(inside)
        acc = sum(ok for _, ok in inside) / len(inside)
        ece += len(inside) / len(rows) * abs(acc - conf)
        table.append({"lo": lo, "hi": hi, "windows": len(inside), "confidence": round(conf, 4), "accuracy": round(acc, 4)})
    return {"windows": len(rows), "ece": round(ece, 4) if rows else None, "bins": table}


def confident_share(pairs: Iterable[tuple[Truth, Verdict]], bar: float) -> dict[str, Any]:
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # windows, confident, confident and right
    for t, v in pairs:
        c = tally[t.primary]
        c[0] += 1
        sure = v.primary != "unknown" and v.confidence is not None and v.confidence >= bar
        c[1] += sure
        c[2] += sure and v.primary == t.primary
    return {cls: {"windows": n, "confident": rate(k, n), "confident_and_right": rate(r, n)} for cls, (n, k, r) in sorted(tally.items())}


def network_causes(pairs: Iterable[tuple[Truth, Verdict]]) -> dict[str, Any]:
    """On network-class windows with one network kind: the network cause named, per kind."""
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    for t, v in pairs:
        kinds = [k for k in t.kinds if k in EXPECTED_NETWORK_CAUSE]
        if t.primary != "network" or len(kinds) != 1 or v.primary != "network":
            continue
        tally[kinds[0]][str(v.network_cause)] += 1
    out = {}
    for kind, named in sorted(tally.items()):
        n = sum(named.values())
        out[kind] = {"windows": n, "expected": EXPECTED_NETWORK_CAUSE[kind], "accuracy": rate(named[EXPECTED_NETWORK_CAUSE[kind]], n),
                     "named": dict(named)}  # fmt: skip
    return out


def ac1_by_kind(pairs: Iterable[tuple[Truth, Verdict]]) -> dict[str, Any]:
    """AC@1 on the caused windows per injected cause kind, or pair of kinds (``cap``, ``wan_cross``,
    ``gpu+load``...), with what was said: which physical causes a class's figure hides, most windows
    first. A window's kinds are those in its truth set, not every one the run injected."""
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    right: Counter[str] = Counter()
    for t, v in pairs:
        if t.primary == "healthy" or not t.kinds:
            continue
        key = "+".join(sorted(set(t.kinds)))
        tally[key][v.primary] += 1
        right[key] += v.primary == t.primary
    out: dict[str, Any] = {}
    for k, said in sorted(tally.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        n = sum(said.values())
        out[k] = {"windows": n, "ac1": rate(right[k], n), "said": dict(said.most_common())}
    return out


def ac1_by_uncounted(pairs: Iterable[tuple[Truth, Verdict]]) -> dict[str, Any]:
    """AC@1 per cause class on the caused windows where a cause of another class acted on the tier
    but under the truth's bar (removing it took a positive share of the excess, too little to
    count: ``uncounted``), and on the rest, with how often the verdict named an uncounted class. A
    cause injected on the tier but not acting in the window (before its onset, after its end) has
    no share there and does not count."""
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])  # windows, right, named an uncounted class
    for t, v in pairs:
        if t.primary == "healthy":
            continue
        left_out = {c for (_, c), share in t.shares.items() if share > 0} - set(t.causes) - {"healthy"}
        c = tally[(t.primary, "uncounted" if left_out else "none")]
        c[0] += 1
        c[1] += v.primary == t.primary
        c[2] += v.primary in left_out
    out: dict[str, Any] = {}
    for (cls, side), (n, r, named) in sorted(tally.items()):
        out.setdefault(cls, {})[side] = {"windows": n, "ac1": rate(r, n), "named_uncounted": named}
    return out


# A number standing alone (a count, a margin), not one inside a word: P99 and 2x stay as they are.
_VALUE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def _reason(cap: str) -> str:
    """A cap's reason with its window's values taken out, so that windows tally together: the text
    up to its colon, each standalone number as N (\"P99 TTFT from 3 requests\" -> \"P99 TTFT from N requests\")."""
    return _VALUE.sub("N", cap.split(":")[0])


def cap_reasons(pairs: Iterable[tuple[Truth, Verdict]]) -> dict[str, Any]:
    """Per class: how many windows were capped below the bar, by reason (text up to its colon), and
    the request counts the windows' quantiles rested on (min / median): why a class is not confident."""
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    counts: dict[str, list[float]] = defaultdict(list)
    windows: Counter[str] = Counter()
    for t, v in pairs:
        windows[t.primary] += 1
        if v.requests is not None:
            counts[t.primary].append(v.requests)
        for c in dict.fromkeys(_reason(c) for c in v.caps):
            tally[t.primary][c] += 1
    out: dict[str, Any] = {}
    for cls in sorted(windows):
        xs = sorted(counts.get(cls, []))
        out[cls] = {
            "windows": windows[cls],
            "capped_by": dict(tally[cls].most_common()),
            "requests_min": xs[0] if xs else None,
            "requests_median": xs[len(xs) // 2] if xs else None,
        }
    return out
