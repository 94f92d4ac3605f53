"""The missing-field rule over the committed corpus itself (issue 17): removing a field a window
carries never turns a confident verdict into a different confident one; and a cap reported at 2x or
10x its value never turns a network verdict into a confident queue.

The removals run over ``corpus_fieldcheck.sample`` (~2,000 windows: every source, tier and confident
verdict, the windows near the bar or with a second cause first, and every window that broke the rule
before); the cap check over every committed window. ``inferslice bench corpus fieldcheck`` runs the
removals over every window (1.4 M classifications, ~5 min): FROZEN.md records it per version.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path

import pytest

from inferslice.bench import corpus_fieldcheck as fc
from inferslice.bench.corpus_windows import LabelledWindow, Window, committed
from inferslice.bottleneck import classify
from inferslice.cli import main as cli_main
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.snapshot import Reference, SliceSnapshot

ROOT = Path(__file__).resolve().parents[2]


@cache
def _windows() -> tuple[Window, ...]:
    """Loaded once per process that runs these tests, not at collection (every xdist worker collects)."""
    return tuple(committed(ROOT))


@cache
def _sample() -> tuple[Window, ...]:
    return tuple(fc.sample(_windows()))


def test_the_committed_corpus_is_there() -> None:
    assert len(_windows()) >= 40_000


def test_the_sample_spans_every_source_tier_and_verdict_and_keeps_the_history() -> None:
    picked = _sample()
    ids = {w.id for w in picked}
    for prefix in fc.HISTORY:  # both sources' views of each window that broke the rule before
        assert {f"{prefix}prometheus", f"{prefix}embedded"} <= ids
    labelled = [w for w in picked if isinstance(w, LabelledWindow)]
    assert {w.source for w in labelled} == {"prometheus", "embedded"}
    assert {w.tier for w in labelled} == {"free", "standard", "premium"}
    verdicts = {classify(w.snapshot, w.reference).regime for w in picked}
    assert {Regime.HEALTHY, Regime.QUEUE_LIMITED, Regime.NETWORK_LIMITED, Regime.COMPUTE_LIMITED} <= verdicts
    assert 1_000 <= len(picked) <= 4_000  # large enough to mean something, small enough for `make test`
    few = _windows()[:3_000]  # the same windows on every run, whatever order they are read in
    assert [w.id for w in fc.sample(few, 5)] == [w.id for w in fc.sample(tuple(reversed(few)), 5)]


def test_removing_any_field_of_a_sampled_window_never_flips_a_confident_verdict() -> None:
    out = fc.FieldCheck()
    fc.removal_flips(_sample(), out)
    assert out.removals > 20_000
    assert not out.flips, f"{len(out.flips)} counterexamples, e.g. " + "; ".join(map(str, out.flips[:5]))


def test_a_cap_reported_larger_never_makes_a_network_window_a_confident_queue() -> None:
    out = fc.FieldCheck()
    fc.cap_flips(_windows(), out)
    assert all(n > 1_000 for n in out.cap_windows.values()), out.cap_windows
    assert not any(out.cap_flips.values()), {k: list(map(str, v[:5])) for k, v in out.cap_flips.items()}


# -- the check itself can fail: a classifier that breaks each rule is caught ---------------------------
def _flaky(snap: SliceSnapshot, ref: Reference | None) -> Diagnosis:
    """Confident network with the link's cap, confident queue without it or with a cap above 1 Mbit/s."""
    if snap.link_cap_bps is None or snap.link_cap_bps > 1e6:
        return Diagnosis(slice=snap.slice, regime=Regime.QUEUE_LIMITED, confidence=0.9)
    return Diagnosis(slice=snap.slice, regime=Regime.NETWORK_LIMITED, confidence=0.9)


def test_the_check_finds_a_verdict_that_one_removal_or_a_larger_cap_flips() -> None:
    one = Window("w/prometheus", SliceSnapshot(slice="free", link_cap_bps=6e5, link_rx_bps=5e5, ttft_p99_s=1.0), None)
    out = fc.check([one], _flaky)
    assert [(f.window, f.change) for f in out.flips] == [("w/prometheus", "without link_cap_bps")]
    assert out.removals == 3  # the three measurements it carries
    assert [f.change for f in out.cap_flips[2.0]] == ["cap x2"] and [f.change for f in out.cap_flips[10.0]] == ["cap x10"]
    assert not out.ok
    # A window whose verdict is not confident is never counted as flipped.
    unsure = lambda s, r: dataclasses.replace(_flaky(s, r), confidence=0.5)  # noqa: E731
    assert fc.check([one], unsure).flips == []


def test_the_command_refuses_a_root_without_a_corpus_and_a_bad_sample(tmp_path: Path) -> None:
    assert cli_main(["bench", "corpus", "fieldcheck", "--root", str(tmp_path)]) != 0
    assert cli_main(["bench", "corpus", "fieldcheck", "--sample", "0"]) != 0


def test_the_command_on_a_one_window_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "bench/results/diagnosis/corpus.jsonl"
    corpus.parent.mkdir(parents=True)
    corpus.write_text('{"id": "one", "snapshot": {"slice": "free", "ttft_p99_s": 0.2, "slo_ttft_p99_s": 0.5}}\n')
    assert cli_main(["bench", "corpus", "fieldcheck", "--root", str(tmp_path), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert (said["scope"], said["windows"], said["flips"]) == ("every committed window", 1, [])
