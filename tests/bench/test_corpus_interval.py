"""The per-cell AC@1 interval resamples seeds, not windows: a seed's windows move together."""

from __future__ import annotations

from inferslice.bench import corpus_metrics as cm
from inferslice.bench.corpus_interval import markdown, seed_intervals
from inferslice.bench.corpus_windows import LabelledWindow
from inferslice.snapshot import SliceSnapshot


def _w(seed: int, k: int, tier: str, primary: str, source: str = "embedded") -> LabelledWindow:
    wid = f"{source}/{seed}/{tier}/{k}"
    return LabelledWindow(wid, SliceSnapshot(slice=tier), None, seed=seed, run="all", tier=tier, source=source, window=k,
                          truth={"primary": primary})  # fmt: skip


def test_a_cell_whose_seeds_are_all_right_or_all_wrong_gets_a_seed_wide_interval() -> None:
    # Ten seeds of ten queue windows each: five seeds read right throughout, five wrong throughout.
    # As 100 independent windows a 95 % interval would be about 0.40-0.60; as ten seeds, the share
    # of right seeds in ten draws of a fair coin: about 0.2-0.8.
    ws, said = [], {}
    for seed in range(10):
        for k in range(10):
            w = _w(seed, k, "premium", "queue_limited")
            ws.append(w)
            said[w.id] = cm.Verdict("queue" if seed < 5 else "network")
    iv = seed_intervals(ws, said)["embedded"]["queue"]["premium"]
    assert iv["ac1"] == 0.5 and iv["windows"] == 100 and iv["seeds"] == 10
    assert iv["lo"] <= 0.25 and iv["hi"] >= 0.75
    assert iv == seed_intervals(ws, said)["embedded"]["queue"]["premium"]  # seeded: the same every time


def test_a_cell_held_by_too_few_seeds_gets_no_interval_and_one_always_right_no_width() -> None:
    ws = [_w(1, k, "free", "compute_limited") for k in range(4)] + [_w(s, 0, "standard", "healthy") for s in range(1, 7)]
    said = {w.id: cm.Verdict("compute" if w.tier == "free" else "healthy") for w in ws}
    said[ws[0].id] = cm.Verdict("queue")  # one of free's four compute windows misread
    iv = seed_intervals(ws, said)["embedded"]
    # one seed: every draw holding the cell is that seed again, which says nothing of its spread
    assert iv["compute"]["free"] == {"ac1": 0.75, "windows": 4, "seeds": 1, "lo": None, "hi": None}
    assert iv["healthy"]["standard"] == {"ac1": 1.0, "windows": 6, "seeds": 6, "lo": 1.0, "hi": 1.0}  # right everywhere
    del said[ws[-1].id]  # a window without a verdict is left out, not an error
    assert seed_intervals(ws, said)["embedded"]["healthy"]["standard"]["windows"] == 5
    assert seed_intervals(ws, {}) == {}  # no verdict at all: no cell, not an error


def test_sources_are_kept_apart_and_the_table_names_the_cells() -> None:
    ws = [_w(s, 0, "standard", "network_limited", src) for s in range(1, 7) for src in ("embedded", "prometheus")]
    ws += [_w(1, 1, "free", "network_limited")]
    said = {w.id: cm.Verdict("network" if w.source == "embedded" or w.seed <= 3 else "healthy") for w in ws}
    iv = seed_intervals(ws, said)
    assert iv["embedded"]["network"]["standard"]["ac1"] == 1.0 and iv["prometheus"]["network"]["standard"]["ac1"] == 0.5
    md = "\n".join(markdown(iv, 0.97))
    assert "| network | 100.0 [-] (1 / 1) | 100.0 [100, 100] (6 / 6) | 100.0 [100, 100] (7 / 6) |" in md
    assert "prometheus:" in md and "under 97%" in md
    assert markdown({}, 0.97) == []
