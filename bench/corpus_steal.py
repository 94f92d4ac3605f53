"""AC@1 by the host's CPU steal: does a starved host explain the classifier's misses?

On a VM whose hypervisor steals the CPU the testbed's delay lines, load generators and engines all
run late: a window measured then holds the host's stall, not (only) the injected cause, and its
counterfactual truth compares two runs the host slowed by different amounts. The corpus records the
steal over each window (``window_steal``) and the most over the twins its truth reads
(``truth_steal_max``, ``corpus_gen``). A window's steal here is the larger of the two, the reading
``corpus score --max-steal`` leaves windows out by. This table splits the score's windows by it,
so a reader sees whether the misses gather where the host was starved. It is beside the per-class
figures, never instead of them: the bands are not a split chosen before the score.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from inferslice.bench import corpus_metrics as cm
from inferslice.bench.corpus_windows import LabelledWindow

# Band edges as shares of the CPU: under 5 % a VM's steal is background; 10 % is the `--max-steal`
# bar the corpus's blind plans fixed; 25 % is `common/hostcpu.STARVED_SHARE`, where the demo's
# verdicts are void.
EDGES = (0.05, 0.10, 0.25)
UNMEASURED = "not measured"
Key = tuple[int, str, str, int]


def steal_of(lines: Iterable[Mapping[str, Any]]) -> dict[Key, float | None]:
    """Each line's window key and its steal: the larger of ``window_steal`` and ``truth_steal_max``,
    None when the line measured neither (corpora generated before the field)."""
    out: dict[Key, float | None] = {}
    for r in lines:
        shares = [float(x) for x in (r.get("window_steal"), r.get("truth_steal_max")) if isinstance(x, (int, float))]
        out[(int(r["seed"]), str(r.get("run", "")), str(r["tier"]), int(r.get("window", 0)))] = max(shares) if shares else None
    return out


def band(share: float | None) -> str:
    if share is None:
        return UNMEASURED
    lo = 0.0
    for hi in EDGES:
        if share < hi:
            return f"{lo:.0%}-{hi:.0%}"
        lo = hi
    return f">= {lo:.0%}"


def bands_in_order() -> list[str]:
    return [band(0.0), *(band(e) for e in EDGES), UNMEASURED]


def by_steal(
    ws: Sequence[LabelledWindow], verdicts: Mapping[str, cm.Verdict], steal: Mapping[Key, float | None]
) -> dict[str, dict[str, Any]]:
    """Per source and steal band: windows, and inferslice's AC@1 (``verdicts``, by window id) per
    truth class (all tiers)."""
    out: dict[str, dict[str, Any]] = {}
    for source in sorted({w.source for w in ws}):
        groups: dict[str, list[tuple[cm.Truth, cm.Verdict]]] = {}
        for w in ws:
            if w.source == source:
                groups.setdefault(band(steal.get(w.key)), []).append((cm.Truth.of(w.truth, w.tier), verdicts[w.id]))
        out[source] = {
            b: {"windows": len(pairs), "ac1": {c: per["all"] for c, per in cm.ac1(pairs).items()}}
            for b in bands_in_order()
            if (pairs := groups.get(b))
        }
    return out


def markdown(by: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The table's lines (empty when no scored window measured its steal)."""
    if not any(b != UNMEASURED for per in by.values() for b in per):
        return []
    lines = [
        "## AC@1 by the host's CPU steal",
        "",
        "The larger of the window's steal and its truth twins' (`bench/corpus_steal.py`); % (windows).",
        "Beside the figures above, not instead of them: the bands were not fixed before the score.",
        "",
        "| source | steal | windows | " + " | ".join(cm.CLASSES) + " |",
        "|---|---|---|" + "---|" * len(cm.CLASSES),
    ]
    for source, per in by.items():
        for b, cell in per.items():
            cells = []
            for c in cm.CLASSES:
                a = cell["ac1"].get(c)
                cells.append("-" if a is None else f"{a['ac1'] * 100:.1f} ({a['windows']})")
            lines.append(f"| {source} | {b} | {cell['windows']} | " + " | ".join(cells) + " |")
    return [*lines, ""]
