"""bench scale's markdown report of a committed result: each part says the load it ran under and
how many snapshot-rule evaluations Prometheus skipped (figures that decide how to read the rest)."""

from __future__ import annotations

import json
from pathlib import Path

from inferslice.bench import scale

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "scale"


def test_the_report_names_each_parts_load_and_missed_evaluations() -> None:
    result = json.loads((RESULTS / "scale.json").read_text())
    text = scale.markdown(result)
    fleet = result["fleet"]
    assert f"{fleet['rule_group_iterations_missed']:.0f} evaluations missed" in text
    assert f"load average {fleet['load_average_before'][0]:.2f} before, {fleet['load_average_after'][0]:.2f} after" in text
    for point in result["curve"].values():
        row = next(line for line in text.splitlines() if line.startswith(f"| {point['slices']:,} | {point['head_series']:,.0f} |"))
        assert row.endswith(f"| {point['rule_group_iterations_missed']:.0f} | {point['load_average_before'][0]:.2f}, "
                            f"{point['load_average_after'][0]:.2f} |")  # fmt: skip


def test_the_committed_report_is_the_committed_result_rendered() -> None:
    for stem in ("scale", "fleet-run2"):
        result = json.loads((RESULTS / f"{stem}.json").read_text())
        assert (RESULTS / f"{stem}.md").read_text() == scale.markdown(result)


def test_the_rule_groups_time_is_split_by_kind_of_rule() -> None:
    from inferslice.bench.scale_fleet import rule_cost_by_kind

    rows = [
        {"record": "slice_pop_le:h_bucket:rate_w8s", "term": "", "seconds": 3.0},
        {"record": "slice_pop:inferslice_snapshot:max_w8s", "term": "quantile:0.99:h", "seconds": 0.5},
        {"record": "slice_pop:inferslice_snapshot:max_w8s", "term": "quantile:0.5:h", "seconds": 0.5},
        {"record": "slice_pop:inferslice_snapshot:sum_w8s", "term": "rate:c", "seconds": 1.0},
    ]
    kinds = rule_cost_by_kind(rows)
    assert kinds["bucket_rates"] == {"rules": 1, "seconds": 3.0, "share": 0.6}
    assert kinds["quantiles"] == {"rules": 2, "seconds": 1.0, "share": 0.2}
    assert kinds["other"] == {"rules": 1, "seconds": 1.0, "share": 0.2}
