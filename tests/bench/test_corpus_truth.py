"""Truth by paired counterfactual (issue 17), on hand-made windows: the numbers are written from the
rule in the issue, not from the code."""

from __future__ import annotations

import pytest

from inferslice.bench.corpus_truth import Request, WindowStat, judge, material, reference, window_stats

REF = {"ttft": 0.10, "tpot": 0.025}
SLO = 0.5


def w(ttft: float | None, tpot: float | None = 0.025, n: int = 20) -> WindowStat:
    return WindowStat(ttft, tpot, n, n, 0)


def test_a_cause_that_removes_most_of_the_excess_is_the_truth() -> None:
    # the window: 1.1 s over a 0.1 s reference (excess 1.0 s); without the load step 0.2 s (removes 0.9)
    t = judge(w(1.1), {"c0": w(0.2)}, w(0.1), REF, [("c0", "load", "queue", "free")], SLO)
    assert t.causes == ("queue",) and t.kinds == ("load",)
    assert t.shares["queue"] == pytest.approx(0.9)
    assert not t.clean_breach and not t.healthy


def test_a_cause_below_a_quarter_of_the_excess_is_not() -> None:
    # excess 1.0 s; the cap removes 0.2 (20 %), the load 0.7
    t = judge(w(1.1), {"c0": w(0.9), "c1": w(0.4)}, w(0.1), REF,
              [("c0", "cap", "network", "free"), ("c1", "load", "queue", "free")], SLO)  # fmt: skip
    assert t.causes == ("queue",)
    cap = next(e for e in t.effects if e.name == "c0")
    assert cap.share["ttft"] == pytest.approx(0.2) and not cap.in_truth


def test_two_causes_each_removing_enough_make_a_compound() -> None:
    # TPOT 0.2 s over 0.025 (excess 0.175): the cap alone removes 0.1 (57 %), the GPU share 0.05 (29 %)
    t = judge(w(0.12, 0.2), {"c0": w(0.12, 0.1), "c1": w(0.12, 0.15)}, w(0.1), REF,
              [("c0", "cap", "network", "premium"), ("c1", "gpu", "compute", "premium")], SLO)  # fmt: skip
    assert t.causes == ("compute", "network")
    assert t.shares == {"compute": pytest.approx(0.05 / 0.175, abs=1e-3), "network": pytest.approx(0.1 / 0.175, abs=1e-3)}
    assert t.material == {"ttft": False, "tpot": True}


def test_an_immaterial_excess_is_healthy_whatever_was_injected() -> None:
    # a cap just above demand: TTFT 0.12 s (1.2x the reference, under the SLO), TPOT unchanged
    t = judge(w(0.12), {"c0": w(0.10)}, w(0.10), REF, [("c0", "cap", "network", "free")], SLO)
    assert t.healthy and t.excess_s == {"ttft": None, "tpot": None}


def test_a_breaching_clean_twin_is_said_and_not_blamed_on_a_cause() -> None:
    # the machine was loaded: the clean twin itself breached (0.9 s); the window 1.0 s, the cause removes 0.05
    t = judge(w(1.0), {"c0": w(0.95)}, w(0.9), REF, [("c0", "gpu", "compute", "free")], SLO)
    assert t.healthy and t.clean_breach
    assert t.unexplained["ttft"] == pytest.approx(0.8 / 0.9)


def test_a_removal_within_the_twins_noise_is_no_share() -> None:
    # a queueing tier 4.3 s against its own 4.25 s is not material; at 1.0 s over 0.1, a 30 ms drop is noise
    t = judge(w(1.0), {"c0": w(0.97)}, w(0.1), REF, [("c0", "cap", "network", "free")], SLO)
    assert t.healthy and t.effects[0].share["ttft"] == 0.0
    t = judge(w(4.3), {"c0": w(4.1)}, w(4.25), {"ttft": 4.25, "tpot": 0.025}, [("c0", "cap", "network", "free")], SLO)
    assert t.healthy and t.excess_s["ttft"] is None and t.clean_breach


