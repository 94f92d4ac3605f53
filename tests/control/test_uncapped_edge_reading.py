"""The controller reads a tier's cap through ``SliceSnapshot.edge_cap_bps``: since the collectors
report an uncapped edge's cap at the link's physical rate (issue 17, v10), a cap at or above it must
read as no cap, exactly as the missing field did before. Otherwise a demand estimate would carry
10 Gbit/s, and a cap actuated above the line rate would never be "seen" (HTB clamps it)."""

from __future__ import annotations

from inferslice.control.demand import demand_bps
from inferslice.control.settings import TierPolicy
from inferslice.control.state import ControlState, SliceState
from inferslice.control.trust import cap_unseen, link_pinned
from inferslice.snapshot import SliceSnapshot

LINE_RATE = 10e9


def _ss(cap_bps: float | None, **snap: float | None) -> SliceState:
    return SliceState(tier="standard", replicas_target=1, cap_bps=cap_bps, snapshot=SliceSnapshot(slice="standard", **snap))


def test_an_uncapped_edge_at_the_physical_rate_is_no_cap_to_the_controller() -> None:
    reported = _ss(None, link_cap_bps=LINE_RATE, link_capacity_bps=LINE_RATE, link_rx_bps=9.5e9)
    assert reported.snapshot is not None and reported.snapshot.edge_cap_bps is None
    assert not link_pinned(reported, 0.9)  # 95 % of the line rate is no cap pinned
    # A cap actuated above the line rate (a budget of 20 Gbit/s) reads at 10 Gbit/s: not a mismatch.
    above = _ss(2e10, link_cap_bps=LINE_RATE, link_capacity_bps=LINE_RATE, link_rx_bps=1e6)
    assert not cap_unseen(None, above, ControlState(), 8.0)


def test_a_cap_below_the_physical_rate_is_read_as_before() -> None:
    capped = _ss(None, link_cap_bps=5e5, link_capacity_bps=LINE_RATE, link_rx_bps=4.8e5)
    assert link_pinned(capped, 0.9)
    stale = _ss(1e6, link_cap_bps=5e5, link_capacity_bps=LINE_RATE, link_rx_bps=4.8e5)  # raised to 1 Mbit/s, not yet seen
    assert cap_unseen(None, stale, ControlState(), 8.0)


def test_demand_without_a_link_reading_never_falls_back_to_the_line_rate() -> None:
    p = TierPolicy("standard", 1, 3, 1.0, 0.5, 4.0, 1.0, 8, ("paris/gpu0",))
    uncapped = _ss(None, link_cap_bps=LINE_RATE, link_capacity_bps=LINE_RATE)  # no rx this window
    assert demand_bps(uncapped, p, ControlState(), None) is None
    capped = _ss(None, link_cap_bps=5e5, link_capacity_bps=LINE_RATE)
    assert demand_bps(capped, p, ControlState(), None) == 5e5  # the cap carried, as before
