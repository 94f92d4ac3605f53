"""The split by a cause that acted on the tier under the truth's bar (a compound run's other cause)."""

from __future__ import annotations

from inferslice.bench import corpus_metrics as cm


def T(primary: str, causes: tuple[str, ...], **shares: float) -> cm.Truth:
    return cm.Truth(primary, causes, (), "standard", {"ttft": 1.0, "tpot": None}, {("ttft", c): v for c, v in shares.items()})


def test_a_window_where_a_cause_acted_under_the_truths_bar_is_counted_apart() -> None:
    rows = [
        # a load step alone on the tier: two read right, one read network (no network cause acted)
        (T("queue", ("queue",), queue=0.9), cm.Verdict("queue")),
        (T("queue", ("queue",), queue=0.9), cm.Verdict("queue")),
        (T("queue", ("queue",), queue=0.9), cm.Verdict("network")),
        # cap + load on the tier; removing the cap took 10 % off the excess, under the bar: truth is queue
        (T("queue", ("queue",), queue=0.8, network=0.1), cm.Verdict("network")),
        (T("queue", ("queue",), queue=0.8, network=0.1), cm.Verdict("network")),
        (T("queue", ("queue",), queue=0.8, network=0.1), cm.Verdict("queue")),
        (T("queue", ("queue",), queue=0.8, network=0.1), cm.Verdict("compute")),  # wrong, but not the uncounted cause
        # the cap injected on the tier but not acting in this window (share 0): not uncounted
        (T("queue", ("queue",), queue=0.9, network=0.0), cm.Verdict("queue")),
        # both counted: a compound truth, nothing uncounted
        (T("network", ("network", "queue"), network=0.5, queue=0.4), cm.Verdict("network")),
        # healthy windows are not caused windows
        (T("healthy", (), network=0.1), cm.Verdict("queue")),
    ]
    out = cm.ac1_by_uncounted(rows)
    assert out["queue"]["none"] == {"windows": 4, "ac1": 0.75, "named_uncounted": 0}
    assert out["queue"]["uncounted"] == {"windows": 4, "ac1": 0.25, "named_uncounted": 2}
    assert out["network"] == {"none": {"windows": 1, "ac1": 1.0, "named_uncounted": 0}}
    assert "healthy" not in out
