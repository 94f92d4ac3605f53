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
    for stem in ("scale", "fleet-run2", "fleet-run4"):
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


def test_the_floor_leaves_out_exactly_the_quantile_terms_and_their_helpers() -> None:
    from inferslice.bench.scale_fleet import _is_quantile_rule
    from inferslice.collectors import recorded
    from inferslice.collectors.fields import FieldSettings, FirstOf, Quantile, field_specs

    def quantiles(spec: object) -> list[Quantile]:
        if isinstance(spec, Quantile):
            return [spec]
        return [q for o in spec.options for q in quantiles(o)] if isinstance(spec, FirstOf) else []

    perspectives = (FieldSettings(perspective="engine"), FieldSettings(perspective="client"))  # the group's default: both
    found = {(q.q, q.histogram) for fs in perspectives for spec in field_specs(fs).values() for q in quantiles(spec)}
    rules = recorded.snapshot_rule_group(8.0, 2.0)["rules"]
    left_out = [r for r in rules if _is_quantile_rule(r)]
    assert len(left_out) == len(found) + len({h for _, h in found})  # each quantile, and one helper per histogram
    kept = [r for r in rules if not _is_quantile_rule(r)]
    assert kept and not any("histogram_quantile" in r["expr"] or "_bucket" in r["expr"] for r in kept)
    assert len(kept) + len(left_out) == len(rules)
