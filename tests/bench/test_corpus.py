"""The corpus scoring's arithmetic (pure) and the corpus' labels for the brief's points."""

from __future__ import annotations

from inferslice.bench.corpus import primary_of, split
from inferslice.bench.corpus_brief import brief_points
from inferslice.bench.corpus_eval import ac_at_k, predict_rule_link, predict_rule_ttft, rca_case, set_f1


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
