"""The missing-field rule over the committed corpus itself (issue 17): for every window and every field
it carries, removing that field never turns a confident verdict into a different confident one; and a
cap reported at 2x or 10x its value never turns a network verdict into a confident queue.

Every window of every committed corpus (``bench.corpus_windows.committed``), each with the reference
its scoring uses. Exhaustive, not sampled: ~25 k classifications per 1,000 windows (~10 s here).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from inferslice.bench.corpus_windows import committed
from inferslice.bottleneck import classify
from inferslice.diagnosis import CONFIDENT, Diagnosis, Regime
from inferslice.snapshot import SNAPSHOT_FIELDS

ROOT = Path(__file__).resolve().parents[2]
NOT_DATA = ("slice", "id", "window_end_s", "window_s")  # labels of the window, not measurements
WINDOWS = list(committed(ROOT))


# No window is exempt. History: the frozen v1 (sha256 65adf171) failed on 3 removals of one test
# window (s2002--c1-premium-w04: a WAN rate cut read network through the P99 TPOT at a full link, and
# a confident healthy without the tail or the link's fields); v3 (3385bfcb) on 6 removals of one blind
# window (s9004--c1-standard-w03, the same signature at the edge cap). v4 caps a healthy verdict
# beside a material P99 that a full link could bind, or at a full link without that P99: 0 since.
KNOWN_COUNTEREXAMPLES: frozenset[tuple[str, str]] = frozenset()


def _confident(d: Diagnosis) -> bool:
    return d.regime is not Regime.UNKNOWN and d.confidence >= CONFIDENT


def test_the_committed_corpus_is_there() -> None:
    assert len(WINDOWS) >= 800


def test_removing_any_field_of_any_corpus_window_never_flips_a_confident_verdict() -> None:
    bad: list[str] = []
    found: set[tuple[str, str]] = set()
    removals = 0
    for w in WINDOWS:
        full = classify(w.snapshot, w.reference)
        if not _confident(full):
            continue  # only a confident verdict can be flipped into another confident one
        for name in SNAPSHOT_FIELDS:
            if name in NOT_DATA or getattr(w.snapshot, name) is None:
                continue
            removals += 1
            less = classify(dataclasses.replace(w.snapshot, **{name: None}), w.reference)
            if _confident(less) and less.regime is not full.regime:
                found.add((w.id, name))
                if (w.id, name) not in KNOWN_COUNTEREXAMPLES:
                    bad.append(f"{w.id} without {name}: {full.regime.value} {full.confidence} -> {less.regime.value} {less.confidence}")
    assert removals > 5000
    assert not bad, f"{len(bad)} counterexamples, e.g. " + "; ".join(bad[:5])
    assert found >= KNOWN_COUNTEREXAMPLES, f"no longer counterexamples (drop them from the list): {sorted(KNOWN_COUNTEREXAMPLES - found)}"


@pytest.mark.parametrize("k", [2.0, 10.0])
def test_a_cap_reported_larger_never_makes_a_network_window_a_confident_queue(k: float) -> None:
    bad = []
    for w in WINDOWS:
        cap = w.snapshot.link_cap_bps
        if cap is None:
            continue
        full = classify(w.snapshot, w.reference)
        if full.regime is not Regime.NETWORK_LIMITED:
            continue
        wrong = classify(dataclasses.replace(w.snapshot, link_cap_bps=k * cap), w.reference)
        if wrong.regime is Regime.QUEUE_LIMITED and _confident(wrong) and Regime.QUEUE_LIMITED not in full.secondary:
            bad.append(f"{w.id}: network -> queue {wrong.confidence}")
    assert not bad, f"{len(bad)} windows, e.g. " + "; ".join(bad[:5])
