"""Issue 17's scoring: the figures' arithmetic on hand-made verdicts, the calibration fit, the peers'
rules and mappings, and one command end to end on a small corpus in the generator's format."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from inferslice.bench import corpus_metrics as cm
from inferslice.bench import corpus_peers as peers
from inferslice.bench.calibrate import pav, render
from inferslice.bench.corpus_score import code_hash, parse_seeds, score, targets
from inferslice.bench.corpus_windows import labelled
from inferslice.snapshot import SliceSnapshot

ROOT = Path(__file__).resolve().parents[2]


def T(primary: str, causes: tuple[str, ...] = (), tier: str = "free", **shares: float) -> cm.Truth:
    excess = {"ttft": 1.0 if shares else None, "tpot": None}
    return cm.Truth(primary, causes, (), tier, excess, {("ttft", c): v for c, v in shares.items()})


def V(primary: str, causes: tuple[str, ...] = (), confidence: float = 0.9, **shares: float) -> cm.Verdict:
    return cm.Verdict(primary, causes or ((primary,) if primary not in ("healthy", "unknown") else ()), (), confidence,
                      {("ttft", c): v for c, v in shares.items()})  # fmt: skip


def test_ac1_strict_and_lenient_per_class_and_tier() -> None:
    pairs = [
        (T("queue", ("queue",)), V("queue")),
        (T("queue", ("queue",)), V("healthy")),
        (T("network", ("network", "queue")), V("queue")),  # the other cause: lenient only
        (T("healthy", tier="premium"), V("healthy")),
    ]
    out = cm.ac1(pairs)
    assert out["queue"]["free"] == {"windows": 2, "ac1": 0.5, "ac1_lenient": 0.5}
    assert out["network"]["all"] == {"windows": 1, "ac1": 0.0, "ac1_lenient": 1.0}
    assert out["healthy"]["premium"]["ac1"] == 1.0
    assert "healthy" not in cm.ac1(pairs, caused_only=True)


def test_forced_choice_names_a_cause_as_the_rca_peers_must() -> None:
    # healthy, but with queue's share of the excess above network's: forced, it says queue
    forced = cm.forced_choice(V("healthy", queue=0.2, network=0.1))
    assert forced.ranking == ("queue", "network", "compute") and forced.primary == "healthy"
    # nothing attributed: the peers' fallback order (remedy priority)
    assert cm.forced_choice(V("unknown")).ranking == cm.PRIORITY
    caused = cm.Verdict("compute", ("compute",), ("compute", "queue", "network"))
    assert cm.forced_choice(caused) is caused  # a verdict that names a cause keeps its ranking
    pairs = [(T("queue", ("queue",)), cm.forced_choice(V("healthy", queue=0.4))), (T("healthy"), cm.forced_choice(V("healthy")))]
    assert cm.ac1(pairs, ranked=True, caused_only=True) == {
        "queue": {"free": {"windows": 1, "ac1": 1.0, "ac1_lenient": 1.0}, "all": {"windows": 1, "ac1": 1.0, "ac1_lenient": 1.0}}
    }


def test_compound_exact_set() -> None:
    pairs = [
        (T("network", ("network", "queue")), V("network", ("network", "queue"))),
        (T("network", ("network", "queue")), V("network")),
        (T("compute", ("compute", "queue")), V("compute", ("compute", "queue"))),
    ]
    out = cm.compound(pairs)
    assert out["network+queue"] == {"windows": 2, "exact": 1, "accuracy": 0.5}
    assert out["compute+queue"]["accuracy"] == 1.0 and out["compute+network"]["windows"] == 0


def test_attribution_error_on_true_share_positive_pairs_and_all() -> None:
    # one material statistic, truth queue 0.8 network 0 compute 0; predicted queue 0.6, network 0.3
    pairs = [(T("queue", ("queue",), queue=0.8), V("queue", queue=0.6, network=0.3))]
    out = cm.attribution(pairs)
    assert out["true_share_positive"] == {"pairs": 1, "mean_pp": pytest.approx(20.0), "p90_pp": pytest.approx(20.0)}
    assert out["all_pairs"]["pairs"] == 3 and out["all_pairs"]["mean_pp"] == pytest.approx((20 + 30 + 0) / 3, abs=0.01)
    assert cm.attribution([(T("healthy"), V("healthy"))])["all_pairs"]["pairs"] == 0  # immaterial: no pair


def test_expected_calibration_error_by_hand() -> None:
    # bin 0.9-1.0: 4 verdicts at 0.95, 3 right (0.75): |0.75-0.95| = 0.2 over 4 of 8 -> 0.1
    # bin 0.5-0.6: 4 at 0.55, 2 right: |0.5-0.55| = 0.05 over 4 of 8 -> 0.025
    pairs = [(T("queue", ("queue",)), V("queue" if i < 3 else "healthy", confidence=0.95)) for i in range(4)]
    pairs += [(T("queue", ("queue",)), V("queue" if i < 2 else "network", confidence=0.55)) for i in range(4)]
    out = cm.calibration(pairs)
    assert out["ece"] == pytest.approx(0.125)
    assert [b["windows"] for b in out["bins"]] == [4, 4]
    assert cm.confident_share(pairs, 0.6)["queue"] == {"windows": 8, "confident": 0.5, "confident_and_right": 0.375}


def test_pav_is_monotone_with_blocks_of_at_least_the_minimum() -> None:
    pts = [(m / 10, m >= 50) for m in range(100)]  # right from margin 5.0 on
    steps = pav(pts, min_block=30)
    assert len(steps) == 2
    (u0, p0, n0), (u1, p1, n1) = steps
    assert n0 == 50 and n1 == 50 and u0 == pytest.approx(4.95) and u1 == float("inf")
    assert p0 == pytest.approx(1 / 52) and p1 == pytest.approx(51 / 52)
    noisy = pav([(m / 10, (m * 7) % 3 != 0) for m in range(90)], min_block=30)
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(noisy)) and all(n >= 30 for _, _, n in noisy)
    src = render({"queue_limited": steps}, "test")
    ns: dict[str, Any] = {}
    exec(compile(src, "calibration.py", "exec"), ns)  # the written table is a valid module with that table
    assert ns["TABLE"]["queue_limited"][0] == (pytest.approx(4.95), pytest.approx(1 / 52, abs=1e-4))


def test_pav_pools_equal_margins_into_one_step_and_orders_the_published_values() -> None:
    # 40 windows below a saturated margin, 200 at it (the classifier caps margins at log2 64 = 6):
    # a step bound can never split windows of one margin (the lookup could not reach the second).
    pts = [(m / 20, m % 4 != 0) for m in range(40)] + [(6.0, i % 50 != 0) for i in range(200)]
    steps = pav(pts, min_block=30)
    bounds = [u for u, _, _ in steps]
    assert len(bounds) == len(set(bounds)) and bounds[-1] == float("inf")
    assert sum(n for _, _, n in steps) == 240 and steps[-1][2] >= 200  # the tie is never split (a small block may join it)
    assert all(a[1] < b[1] for a, b in itertools.pairwise(steps))
    # Raw shares 31/31 then 100/100 are in order, equal; smoothed (32/33 < 101/102) too. Raw 30/31 < 97/100
    # would reverse once smoothed; the published values never decrease.
    close = [(0.1 * i, i != 0) for i in range(31)] + [(5.0 + 0.01 * i, i >= 3) for i in range(100)]
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(pav(close, min_block=30)))


def test_naive_rules() -> None:
    s = SliceSnapshot(slice="s", slo_ttft_p99_s=0.5, ttft_p99_s=2.0, link_rx_bps=9.5e5, link_cap_bps=1e6, requests_waiting=0.0)
    assert peers.rule_link(s).primary == "network"
    assert peers.rule_ttft(s).primary == "queue"
    assert peers.rule_queue_length(s).primary == "healthy"
    assert peers.rule_max_utilisation(s).primary == "network"
    wan = SliceSnapshot(slice="s", link_rx_bps=1e5, link_cap_bps=1e7, wan_rx_bps=9.6e6, wan_capacity_bps=1e7)
    assert peers.rule_link(wan).primary == "network"  # the WAN path counts as the link's


def test_family_mapping_skips_symptoms_and_learned_mapping_votes() -> None:
    assert peers.family_cause("latency_ttftp99") is None and peers.family_cause("wan_overcapacity") == "network"
    assert peers.family_cause("gpu_share") == "compute" and peers.family_cause("queue_waiting") == "queue"
    ranks = {"a": ["latency_tpotp99", "gpu_share"], "b": ["latency_tpotp99"], "c": ["latency_tpotp99"], "d": ["queue_waiting"]}
    learned = peers.learn_mapping(ranks, {"a": "network", "b": "network", "c": "compute", "d": "queue"})
    assert learned == {"latency_tpotp99": "network", "queue_waiting": "queue"}
    v = peers.rca_verdict(
        ["latency_ttftp99", "gpu_share", "link_overcap"],
        peers.family_mapping(["latency_ttftp99", "gpu_share", "link_overcap"]),
        cm.PRIORITY,
    )
    assert v.primary == "compute" and v.ranking[:2] == ("compute", "network")


def test_seeds() -> None:
    assert parse_seeds("3-5,9") == [3, 4, 5, 9]
    with pytest.raises(ValueError):
        parse_seeds("5-3")


# -- end to end on a small corpus in the generator's format ---------------------------------------
BASE = {"slo_ttft_p99_s": 0.5, "ref_ttft_p50_s": 0.05, "ref_ttft_p99_s": 0.1, "ref_tpot_p50_s": 0.025, "ref_tpot_p99_s": 0.032,
        "ref_output_tokens_per_s": 400.0, "output_tokens_per_s": 420.0, "link_rx_bps": 4e5, "link_cap_bps": 1e7,
        "link_capacity_bps": 1e10, "requests_running": 6.0, "replicas": 1.0, "replicas_max": 1.0, "request_count": 30.0,
        "tpot_request_count": 30.0}  # fmt: skip


def _row(seed: int, run: str, window: int, queue: bool) -> dict[str, Any]:
    snap = {"slice": "free", **BASE, "ttft_p50_s": 2.0 if queue else 0.05, "ttft_p99_s": 4.0 if queue else 0.1,
            "tpot_p50_s": 0.026, "tpot_p99_s": 0.033, "requests_waiting": 5.0 if queue else 0.0}  # fmt: skip
    effect = {"name": "c0", "kind": "load", "cls": "queue", "tier": "free", "share": {"ttft": 0.95, "tpot": None}}
    truth = {"causes": ["queue"] if queue else [], "kinds": ["load"] if queue else [], "primary": "queue_limited" if queue else "healthy",
             "excess_s": {"ttft": 3.9 if queue else None, "tpot": None}, "effects": [effect] if queue else []}  # fmt: skip
    return {"id": f"s{seed}-{run}-free-w{window:02d}", "seed": seed, "run": run, "tier": "free", "window": window, "truth": truth,
            "snapshots": {"prometheus": snap, "embedded": dict(snap)}, "causes": []}  # fmt: skip


def test_one_command_scores_a_split_and_records_the_code_hash(tmp_path: Path) -> None:
    rows = [_row(seed, run, k, queue=(run == "all" and k >= 4)) for seed in (1, 2, 3) for run in ("clean", "all") for k in range(1, 10)]
    for r in rows:  # the load generator's own P99: every queue window breaches the 0.5 s SLO but window 4's
        r["stats"] = {"p99_ttft_s": 0.4 if r["window"] == 4 else 3.9 if r["truth"]["causes"] else 0.1}
        if r["seed"] == 3 and r["truth"]["causes"]:  # a cap acted too, its 10 % of the excess under the truth's bar
            r["truth"]["effects"] = [*r["truth"]["effects"], {"name": "c1", "kind": "cap", "cls": "network", "tier": "free",
                                                              "share": {"ttft": 0.1, "tpot": None}}]  # fmt: skip
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    views = labelled(rows)
    assert len(views) == 2 * len(rows) and {v.source for v in views} == {"prometheus", "embedded"}
    result = score([corpus], [2, 3], tmp_path / "out", "test", ROOT, tune_seeds=[1])
    assert result["windows"] == 2 * 2 * 9  # seeds 2-3, two twins, nine windows: per source
    assert result["truth_versions"] == [1]  # lines without a truth_version were judged by v1's rules
    assert result["code"]["sha256"] == code_hash(ROOT)["sha256"] and "bottleneck/classify.py" in result["code"]["files"]
    ours = result["sources"]["prometheus"]["inferslice"]
    assert ours["ac1"]["queue"]["all"] == {"windows": 12, "ac1": 1.0, "ac1_lenient": 1.0}
    assert ours["ac1"]["healthy"]["all"]["ac1"] == 1.0
    assert ours["by_slo"] == {"queue": {"breached": {"windows": 10, "ac1": 1.0, "said_healthy": 0},
                                        "met": {"windows": 2, "ac1": 1.0, "said_healthy": 0}}}  # fmt: skip
    assert (
        "whose own P99 TTFT breached the SLO (met it, where a cause still added its excess): queue 100.0 % of 10 (met: 100.0 % of 2"
        in (tmp_path / "out" / "score.md").read_text()
    )
    assert ours["by_uncounted"] == {"queue": {"none": {"windows": 6, "ac1": 1.0, "named_uncounted": 0},
                                              "uncounted": {"windows": 6, "ac1": 1.0, "named_uncounted": 0}}}  # fmt: skip
    md = (tmp_path / "out" / "score.md").read_text()
    uncounted = "queue 100.0 % of 6 (with one: 100.0 % of 6, 0 named it)"
    assert "where no cause acted that the truth left uncounted (with one: a compound run's other cause" in md and uncounted in md
    iv = result["intervals"]["prometheus"]["queue"]["free"]  # two seeds: too few to resample
    assert (iv["windows"], iv["seeds"], iv["lo"], iv["hi"]) == (12, 2, None, None)
    assert "| queue | 100.0 [-] (12 / 2) |" in md
    assert ours["attribution"]["true_share_positive"]["pairs"] == 12 + 6  # queue on every caused window, the cap on seed 3's six
    assert ours["by_kind"] == {"load": {"windows": 12, "ac1": 1.0, "said": {"queue": 12}}}
    md = (tmp_path / "out" / "score.md").read_text()
    assert "AC@1 per injected cause kind in the truth set (caused windows): load 100.0 % of 12" in md
    for name in ("score.json", "score.md", "reliability.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    assert "rule-link-util" in result["sources"]["embedded"]
    assert any(t["target"].startswith("AC@1") for t in result["targets"])
    forced = result["sources"]["prometheus"]["inferslice (forced choice)"]
    assert "healthy" not in forced["ac1"] and forced["ac1"]["queue"]["all"]["windows"] == 12  # caused windows only
    assert not any("forced choice" in t["target"] for t in result["targets"])  # reported beside, not a peer to beat


def test_max_steal_leaves_out_the_windows_a_starved_host_measured(tmp_path: Path) -> None:
    from inferslice.bench.corpus_score import starved

    rows = [_row(seed, run, k, queue=(run == "all" and k >= 4)) for seed in (1, 2) for run in ("clean", "all") for k in range(1, 10)]
    for r in rows:
        if r["seed"] == 2 and r["window"] == 5:
            r["window_steal"] = 0.4 if r["run"] == "all" else 0.0  # the run itself starved
        if r["seed"] == 2 and r["window"] == 6:
            r["truth_steal_max"] = 0.12  # a twin its truth reads starved
        if r["seed"] == 2 and r["window"] == 7:
            r["window_steal"], r["truth_steal_max"] = 0.05, None  # below the bar, and unmeasured: kept
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert starved([corpus], [2], 0.1) == {(2, "all", "free", 5), (2, "clean", "free", 6), (2, "all", "free", 6)}
    assert starved([corpus], [1], 0.1) == set()  # other seeds are not read
    result = score([corpus], [2], tmp_path / "out", "test", ROOT, tune_seeds=[1], max_steal=0.1)
    assert (result["windows"], result["starved_windows_left_out"], result["max_steal"]) == (18 - 3, 3, 0.1)
    assert "Host-starved windows left out: 3 (CPU steal >= 10%" in (tmp_path / "out" / "score.md").read_text()
    whole = score([corpus], [2], tmp_path / "whole", "test", ROOT, tune_seeds=[1])
    assert (whole["windows"], whole["max_steal"]) == (18, None)


def test_the_score_splits_its_windows_by_the_hosts_steal(tmp_path: Path) -> None:
    from inferslice.bench.corpus_steal import band

    assert [band(x) for x in (0.0, 0.049, 0.05, 0.099, 0.1, 0.2499, 0.25, 0.9, None)] == [
        "0%-5%", "0%-5%", "5%-10%", "5%-10%", "10%-25%", "10%-25%", ">= 25%", ">= 25%", "not measured"]  # fmt: skip
    rows = [_row(2, run, k, queue=(run == "all" and k >= 4)) for run in ("clean", "all") for k in range(1, 10)]
    for r in rows:
        if r["run"] == "all" and r["window"] == 5:
            r["window_steal"], r["truth_steal_max"] = 0.02, 0.4  # a twin its truth reads starved: the larger counts
        if r["run"] == "clean" and r["window"] == 3:
            # a healthy truth whose window the starved host queued: the classifier says queue, a miss
            r["window_steal"] = 0.3
            r["snapshots"] = _row(2, "all", 3, queue=True)["snapshots"]
        if r["window"] == 7:
            r["window_steal"] = 0.07
        if r["window"] == 1:
            r["window_steal"], r["truth_steal_max"] = 0.0, 0.01
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = score([corpus], [2], tmp_path / "out", "test", ROOT)
    for source in ("prometheus", "embedded"):
        per = result["by_steal"][source]
        assert list(per) == ["0%-5%", "5%-10%", ">= 25%", "not measured"]  # bands in order, empty ones left out
        assert per["0%-5%"] == {"windows": 2, "ac1": {"healthy": {"windows": 2, "ac1": 1.0, "ac1_lenient": 1.0}}}
        assert per["5%-10%"]["ac1"]["queue"]["windows"] == 1 and per["5%-10%"]["ac1"]["healthy"]["windows"] == 1
        starved = per[">= 25%"]["ac1"]
        assert starved["healthy"] == {"windows": 1, "ac1": 0.0, "ac1_lenient": 0.0}
        assert starved["queue"]["ac1"] == 1.0 and per["not measured"]["windows"] == 18 - 6
    md = (tmp_path / "out" / "score.md").read_text()
    assert "## AC@1 by the host's CPU steal" in md and "| embedded | >= 25% | 2 | 0.0 (1) | 100.0 (1) |" in md
    plain = [dict(r, window_steal=None, truth_steal_max=None) for r in rows]
    (corpus / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in plain))
    again = score([corpus], [2], tmp_path / "plain", "test", ROOT)
    assert list(again["by_steal"]["embedded"]) == ["not measured"]
    assert "by the host's CPU steal" not in (tmp_path / "plain" / "score.md").read_text()  # no steal measured: no table


def test_tuning_moves_a_threshold_the_tune_seeds_ask_for() -> None:
    from inferslice.bench.corpus_tune import tune

    rows = []
    for seed in (1, 2):
        for k in range(1, 10):
            row = _row(seed, "all", k, queue=k >= 4)
            if k >= 4:  # a milder queue: median TTFT x2 and P99 x2.5 (under the SLO), default ratios x3 miss it
                for snap in row["snapshots"].values():
                    snap.update(ttft_p50_s=0.1, ttft_p99_s=0.25, requests_waiting=1.0)  # not yet a standing queue at the ceiling
            rows.append(row)
    ws = labelled(rows)
    chosen, trials = tune(ws, grid={"ttft_inflation_ratio": (1.5, 2.0, 3.0), "ttft_tail_inflation_ratio": (2.0, 3.0)}, passes=1)
    assert chosen.ttft_inflation_ratio <= 2.0
    assert trials[0]["worst_cell_ac1"] < 1.0 and max(t["worst_cell_ac1"] for t in trials) == 1.0


def test_cap_reasons_say_why_a_class_is_not_confident() -> None:
    q = T("queue", ("queue",))
    pairs = [
        (q, cm.Verdict("queue", ("queue",), caps=("median TTFT from 4 requests: its rank interval ...",), requests=4.0)),
        (q, cm.Verdict("queue", ("queue",), caps=("median TTFT from 3 requests: ...", "no reference: x"), requests=3.0)),
        (q, cm.Verdict("queue", ("queue",), requests=30.0)),
    ]
    out = cm.cap_reasons(pairs)["queue"]
    assert out["capped_by"] == {"median TTFT from N requests": 2, "no reference": 1}
    assert out["requests_min"] == 3.0 and out["requests_median"] == 4.0


def test_cap_reasons_keep_the_quantile_and_ratio_names() -> None:
    # Only standalone values become N: a reason names P99 and 2x, and those are what a reader needs.
    q = T("queue", ("queue",))
    caps = ("P99 TTFT from 7 requests: ...", "the verdict sits within 2x of the threshold that decides it (margin 0.87 < 1)")
    out = cm.cap_reasons([(q, cm.Verdict("queue", ("queue",), caps=caps, requests=7.0))])["queue"]
    margin = "the verdict sits within 2x of the threshold that decides it (margin N < N)"
    assert out["capped_by"] == {"P99 TTFT from N requests": 1, margin: 1}


def test_the_blind_score_refuses_code_that_is_not_the_frozen_one(tmp_path: Path) -> None:
    import argparse

    from inferslice.bench.corpus_score import run

    args = argparse.Namespace(corpus=[tmp_path], seeds="1-2", tune_seeds=None, split="blind", out=tmp_path / "out",
                              rcaeval_python=None, rcd_python=None, rerun_rca=False, expect_code="0" * 64, no_rca=False)  # fmt: skip
    with pytest.raises(ValueError, match="not the frozen one"):
        run(args, ROOT)
    assert not (tmp_path / "out").exists()  # nothing scored


def test_calibrate_refits_only_the_named_regimes_and_keeps_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--regimes compute_limited``: the new regime's steps come from this fit; every other regime's
    steps, window counts and provenance are the table's as it was (read back from the file)."""
    from inferslice.bench import calibrate as cal

    before = {"healthy": [(2.0, 0.93, 252), (float("inf"), 0.98, 2875)], "queue_limited": [(float("inf"), 0.89, 254)]}
    table_file = tmp_path / "calibration.py"
    table_file.write_text(render(before, "fitted on seeds 1-2 of corpus A"))
    assert cal.read_table(table_file.read_text()) == (before, "fitted on seeds 1-2 of corpus A")
    fresh = {"compute_limited": [(1.9, 0.73, 165), (float("inf"), 0.82, 258)], "healthy": [(float("inf"), 0.5, 40)]}
    monkeypatch.setattr(cal, "fit", lambda windows: fresh)
    out = cal.calibrate([], "3-4", ["corpus B"], "ab" * 32, table_file, regimes=("compute_limited",))
    table, provenance = cal.read_table(table_file.read_text())
    assert table == {"compute_limited": fresh["compute_limited"], "healthy": before["healthy"], "queue_limited": before["queue_limited"]}
    assert "compute_limited only" in provenance and "fitted on seeds 1-2 of corpus A" in provenance and "3-4" in provenance
    assert out["counts"]["compute_limited"] == 423
    with pytest.raises(ValueError, match="network_limited"):
        cal.calibrate([], "3-4", ["corpus B"], "ab" * 32, table_file, regimes=("network_limited",))


