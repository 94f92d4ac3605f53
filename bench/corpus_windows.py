"""Every committed corpus window as the classifier sees it: the snapshot and the reference beside it.

One reader for the tests that run over the corpus itself (the missing-field rule) and for the
scoring, so both judge a window against the same reference. Two corpora:

- issue 9's ``bench/results/diagnosis/corpus.jsonl`` (reference inline, ``saturation``);
- issue 17's randomised counterfactual corpora (``inferslice bench corpus generate``): any
  ``windows.jsonl`` (or ``.jsonl.gz``) under ``bench/results/diagnosis/``. One line per window (one
  run, tier and time), with both sources' snapshots: a window is two ``LabelledWindow`` views, one
  per source, scored apart and never pooled as independent samples. Each snapshot carries the
  reference the generator learned from the same seed's clean twin (every window of the run with all
  causes removed: the tier's unconstrained behaviour under this very workload, the stand-in for
  the history a deployed service learns its reference from); the decode saturation rate, which a
  snapshot cannot carry, is learned here from the same clean-twin windows the same way.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferslice.bench.corpus_metrics import CAUSE_CLASSES, REGIME_CLASS, STATS, Verdict
from inferslice.bottleneck import DEFAULT, Thresholds, classify
from inferslice.bottleneck.reference import LearningPolicy, learn_reference
from inferslice.diagnosis import Diagnosis, Regime, SloState
from inferslice.snapshot import Reference, SliceSnapshot, snapshot_from_dict

ISSUE9_CORPUS = Path("bench/results/diagnosis/corpus.jsonl")
RESULTS = Path("bench/results/diagnosis")
WINDOWS_NAMES = ("windows.jsonl", "windows.jsonl.gz")
SOURCES = ("prometheus", "embedded")
# Lines written since the collectors report an uncapped edge's cap at the link's physical rate carry
# this key; older lines are read as the collectors read the same HTB class now (``as_collected_now``).
EDGE_CAP_KEY = "edge_cap"
EDGE_CAP_REPORTED = "uncapped at the physical rate"
_LEARN = LearningPolicy(alpha=0.1, min_confidence=0.0, min_samples=1)  # as the generator learns the inline reference
_HEALTHY = Diagnosis(slice="", regime=Regime.HEALTHY, confidence=1.0, slo=SloState.MET)


@dataclass(frozen=True)
class Window:
    id: str
    snapshot: SliceSnapshot
    reference: Reference | None  # what ``classify`` gets beside the snapshot's own ``ref_*`` fields


@dataclass(frozen=True)
class LabelledWindow(Window):
    """One source's view of one issue-17 corpus window, with its counterfactual truth."""

    seed: int = 0
    run: str = ""  # the twin: "clean", "-c0", "-c1", "all"
    tier: str = ""
    source: str = ""
    window: int = 0
    truth: Mapping[str, Any] = field(default_factory=dict)  # corpus_truth.Truth as a dict (+ primary, healthy)
    causes: tuple[Mapping[str, Any], ...] = ()  # the run's causes present in this twin (kind, class, tier, ...)
    stats: Mapping[str, Any] = field(default_factory=dict)  # the window's request statistics (truth's P99s, counts)

    @property
    def key(self) -> tuple[int, str, str, int]:
        """The window itself, whichever source views it."""
        return (self.seed, self.run, self.tier, self.window)


def issue9_window(rec: Mapping[str, Any]) -> Window:
    snap = snapshot_from_dict(rec["snapshot"])
    sat = rec.get("saturation")
    ref = Reference(tokens_per_s_saturation=float(sat), source="learned", samples=99) if sat else None
    return Window(str(rec["id"]), snap, ref)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:  # type: ignore[operator]
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _saturations(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[int, str, str], Reference | None]:
    """Per (seed, tier, source): the reference learned from the clean twin's windows, in window order."""
    clean: dict[tuple[int, str, str], list[tuple[int, Mapping[str, Any]]]] = defaultdict(list)
    for r in rows:
        if r.get("run") != "clean":
            continue
        for src, snap in (r.get("snapshots") or {}).items():
            if snap:
                clean[(int(r["seed"]), str(r["tier"]), str(src))].append((int(r["window"]), snap))
    out: dict[tuple[int, str, str], Reference | None] = {}
    for key, snaps in clean.items():
        ref: Reference | None = None
        for _, snap in sorted(snaps, key=lambda x: x[0]):
            ref = learn_reference(ref, snapshot_from_dict(snap), _HEALTHY, _LEARN)
        out[key] = ref
    return out


def _shares(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[int, str, str, int, str], float]:
    """Per (seed, run, tier, window, source): the GPU share the window reported. A corpus window's
    ``prior_gpu_share`` is its predecessor's (the windows of a run are contiguous), as the diagnosis
    service fills it from the window it diagnosed before (``DiagnosisService``)."""
    out: dict[tuple[int, str, str, int, str], float] = {}
    for r in rows:
        for src, snap in (r.get("snapshots") or {}).items():
            share = (snap or {}).get("gpu_share")
            if share is not None:
                out[(int(r["seed"]), str(r.get("run", "")), str(r["tier"]), int(r.get("window", 0)), str(src))] = float(share)
    return out


