"""The split by a cause on the tier that the truth did not count (a compound run's other cause)."""

from __future__ import annotations

from inferslice.bench import corpus_metrics as cm


def T(primary: str, causes: tuple[str, ...], tier: str = "standard") -> cm.Truth:
    return cm.Truth(primary, causes, (), tier, {"ttft": 1.0, "tpot": None}, {})


def test_a_window_whose_tier_carries_a_cause_the_truth_left_out_is_counted_apart() -> None:
    rows = [
        # a load step alone on the tier: two read right, one read network (no network cause here)
        (T("queue", ("queue",)), cm.Verdict("queue"), {"queue"}),
        (T("queue", ("queue",)), cm.Verdict("queue"), {"queue"}),
        (T("queue", ("queue",)), cm.Verdict("network"), {"queue"}),
        # cap + load on the tier; removing the cap took under the bar off the excess: truth is queue
        (T("queue", ("queue",)), cm.Verdict("network"), {"queue", "network"}),
        (T("queue", ("queue",)), cm.Verdict("network"), {"network", "queue"}),
        (T("queue", ("queue",)), cm.Verdict("queue"), {"queue", "network"}),
        (T("queue", ("queue",)), cm.Verdict("compute"), {"queue", "network"}),  # wrong, but not the uncounted cause
        # both counted: a compound truth, nothing uncounted
        (T("network", ("network", "queue")), cm.Verdict("network"), {"network", "queue"}),
        # healthy windows are not caused windows
        (T("healthy", ()), cm.Verdict("queue"), {"queue", "network"}),
    ]
    out = cm.ac1_by_uncounted(rows)
    assert out["queue"]["none"] == {"windows": 3, "ac1": 0.6667, "named_uncounted": 0}  # to four places, as every share
    assert out["queue"]["uncounted"] == {"windows": 4, "ac1": 0.25, "named_uncounted": 2}
    assert out["network"] == {"none": {"windows": 1, "ac1": 1.0, "named_uncounted": 0}}
    assert "healthy" not in out
