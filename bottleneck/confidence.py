"""Calibrated confidence: a margin read from the evidence, a table fitted on the corpus, and caps. Pure.

- **Margin** (``classify`` computes it): for a binding verdict, log2 of how far the primary
  resource's share passes its materiality threshold, less how close a resource whose remedy comes
  first is to binding (it would take the verdict over); for ``healthy``, log2 of how far the
  largest judged excess stays below materiality. It saturates at 6 (64x).
- **Calibration**: per regime, a step function from margin to the share of verdicts that were right
  (isotonic regression, pool-adjacent-violators, on seen seeds only, never a blind set before its
  score; the table, its provenance and the fit live in ``bottleneck/calibration.py``, written by
  ``inferslice bench corpus calibrate``). Of the verdicts reported at confidence c, a fraction c
  should be right: the next blind set's reliability plot says how close that holds.
- **Caps**: a verdict that a field the window lacks could overturn (a missing median, gauge or link
  statistic, a reference derived by a prior, too few requests for the quantile it rests on) is
  capped at ``UNSURE`` (0.55), below the ``CONFIDENT`` bar, whatever its margin: removing a field
  never turns a confident verdict into a different confident one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from inferslice.bottleneck import calibration
from inferslice.bottleneck.sampling import MEDIAN_MIN_REQUESTS, TAIL_MIN_REQUESTS
from inferslice.diagnosis import Regime
from inferslice.snapshot import SliceSnapshot

MARGIN_NOTE = "log2 of the binding share over its threshold (healthy: of the threshold over the largest excess); calibrated per regime"
Table = Mapping[str, Sequence[tuple[float, float]]]


def calibrated(regime: Regime, margin: float, table: Table | None = None) -> float:
    """The calibrated probability that a verdict of ``regime`` at ``margin`` is right."""
    steps = (table if table is not None else calibration.TABLE).get(regime.value)
    if not steps:
        return calibration.UNCALIBRATED
    for upper, p in steps:
        if margin <= upper:
            return p
    return steps[-1][1]


def served(snap: SliceSnapshot) -> float | None:
    """The window's first tokens: the TTFT histogram's count, or, where that series does not exist
    yet (no first token since the exporter started), 0 when the SLO request rate, which counts the
    same first tokens, reads 0 (v12). One reading for the idle rule and the sampling caps alike."""
    if snap.request_count is not None:
        return snap.request_count
    return 0.0 if snap.request_rate is not None and snap.request_rate <= 0 else None


def _count(stat: str, snap: SliceSnapshot) -> float | None:
    if stat.startswith("tpot"):
        return snap.tpot_request_count if snap.tpot_request_count is not None else served(snap)
    return served(snap)


def undersampled(stat: str, snap: SliceSnapshot) -> bool:
    """The window's request count for ``stat`` cannot bound it (False when the count is unreported)."""
    n = _count(stat, snap)
    return n is not None and n < (TAIL_MIN_REQUESTS if stat.endswith("p99") else MEDIAN_MIN_REQUESTS)


def sampling_caps(stats: Iterable[str], snap: SliceSnapshot) -> list[str]:
    """A cap for every statistic the verdict rests on whose request count cannot bound it
    (``sampling``: the median needs 6 requests, a P99 368); nothing when the count is unreported."""
    caps: list[str] = []
    if served(snap) is None and snap.tpot_request_count is None:
        return caps  # an unreported count caps nothing
    for stat in dict.fromkeys(stats):
        if undersampled(stat, snap):
            n = _count(stat, snap) or 0.0
            tail = stat.endswith("p99")
            need = TAIL_MIN_REQUESTS if tail else MEDIAN_MIN_REQUESTS
            what = ("P99 " if tail else "median ") + stat.split("_")[0].upper()
            caps.append(f"{what} from {n:.0f} requests: its 95 % rank interval reaches past the window's requests (needs {need})")
    return caps