def test_a_missing_twin_window_gives_no_share() -> None:
    t = judge(w(1.1), {"c0": None}, w(0.1), REF, [("c0", "load", "queue", "free")], SLO)
    assert t.healthy and t.effects[0].share["ttft"] is None


def test_a_twin_with_no_request_in_the_window_removes_the_whole_excess() -> None:
    # a load step's own arrivals fill the window 27.7 s over a 0.1 s reference; the twin without it
    # measured no first token there (and lost none): without the step the window has no excess at all
    t = judge(w(27.8), {"c0": WindowStat(None, 0.025, 0, 4, 0)}, w(0.1), REF, [("c0", "load", "queue", "free")], SLO)
    assert t.causes == ("queue",) and t.shares == {"queue": 1.0}
    assert t.effects[0].removed_s["ttft"] == pytest.approx(27.7)
    # the same, but the twin's requests failed there: what it would have measured is not known
    t = judge(w(27.8), {"c0": WindowStat(None, 0.025, 0, 4, 2)}, w(0.1), REF, [("c0", "load", "queue", "free")], SLO)
    assert t.healthy and t.effects[0].share["ttft"] is None


def test_a_twin_with_no_finished_request_removes_the_tpot_excess_and_without_a_reference_the_value() -> None:
    # TPOT 0.2 s over 0.025 (excess 0.175): the twin without the GPU cut finished no request in the window
    t = judge(w(0.12, 0.2), {"c0": WindowStat(0.12, None, 5, 0, 0)}, w(0.1), REF, [("c0", "gpu", "compute", "free")], SLO)
    assert t.causes == ("compute",) and t.effects[0].share == {"ttft": None, "tpot": 1.0}
    # no clean reference: only an SLO breach is material, the excess is the whole value, and so is the removal
    t = judge(w(0.9), {"c0": WindowStat(None, 0.025, 0, 3, 0)}, w(0.1), {"ttft": None, "tpot": None},
              [("c0", "load", "queue", "free")], SLO)  # fmt: skip
    assert t.excess_s["ttft"] == pytest.approx(0.9) and t.shares == {"queue": 1.0}


def test_materiality() -> None:
    assert material("ttft", 0.55, 0.40, SLO)  # over the SLO from a reference under it, by 150 ms
    assert not material("ttft", 0.60, 0.58, SLO)  # over the SLO, but 20 ms over the reference: noise
    assert not material("ttft", 4.30, 4.25, SLO)  # a tier that breaches with no cause: nothing to attribute
    assert material("ttft", 0.60, None, SLO)  # no reference: the breach alone
    assert not material("ttft", 0.14, 0.10, SLO)  # 1.4x
    assert not material("ttft", 0.03, 0.01, SLO)  # 3x but only 20 ms
    assert material("tpot", 0.04, 0.025, SLO)  # 1.6x and 15 ms
    assert not material("tpot", None, 0.025, SLO)


def test_windows_count_ttft_at_the_first_token_and_tpot_at_the_end() -> None:
    t0 = 1000.0
    reqs = [
        Request(t0 + 1.0, 0.5, 3.0, 11, True),  # first token at 1.5 (window 0), ends at 4.0 (window 0): TPOT 0.25
        Request(t0 + 5.0, 2.0, 8.0, 7, True),  # first token at 7.0 (window 1), ends at 13.0 (window 2): TPOT 1.0
        Request(t0 + 2.0, None, 9.0, 0, False),  # failed at 11.0 (window 1)
    ]
    s = window_stats(reqs, t0, 6.0, 3)
    assert (s[0].p99_ttft_s, s[0].p99_tpot_s, s[0].ttft_requests) == (0.5, pytest.approx(0.25), 1)
    assert (s[1].p99_ttft_s, s[1].p99_tpot_s, s[1].failed) == (2.0, None, 1)
    assert (s[2].p99_ttft_s, s[2].p99_tpot_s) == (None, pytest.approx(1.0))
    ref = reference(s, reqs, t0, 3.0)  # only the request that started after the ramp
    assert ref == {"ttft": 2.0, "tpot": pytest.approx(1.0)}