def test_the_peers_get_the_cap_capacity_reference_and_slo_columns_inferslice_reads() -> None:
    """Issue 17 item 6: BARO / NSigma / CIRCA / RCD get the same columns as inferslice: the cap, the
    link's utilisation of it and of its capacity, the references and the SLO (before, none of them)."""
    s = SliceSnapshot(
        slice="standard",
        ttft_p99_s=0.9,
        tpot_p99_s=0.06,
        slo_ttft_p99_s=0.5,
        ref_ttft_p99_s=0.3,
        ref_tpot_p99_s=0.03,
        link_rx_bps=0.9e6,
        link_cap_bps=1e6,
        link_capacity_bps=1e7,
        wan_rx_bps=5e6,
        wan_capacity_bps=1e7,
    )
    c = peers.columns(s)
    assert c["link_cap"] == 1e6
    assert c["link_overcap"] == pytest.approx(0.9)
    assert c["link_overcapacity"] == pytest.approx(0.09)
    assert c["wan_overcapacity"] == pytest.approx(0.5)
    assert c["latency_ttftoverslo"] == pytest.approx(1.8)
    assert c["latency_ttftoverref"] == pytest.approx(3.0)
    assert c["latency_tpotoverref"] == pytest.approx(2.0)


def test_a_peer_that_ranked_no_window_is_no_claim_not_a_target_met(tmp_path: Path) -> None:
    """Issue 17: "RCD failed on every window yet counts as beaten". CIRCA failed on every caused window
    of the blind sets and its ">=" rows read "met"; they are now no claim (met None, not counted)."""
    rows = [_row(seed, run, k, queue=(run == "all" and k >= 4)) for seed in (1, 2) for run in ("clean", "all") for k in range(1, 10)]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = score([corpus], [2], tmp_path / "out", "test", ROOT, tune_seeds=[1])
    for methods in result["sources"].values():
        zero = {"queue": {"all": {"windows": 6, "ac1": 0.0}}}
        methods["circa (family mapping)"] = {"ac1": zero, "compound": {}, "failed": 6, "caused": 6}
        methods["baro (family mapping)"] = {"ac1": zero, "compound": {}, "failed": 1, "caused": 6}
    got = {(t["source"], t["target"]): t for t in targets(result)}
    circa = got[("embedded", ">= circa (family mapping) on every class (AC@1)")]
    assert circa["met"] is None and "not run" in circa["figure"]
    assert got[("embedded", ">= baro (family mapping) on every class (AC@1)")]["met"] is True  # it ran on 5 of 6: a claim


