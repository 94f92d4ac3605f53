"""The missing-field rule over the committed corpus windows (issue 17).

Two properties of the classifier on real windows, each a counterexample list:

- removing any one field a window carries never turns a confident verdict into a different
  confident one (a missing gauge may make a verdict unsure, never confidently other);
- a link cap reported at k times its value never turns a network verdict into a confident queue
  (a stale or misread cap must not send the operator to add replicas).

``inferslice bench corpus fieldcheck`` runs both over every committed window: about 1.4 M
classifications, five minutes on one core of the development machine. Run it whenever the verdict
code changes, before a version is frozen (``FROZEN.md`` records the result). The test suite runs the
same functions over ``sample``: every confident verdict class of every source and tier, the windows
near the confidence bar and with a second cause first, and the windows that broke the rule before.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferslice.bench.corpus_windows import LabelledWindow, Window, committed
from inferslice.bottleneck import classify
from inferslice.diagnosis import CONFIDENT, Diagnosis, Regime
from inferslice.snapshot import SNAPSHOT_FIELDS, Reference, SliceSnapshot

Classifier = Callable[[SliceSnapshot, Reference | None], Diagnosis]
NOT_DATA = ("slice", "id", "window_end_s", "window_s")  # labels of the window, not measurements
CAP_FACTORS = (2.0, 10.0)  # a cap read from a stale config (2x) or off by a unit prefix (10x)
# Windows that broke the rule in an earlier version (docs/diagnosis.md): always in the sample. v1
# (65adf171) on s2002--c1-premium-w04, v3 (3385bfcb) on s9004--c1-standard-w03.
HISTORY = ("s2002--c1-premium-w04/", "s9004--c1-standard-w03/")
NEAR_BAR = 0.1  # a confident verdict within this of the bar is "near": one removal can cross it
PER_STRATUM = 40  # sample windows per (source, tier, verdict, near) stratum: ~2,000 windows, ~15 s


def _classify(snap: SliceSnapshot, ref: Reference | None) -> Diagnosis:
    return classify(snap, ref)


def confident(d: Diagnosis) -> bool:
    return d.regime is not Regime.UNKNOWN and d.confidence >= CONFIDENT


@dataclass(frozen=True)
class Flip:
    window: str
    change: str  # "without <field>" or "cap x<k>"
    before: str  # "network_limited 0.93"
    after: str

    def __str__(self) -> str:
        return f"{self.window} {self.change}: {self.before} -> {self.after}"


@dataclass
class FieldCheck:
    windows: int = 0
    confident: int = 0  # windows whose full verdict is confident: the only ones a removal can flip
    removals: int = 0
    flips: list[Flip] = field(default_factory=list)
    cap_windows: dict[float, int] = field(default_factory=dict)  # network windows with a cap, per factor
    cap_flips: dict[float, list[Flip]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.flips and not any(self.cap_flips.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "windows": self.windows,
            "confident": self.confident,
            "removals": self.removals,
            "flips": [str(f) for f in self.flips],
            "cap": {f"{k:g}": {"windows": self.cap_windows.get(k, 0), "flips": [str(f) for f in v]} for k, v in self.cap_flips.items()},
        }


def _said(d: Diagnosis) -> str:
    return f"{d.regime.value} {d.confidence:.2f}"


def removal_flips(windows: Iterable[Window], out: FieldCheck, classify_fn: Classifier = _classify) -> None:
    """Every one-field removal of every confident window whose verdict turns confidently other."""
    for w in windows:
        out.windows += 1
        full = classify_fn(w.snapshot, w.reference)
        if not confident(full):
            continue
        out.confident += 1
        for name in SNAPSHOT_FIELDS:
            if name in NOT_DATA or getattr(w.snapshot, name) is None:
                continue
            out.removals += 1
            gone: dict[str, Any] = {name: None}
            less = classify_fn(dataclasses.replace(w.snapshot, **gone), w.reference)
            if confident(less) and less.regime is not full.regime:
                out.flips.append(Flip(w.id, f"without {name}", _said(full), _said(less)))


def cap_flips(
    windows: Iterable[Window], out: FieldCheck, factors: Sequence[float] = CAP_FACTORS, classify_fn: Classifier = _classify
) -> None:
    """Network windows that a cap reported ``k`` times larger turns into a confident queue verdict
    (unless the window already names queueing as a second cause)."""
    for k in factors:
        out.cap_windows.setdefault(k, 0)
        out.cap_flips.setdefault(k, [])
    for w in windows:
        cap = w.snapshot.link_cap_bps
        if cap is None:
            continue
        full = classify_fn(w.snapshot, w.reference)
        if full.regime is not Regime.NETWORK_LIMITED:
            continue
        for k in factors:
            out.cap_windows[k] += 1
            wrong = classify_fn(dataclasses.replace(w.snapshot, link_cap_bps=k * cap), w.reference)
            if wrong.regime is Regime.QUEUE_LIMITED and confident(wrong) and Regime.QUEUE_LIMITED not in full.secondary:
                out.cap_flips[k].append(Flip(w.id, f"cap x{k:g}", _said(full), _said(wrong)))


def _order(window_id: str) -> str:
    """A fixed pseudo-random order: the same windows are sampled on every machine and run."""
    return hashlib.sha256(window_id.encode()).hexdigest()


def stratum(w: Window, d: Diagnosis) -> tuple[str, str, str, bool]:
    """(source, tier, verdict, near the bar or with a second cause) of a confident window."""
    source = w.source if isinstance(w, LabelledWindow) else "issue9"
    tier = w.tier if isinstance(w, LabelledWindow) else w.snapshot.slice
    near = d.confidence < CONFIDENT + NEAR_BAR or bool(d.secondary)
    return (source, tier, d.regime.value, near)


def sample(windows: Iterable[Window], per_stratum: int = PER_STRATUM, classify_fn: Classifier = _classify) -> list[Window]:
    """Up to ``per_stratum`` confident windows of each stratum, in a fixed order, and every window of
    ``HISTORY``. Windows whose verdict is not confident are left out: no removal can flip them."""
    groups: dict[tuple[str, str, str, bool], list[Window]] = defaultdict(list)
    pinned: list[Window] = []
    for w in windows:
        if w.id.startswith(HISTORY):
            pinned.append(w)
            continue
        d = classify_fn(w.snapshot, w.reference)
        if confident(d):
            groups[stratum(w, d)].append(w)
    picked = [w for key in sorted(groups) for w in sorted(groups[key], key=lambda w: _order(w.id))[:per_stratum]]
    return sorted(pinned, key=lambda w: w.id) + picked


def check(windows: Sequence[Window], classify_fn: Classifier = _classify) -> FieldCheck:
    out = FieldCheck()
    removal_flips(windows, out, classify_fn)
    cap_flips(windows, out, CAP_FACTORS, classify_fn)
    return out


def report(result: FieldCheck, what: str) -> str:
    lines = [
        f"{what}: {result.windows:,} windows, {result.confident:,} confident; {result.removals:,} one-field removals,"
        f" {len(result.flips)} turned a confident verdict confidently other",
    ]
    lines += [f"  {f}" for f in result.flips[:20]]
    for k, flips in result.cap_flips.items():
        lines.append(f"cap reported x{k:g}: {result.cap_windows.get(k, 0):,} network windows, {len(flips)} turned a confident queue")
        lines += [f"  {f}" for f in flips[:20]]
    lines.append("the missing-field rule holds" if result.ok else "the missing-field rule is BROKEN")
    return "\n".join(lines)


def add_subcommands(csub: Any) -> None:
    text = "the missing-field rule over every committed corpus window (run before freezing a classifier version)"
    p = csub.add_parser("fieldcheck", help=text, description=text)
    p.add_argument("--root", type=Path, default=None, help="the repository whose bench/results/diagnosis is read (default: this one)")
    p.add_argument(
        "--sample", type=int, default=None, metavar="N", help=f"only N windows per stratum, as the tests do (they use {PER_STRATUM})"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def main(args: argparse.Namespace, default_root: Path) -> int:
    if args.sample is not None and args.sample < 1:
        raise ValueError(f"--sample must be at least 1, got {args.sample}")
    root = args.root if args.root is not None else default_root
    windows = list(committed(root))
    if not windows:
        raise ValueError(f"no committed corpus window under {root}/bench/results/diagnosis")
    if args.sample is not None:
        windows = sample(windows, args.sample)
    result = check(windows)
    what = f"sample of {args.sample} per stratum" if args.sample is not None else "every committed window"
    print(json.dumps({"scope": what, **result.to_dict()}, indent=2) if args.json else report(result, what))
    if not result.ok:
        print("inferslice bench corpus fieldcheck: counterexamples found", file=sys.stderr)
    return 0 if result.ok else 1
