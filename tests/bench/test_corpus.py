"""The corpus scoring's arithmetic (pure) and the corpus' labels for the brief's points."""

from __future__ import annotations

from pathlib import Path

from inferslice.bench.corpus import primary_of, read, split
from inferslice.bench.corpus_brief import brief_points
from inferslice.bench.corpus_eval import ac_at_k, evaluate, predict_rule_link, predict_rule_ttft, rca_case, set_f1, targets


def test_set_f1() -> None:
    assert set_f1(["network", "queue"], ["network", "queue"]) == 1.0
    assert set_f1(["network"], ["network", "queue"]) == 2 / 3
    assert set_f1([], []) == 1.0 and set_f1(["queue"], ["compute"]) == 0.0


def test_primary_of_a_compound_truth_is_the_remedy_that_comes_first() -> None:
    assert primary_of(["queue", "network"]) == "network_limited"
    assert primary_of(["queue", "compute"]) == "compute_limited"
    assert primary_of([]) == "healthy"


def test_ac_at_k_counts_each_cause_of_a_window() -> None:
    recs = [{"id": "a", "family": "f", "causes": ["network", "queue"]}, {"id": "b", "family": "g", "causes": ["queue"]}]
    ranks = {"a": ["network", "compute", "queue"], "b": ["compute", "queue"]}
    one = ac_at_k(recs, ranks, 1)
    assert one["by_cause"] == {"network": 1.0, "queue": 0.0}
    assert ac_at_k(recs, ranks, 3)["by_cause"] == {"network": 1.0, "queue": 1.0}
    assert one["by_family"] == {"f": 0.5, "g": 0.0}


def test_split_alternates_scenarios_within_a_family() -> None:
    recs = [{"family": "f", "scenario": s} for s in ("a", "b", "c", "a")]
    out = split(recs)  # type: ignore[arg-type]
    assert [r["split"] for r in out] == ["tune", "test", "tune", "tune"]


def test_naive_rules() -> None:
    snap = {"slice": "s", "slo_ttft_p99_s": 0.5, "ttft_p99_s": 2.0, "link_rx_bps": 4.6e5, "link_cap_bps": 5e5}
    assert predict_rule_ttft({"snapshot": snap})[0] == "queue_limited"
    assert predict_rule_link({"snapshot": snap})[0] == "network_limited"
    assert predict_rule_link({"snapshot": {**snap, "link_rx_bps": 1e5}})[0] == "queue_limited"


def test_a_single_point_gets_a_reference_series_then_the_point() -> None:
    rec = {"id": "p", "causes": ["queue"], "snapshot": {"slice": "s", "ttft_p99_s": 5.0, "ref_ttft_p99_s": 0.1}}
    case = rca_case(rec)
    assert case is not None and case["inject_time"] == 10.0
    rows = case["rows"]
    assert len(rows) == 15 and all(r["client_ttfttail"] < 0.2 for r in rows[:10]) and all(r["client_ttfttail"] > 4 for r in rows[10:])
    assert rca_case({**rec, "causes": []}) is None  # RCA methods are scored only where there is a cause


def test_the_brief_points_label_the_brief_s_own_readings() -> None:
    labels = {rid: causes for rid, causes, _, _ in brief_points()}
    assert labels["cap-1mbps-10"] == [] and labels["cap-at-nominal-10"] == []
    assert labels["free-queue-16"] == ["queue"] and labels["free-queue-and-cap-16"] == ["network", "queue"]
    assert len(labels) >= 25


def test_a_peer_that_failed_everywhere_is_not_run_not_beaten_and_attribution_counts_true_shares() -> None:
    """Issue 17: RCD failed on every window yet counted as beaten, and the attribution target was met on
    a figure diluted by 0-truth, 0-predicted pairs. A peer with no window is "not run" (no claim), and
    the target reads the pairs whose true share is > 0, the all-pairs figure beside it."""
    ac1 = {"by_cause": {"queue": 0.9, "network": 0.9}, "by_cause_single": {"queue": 1.0, "network": 1.0}}
    zero = {"by_cause": {"queue": 0.0, "network": 0.0}, "by_cause_single": {"queue": 0.0, "network": 0.0}}
    result = {
        "tuned": {
            "splits": {
                "test": {
                    "methods": {
                        "inferslice": {
                            "primary_accuracy": 0.99,
                            "compound_set_f1": 0.95,
                            "compound_windows": 5,
                            "set_f1": 0.97,
                            "ac1": ac1,
                        },
                        "baro": {"windows_with_cause": 4, "failed": 0, "errors": {}, "ac1": zero},
                        "rcd": {"windows_with_cause": 4, "failed": 4, "errors": {"AttributeError": 4}, "ac1": zero},
                    },
                    "attribution_error": {
                        "pairs": 10,
                        "mae_pp": 8.0,
                        "mae_ms": 40.0,
                        "pairs_true_positive": 3,
                        "mae_pp_true_positive": 26.2,
                    },
                }
            }
        },
        "cost": {"classify_over_parse_cost": 3.5},
    }
    got = {name: (ok, text) for name, ok, text in targets(result)}
    assert not any("beats rcd" in name for name in got)
    assert got["rcd: not run"][0] is False and "failed on all 4" in got["rcd: not run"][1]
    assert got["beats baro on every cause class (AC@1, all windows)"][0] is True
    ok, text = got["attribution error <= 15 pp (pairs whose true share is > 0)"]
    assert ok is False and text.startswith("26.2 pp over 3 pairs") and "8.0 pp" in text


def test_a_peers_failures_are_counted_on_the_half_they_happened_in() -> None:
    """A peer that failed on every tune window but ranked every test window ran on the test half:
    its failures there are 0, not the corpus-wide count (the rankings cover both halves)."""
    records = [r for r in read(Path(__file__).resolve().parents[2] / "bench/results/diagnosis/corpus.jsonl") if r["causes"]]
    tune = [r for r in records if r["split"] == "tune"][:6]
    test = [r for r in records if r["split"] == "test"][:4]
    rca = {"peer": {r["id"]: {"ranks": [], "error": "AttributeError: x"} for r in tune}}
    rca["peer"].update({r["id"]: {"ranks": ["queue", "network", "compute"], "error": None} for r in test})
    splits = evaluate([*tune, *test], rca)["splits"]
    assert splits["tune"]["methods"]["peer"]["failed"] == 6
    assert splits["test"]["methods"]["peer"]["failed"] == 0 and splits["test"]["methods"]["peer"]["windows_with_cause"] == 4
    assert splits["all"]["methods"]["peer"]["failed"] == 6
