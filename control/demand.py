"""A tier's unconstrained response bandwidth: what the cap must carry (pure).

A cap that binds hides the demand behind it: the link carries the cap, never more. What the clients
want is estimated from three pieces of evidence, the largest winning (each is a lower bound of a
different kind), and never above ``demand_inflation_max`` x what the link carries:

(a) what the link carries, stretched by how much the cap slows delivery (TPOT or tokens/s against
    the reference);
(b) the streams in flight at the reference TPOT times the bits per token (a cap just applied has few
    finished requests to show its TPOT, but the streams it holds back are already running);
(c) the offered load: arrivals x tokens per request x bits per token (an open-loop load keeps
    arriving at the rate it wants, whatever the cap).

(a) and (b) measure against what the engine would deliver with the link free. A replica on a reduced
GPU share decodes 1/share slower whatever the link (a co-tenant's time slice), so its reference TPOT
is the reference / share and its reference throughput the reference x share: without this the GPU's
slowdown read as demand the cap hides (the model's ``overlap``: TPOT 2.6x the reference on a 0.35
share, 1.2 Mbit/s carried on a 1.5 Mbit/s cap, estimated 3.1 Mbit/s and raised to 4.0: futile).
The snapshot's share is the lowest replica's (``collectors/fields.py``), the one whose streams last
longest and so fill the median.

Bits per token and tokens per request are learned (EWMA) only from windows in which the link does
not bind: under a binding cap the engine's token counter runs ahead of what the link delivers (the
testbed's squeeze read ~1,760 bit/token against ~2,450 uncapped), so the window's own ratio
underestimates what each token costs on the wire.
"""

from __future__ import annotations

from dataclasses import replace

from inferslice.control.settings import TierPolicy
from inferslice.control.state import ControlState, SliceState
from inferslice.control.trust import link_pinned

_LEARN_WEIGHT = 0.3  # EWMA weight of one free window: a few windows dominate, one odd window does not


def _ewma(old: float | None, obs: float) -> float:
    return obs if old is None else (1 - _LEARN_WEIGHT) * old + _LEARN_WEIGHT * obs


def learn(st: ControlState, ss: SliceState, p: TierPolicy) -> ControlState:
    """Update bits per token and tokens per request from a window whose link does not bind."""
    snap = ss.snapshot
    if snap is None or link_pinned(ss, p.settings.link_pinned_ratio):
        return st
    bpt, tpr = st.bits_per_token, st.tokens_per_request
    tokens = snap.output_tokens_per_s
    if tokens and tokens > 0 and snap.link_rx_bps:
        bpt = _ewma(bpt, snap.link_rx_bps / tokens)
    if tokens and tokens > 0 and snap.request_rate:
        tpr = _ewma(tpr, tokens / snap.request_rate)
    return replace(st, bits_per_token=bpt, tokens_per_request=tpr)


def demand_bps(ss: SliceState, p: TierPolicy, st: ControlState, arrivals_rps: float | None) -> float | None:
    """The larger of (a), (b) and (c) above; None without any link reading."""
    snap = ss.snapshot
    if snap is None:
        return None
    carried = snap.link_rx_bps if snap.link_rx_bps is not None else (ss.cap_bps or snap.edge_cap_bps)
    if carried is None:
        return None
    k = 1.0
    share = snap.gpu_share if snap.gpu_share is not None and 0.0 < snap.gpu_share < 1.0 else 1.0
    tpot = snap.tpot_p50_s if snap.tpot_p50_s is not None else snap.tpot_mean_s
    ref_tpot = snap.ref_tpot_p50_s if snap.ref_tpot_p50_s is not None else snap.ref_tpot_mean_s
    if ref_tpot:
        ref_tpot = ref_tpot / share
    if tpot and ref_tpot:
        k = max(k, tpot / ref_tpot)
    if snap.output_tokens_per_s and snap.ref_output_tokens_per_s:
        k = max(k, snap.ref_output_tokens_per_s * share / snap.output_tokens_per_s)
    demand = carried * k
    bits_per_token = st.bits_per_token
    if bits_per_token is None and snap.output_tokens_per_s and snap.link_rx_bps:
        bits_per_token = snap.link_rx_bps / snap.output_tokens_per_s
    if bits_per_token:
        if snap.requests_running and ref_tpot:
            demand = max(demand, snap.requests_running * bits_per_token / ref_tpot)
        if arrivals_rps and st.tokens_per_request:
            demand = max(demand, arrivals_rps * st.tokens_per_request * bits_per_token)
    return min(demand, carried * p.settings.demand_inflation_max)
