"""``corpus_metrics.cause_shown`` / ``ac1_cause_shown``: the caused windows whose cause a gauge of the
window shows, split from those where none does (beside AC@1, never instead of it)."""

from __future__ import annotations

import dataclasses

from inferslice.bench import corpus_metrics as cm
from inferslice.snapshot import SliceSnapshot

BASE = SliceSnapshot(slice="standard", window_s=6.0, link_capacity_bps=1e10, link_cap_bps=1e10, link_rx_bps=300_000.0)


def _snap(**kw: object) -> SliceSnapshot:
    return dataclasses.replace(BASE, **kw)  # type: ignore[arg-type]


def test_network_shows_at_a_full_cap_a_full_wan_link_or_an_rtt_step() -> None:
    assert not cm.cause_shown("network", BASE)  # an uncapped edge carrying 0.3 Mbit/s of 10 Gbit/s
    assert cm.cause_shown("network", _snap(link_cap_bps=350_000.0))  # 86 % of a 0.35 Mbit/s cap
    assert not cm.cause_shown("network", _snap(link_cap_bps=500_000.0))  # 60 %
    assert cm.cause_shown("network", _snap(wan_rx_bps=850_000.0, wan_capacity_bps=1_000_000.0))
    assert not cm.cause_shown("network", _snap(wan_rx_bps=700_000.0, wan_capacity_bps=1_000_000.0))
    assert cm.cause_shown("network", _snap(wan_rtt_s=0.040, wan_base_rtt_s=0.009))  # 31 ms over
    assert not cm.cause_shown("network", _snap(wan_rtt_s=0.020, wan_base_rtt_s=0.009))  # 11 ms: jitter


def test_compute_and_queue_show_in_their_gauges() -> None:
    assert cm.cause_shown("compute", _snap(gpu_share=0.4))
    assert not cm.cause_shown("compute", _snap(gpu_share=1.0))
    assert cm.cause_shown("compute", _snap(gpu_share=1.0, preemptions_per_s=0.5))
    assert not cm.cause_shown("compute", BASE)  # no gauge: not shown
    assert cm.cause_shown("queue", _snap(requests_waiting=2.0))
    assert not cm.cause_shown("queue", _snap(requests_waiting=0.0))


def test_the_split_counts_caused_windows_only() -> None:
    def truth(cls: str) -> cm.Truth:
        return cm.Truth(cls, (cls,) if cls != "healthy" else (), (), "standard", {}, {})

    pairs = [
        (truth("compute"), cm.Verdict("compute"), _snap(gpu_share=0.3)),
        (truth("compute"), cm.Verdict("healthy"), _snap(gpu_share=1.0)),
        (truth("compute"), cm.Verdict("compute"), _snap(gpu_share=1.0)),
        (truth("healthy"), cm.Verdict("healthy"), BASE),
    ]
    out = cm.ac1_cause_shown(pairs)
    assert set(out) == {"compute"}
    assert out["compute"]["shown"] == {"windows": 1, "ac1": 1.0}
    assert out["compute"]["not_shown"] == {"windows": 2, "ac1": 0.5}


def test_a_zero_rtt_base_or_missing_wan_fields_show_nothing() -> None:
    assert not cm.cause_shown("network", _snap(wan_rtt_s=0.040, wan_base_rtt_s=0.0))
    assert not cm.cause_shown("network", _snap(wan_rx_bps=900_000.0, wan_capacity_bps=None))
    assert not cm.cause_shown("network", _snap(link_rx_bps=None))
    assert not cm.cause_shown("network", _snap(link_cap_bps=None, link_capacity_bps=None))


def test_caused_windows_are_split_by_whether_their_own_p99_breached_the_slo() -> None:
    """A cause adds its excess over the reference whether or not the window crosses the SLO; the split
    says how many of a class's misses lie where nobody would be paged, and how many were read healthy."""

    def truth(cls: str) -> cm.Truth:
        return cm.Truth(cls, (cls,) if cls != "healthy" else (), (), "free", {}, {})

    rows = [
        (truth("network"), cm.Verdict("network"), 0.9, 0.5),
        (truth("network"), cm.Verdict("queue"), 0.51, 0.5),
        (truth("network"), cm.Verdict("healthy"), 0.3, 0.5),
        (truth("network"), cm.Verdict("healthy"), 0.5, 0.5),  # at the SLO is meeting it: P99 <= SLO
        (truth("network"), cm.Verdict("network"), 0.2, 0.5),
        (truth("network"), cm.Verdict("network"), None, 0.5),  # no P99 recorded: left out
        (truth("queue"), cm.Verdict("queue"), 2.0, None),  # no SLO: left out
        (truth("healthy"), cm.Verdict("healthy"), 0.1, 0.5),  # not caused
    ]
    out = cm.ac1_by_slo(rows)
    assert out == {
        "network": {
            "breached": {"windows": 2, "ac1": 0.5, "said_healthy": 0},
            "met": {"windows": 3, "ac1": 0.3333, "said_healthy": 2},
        }
    }


def test_caused_windows_are_split_by_the_kinds_their_truth_holds() -> None:
    def truth(cls: str, *kinds: str) -> cm.Truth:
        return cm.Truth(cls, (cls,) if cls != "healthy" else (), kinds, "premium", {}, {})

    pairs = [
        (truth("network", "wan_cross"), cm.Verdict("healthy")),
        (truth("network", "wan_cross"), cm.Verdict("network")),
        (truth("network", "wan_cross"), cm.Verdict("healthy")),
        (truth("network", "cap"), cm.Verdict("network")),
        (truth("network", "load", "cap"), cm.Verdict("queue")),  # a pair of kinds, in name order
        (truth("network", "cap", "load"), cm.Verdict("network")),
        (truth("healthy"), cm.Verdict("queue")),  # no cause: not counted
        (truth("compute"), cm.Verdict("compute")),  # no kind recorded: not counted
    ]
    out = cm.ac1_by_kind(pairs)
    assert list(out) == ["wan_cross", "cap+load", "cap"]  # most windows first, then by name
    assert out["wan_cross"] == {"windows": 3, "ac1": 0.3333, "said": {"healthy": 2, "network": 1}}
    assert out["cap+load"] == {"windows": 2, "ac1": 0.5, "said": {"queue": 1, "network": 1}}
    assert out["cap"] == {"windows": 1, "ac1": 1.0, "said": {"network": 1}}