def test_rankings_add_only_the_methods_a_cache_lacks_each_in_its_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A committed cache is what was scored: its methods are never ranked again (unless --rerun-rca)
    while they cover the windows; RCD, absent from the caches ranked before it could run, is added by
    its own interpreter; a method without an interpreter keeps its rankings, even on a rerun."""
    from inferslice.bench import corpus_peers as peers
    from inferslice.bench.corpus_score import rankings

    calls: list[tuple[str, tuple[str, ...]]] = []

    def fake_run(windows: object, python: str, methods: tuple[str, ...] | list[str]) -> dict[str, dict[str, object]]:
        calls.append((python, tuple(methods)))
        if python == "broken":
            raise RuntimeError("the interpreter died")
        return {m: {"w1": {"ranks": [f"{m}-by-{python}"], "error": None}} for m in methods}

    monkeypatch.setattr(peers, "run_rca", fake_run)
    monkeypatch.setattr(peers, "rca_cases", lambda windows: [{"id": i} for i in windows])  # the windows stand for their cases
    cache = tmp_path / "rca-ranks.json"
    W1: Any = ["w1"]  # the windows stand for their cases (rca_cases above)
    W12: Any = ["w1", "w2"]
    old = {m: {"w1": {"ranks": ["old"], "error": None}} for m in ("baro", "nsigma", "circa")}
    cache.write_text(json.dumps(old))
    both = {"baro": "rcaeval", "nsigma": "rcaeval", "circa": "rcaeval", "rcd": "rcd-venv"}
    got = rankings(cache, W1, both)
    assert calls == [("rcd-venv", ("rcd",))]
    assert got is not None and got["baro"] == old["baro"] and got["rcd"]["w1"]["ranks"] == ["rcd-by-rcd-venv"]
    assert json.loads(cache.read_text()) == got  # written back, so the next score reads the same rankings
    calls.clear()
    assert rankings(cache, W1, both) == got and calls == []  # nothing missing: nothing run
    no_rcd = {**both, "rcd": None}
    cache.write_text(json.dumps(old))
    assert rankings(cache, W1, no_rcd) == old and calls == []  # no interpreter: the cache as it is
    got = rankings(cache, W1, no_rcd, rerun=True)
    assert calls == [("rcaeval", ("baro", "nsigma", "circa"))] and got is not None and "rcd" not in got
    nothing = dict.fromkeys(both)
    assert rankings(cache, W1, nothing, rerun=True) == got  # a rerun with no interpreter keeps the cache
    calls.clear()
    cache.write_text(json.dumps({**old, "rcd": {"w1": {"ranks": ["kept"], "error": None}}}))
    got = rankings(cache, W12, {**both, "rcd": None})
    assert calls == [("rcaeval", ("baro", "nsigma", "circa"))]  # w2 uncovered: ranked again where it can be
    assert got is not None and got["rcd"]["w1"]["ranks"] == ["kept"]  # no interpreter: kept as it was
    cache.write_text(json.dumps(old))
    with pytest.raises(RuntimeError):
        rankings(cache, W1, {**both, "rcd": "broken"})
    assert json.loads(cache.read_text())["baro"]["w1"]["ranks"] == ["old"]  # the cache is intact
    assert rankings(tmp_path / "absent.json", [], nothing) is None


def test_circa_is_given_the_columns_without_their_exact_linear_copies() -> None:
    """A column that is an affine function of one of its own family before it (a rescaling by the SLO
    or the reference, within one case) is left out for CIRCA; the original, other families' columns
    that move the same way, noise, constants and the time stay."""
    from inferslice.bench.rcaeval_runner import linear_copies

    raw = [0.2, 0.5, 0.4, 1.9, 2.2]
    columns = {
        "time": [0.0, 1.0, 2.0, 3.0, 4.0],
        "latency_ttftp99": raw,
        "latency_ttftoverslo": [v / 0.5 for v in raw],  # a rescaling: a copy
        "queue_waiting": [3 * v + 1 for v in raw],  # moves as the latency does, another family: kept
        "queue_negated": [-v for v in raw],  # perfectly anti-correlated with queue_waiting: a copy
        "gpu_share": [1.0, 0.9, 1.0, 0.5, 0.6],  # correlated, not a copy
        "link_cap": [5e6] * 5,  # constant: CIRCA's own preprocessing drops it
        "link_overcap": [1.0, 0.9, 1.0, 0.5, 0.65],  # r = 0.996 with gpu_share, not a copy: kept
    }
    assert linear_copies(columns) == ["latency_ttftoverslo", "queue_negated"]
    assert linear_copies({"a_x": [1.0, 2.0], "a_y": [2.0, 4.0]}) == []  # two points: every pair is "exact"
    tiny = [1e-160, 2e-160, 4e-160]  # variances underflow to 0: no division error, no copy
    assert linear_copies({"a_x": tiny, "a_y": [2 * v for v in tiny]}) == []


def test_named_shows_a_method_that_names_one_class_everywhere() -> None:
    """A peer that names compute on every caused window reaches 100 % AC@1 on compute; ``named`` puts
    its pooled accuracy and how often it names each class beside that (healthy windows left out)."""
    pairs = [
        (T("compute"), V("compute")),
        (T("compute"), V("compute")),
        (T("queue"), V("compute")),
        (T("network"), V("compute")),
        (T("healthy"), V("compute")),  # not a caused window: not counted
    ]
    got = cm.named(pairs)
    assert got == {"windows": 4, "accuracy": 0.5, "share": {"compute": 1.0}}
    assert cm.ac1(pairs, caused_only=True)["compute"]["all"]["ac1"] == 1.0
    mixed = [*pairs[:2], (T("queue"), V("queue"))]
    assert cm.named(mixed) == {"windows": 3, "accuracy": 1.0, "share": {"compute": 0.6667, "queue": 0.3333}}  # _rate rounds


def test_healthy_windows_are_split_by_whether_their_clean_twin_breached() -> None:
    """A window whose clean twin breached the SLO too is healthy in truth (no injected cause explains
    it); the split says how the classifier read those apart from the rest."""
    breached = cm.Truth.of({"primary": "healthy", "clean_breach": True}, "free")
    met = cm.Truth.of({"primary": "healthy"}, "free")
    assert breached.clean_breach and not met.clean_breach
    pairs = [(met, V("healthy")), (met, V("healthy")), (met, V("network")), (breached, V("queue")), (breached, V("healthy")),
             (T("queue"), V("queue"))]  # fmt: skip
    got = cm.healthy_by_clean_twin(pairs)
    assert got["clean_met"] == {"windows": 3, "ac1": 0.6667, "said": {"healthy": 2, "network": 1}}
    assert got["clean_breached"] == {"windows": 2, "ac1": 0.5, "said": {"healthy": 1, "queue": 1}}


def test_a_max_steal_that_is_not_a_share_is_refused(tmp_path: Path) -> None:
    import argparse

    from inferslice.bench.corpus_score import run

    for bad in (0.0, 1.5, -0.1):
        args = argparse.Namespace(corpus=[tmp_path], seeds="1-2", tune_seeds=None, split="blind", out=tmp_path / "out", rcaeval_python=None,
                                  rcd_python=None, rerun_rca=False, expect_code=None, max_steal=bad, no_rca=False)  # fmt: skip
        with pytest.raises(ValueError, match="--max-steal must be a share"):
            run(args, ROOT)
    assert not (tmp_path / "out").exists()


def test_no_rca_runs_no_peer_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from inferslice.bench.corpus_score import run

    rows = [_row(seed, run_, k, queue=(run_ == "all" and k >= 4)) for seed in (1, 2) for run_ in ("clean", "all") for k in range(1, 10)]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    called: list[str] = []
    monkeypatch.setattr(peers, "run_rca", lambda cases, python, methods: called.append(python) or {})
    monkeypatch.setenv("INFERSLICE_RCAEVAL_PYTHON", "/opt/rcaeval/bin/python")  # an interpreter the score would use
    monkeypatch.setenv("INFERSLICE_RCD_PYTHON", "/opt/rcd/bin/python")

    def args(out: str, no_rca: bool) -> argparse.Namespace:
        return argparse.Namespace(corpus=[corpus], seeds="2", tune_seeds="1", split="test", out=tmp_path / out, rcaeval_python=None,
                                  rcd_python=None, rerun_rca=False, expect_code=None, max_steal=None, no_rca=no_rca)  # fmt: skip

    result = run(args("plain", True), ROOT)
    assert called == [] and result["rca_peers"] == [] and "rule-link-util" in result["sources"]["embedded"]
    run(args("with", False), ROOT)
    assert called == ["/opt/rcaeval/bin/python", "/opt/rcd/bin/python"]  # without the flag each interpreter is asked