def as_collected_now(snap: Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot recorded before the collectors clamped the edge's cap (issue 17, 2026-12-06), as
    they read the same window now. The testbed's HTB exports the client-edge class's ceil on every
    window; uncapped, that is the 10 Gbit/s line rate, which the collectors dropped (``< nominal``)
    and now report at ``link_capacity_bps`` (``clamp_max``). So a recorded window with the link's
    rate and its physical rate but no cap was an uncapped edge: no corpus window lost the gauge
    otherwise (those without a cap cause either have a cap or lack the link altogether)."""
    out = dict(snap)
    if out.get("link_cap_bps") is None and out.get("link_rx_bps") is not None and out.get("link_capacity_bps") is not None:
        out["link_cap_bps"] = out["link_capacity_bps"]
    return out


def labelled(rows: Iterable[Mapping[str, Any]], sources: Sequence[str] = SOURCES) -> list[LabelledWindow]:
    """Every (window, source) view of issue-17 corpus lines; a source that recorded nothing is left out."""
    rows = list(rows)
    refs = _saturations(rows)
    shares = _shares(rows)
    out: list[LabelledWindow] = []
    for r in rows:
        seed, tier = int(r["seed"]), str(r["tier"])
        fill = r.get(EDGE_CAP_KEY) != EDGE_CAP_REPORTED
        for src in sources:
            snap = (r.get("snapshots") or {}).get(src)
            if not snap:
                continue
            if fill:
                snap = as_collected_now(snap)
            prior = shares.get((seed, str(r.get("run", "")), tier, int(r.get("window", 0)) - 1, src))
            if prior is not None and snap.get("prior_gpu_share") is None:
                snap = {**snap, "prior_gpu_share": prior}
            learned = refs.get((seed, tier, src))
            ref = (
                Reference(tokens_per_s_saturation=learned.tokens_per_s_saturation, source="learned", samples=learned.samples)
                if learned is not None and learned.tokens_per_s_saturation is not None
                else None
            )
            out.append(
                LabelledWindow(
                    id=f"{r['id']}/{src}",
                    snapshot=snapshot_from_dict(snap),
                    reference=ref,
                    seed=seed,
                    run=str(r.get("run", "")),
                    tier=tier,
                    source=src,
                    window=int(r.get("window", 0)),
                    truth=r.get("truth") or {},
                    causes=tuple(r.get("causes") or ()),
                    stats=r.get("stats") or {},
                )
            )
    return out


def corpus_files(root: Path) -> list[Path]:
    """Every committed issue-17 corpus file under ``bench/results/diagnosis``."""
    base = root / RESULTS
    return sorted(p for name in WINDOWS_NAMES for p in base.rglob(name)) if base.exists() else []


def committed(root: Path) -> Iterator[Window]:
    """Every committed corpus window (both corpora; issue 17's one view per source)."""
    path = root / ISSUE9_CORPUS
    if path.exists():
        for rec in read_jsonl(path):
            yield issue9_window(rec)
    for p in corpus_files(root):
        yield from labelled(read_jsonl(p))


# -- inferslice's verdict on a window (in the corpus's cause classes) -------------------------------
def inferslice_verdict(w: Window, thresholds: Thresholds = DEFAULT) -> Verdict:
    """``classify`` on the window, as a ``corpus_metrics.Verdict``: its primary, its cause set
    (primary then secondaries), every class ranked (the set, then by attributed share), its
    confidence, its attributed share of each P99's excess and the network cause it names."""
    d = classify(w.snapshot, w.reference, thresholds)
    primary = REGIME_CLASS[d.regime.value]
    causes = tuple(REGIME_CLASS[r.value] for r in (d.regime, *d.secondary) if REGIME_CLASS[r.value] in CAUSE_CLASSES)
    frac = d.attribution.fraction if d.attribution is not None else (lambda _r: 0.0)
    rest = sorted((c for c in CAUSE_CLASSES if c not in causes), key=lambda c: -frac(c))
    shares: dict[tuple[str, str], float] = {}
    if d.attribution is not None:
        for stat in STATS:
            share = d.attribution.share(f"{stat}_p99")
            if share is not None and share.excess_s > 0:
                for c in CAUSE_CLASSES:
                    shares[(stat, c)] = min(1.0, share.seconds(c) / share.excess_s)
    return Verdict(
        primary=primary,
        causes=causes,
        ranking=(*causes, *rest) if causes else (),
        confidence=d.confidence,
        shares=shares,
        network_cause=d.network_cause.value if d.network_cause is not None else None,
        caps=tuple(c for e in d.evidence if e.signal == "confidence_cap" for c in e.note.split("; ")),
        requests=d.request_count,
    )
