"""Which verdicts may drive a costly remedy (pure; clock passed in).

A scale-out or a relocation costs a cold start, and two misreadings were seen driving one:

- the window that straddles a cap change: its link rate averages the old cap with the new one, so
  the link looks free while the TTFT of requests delayed behind the old cap is still high, and the
  classifier reads ``compute_limited`` (the demo's Standard, one window after the cap raise);
- the first squeezed windows on the real testbed read ``compute_limited`` before the link's counters
  showed the cap binding.

Two rules answer them, applied by ``decide`` before it adds replicas or moves one:

1. Persistence: a compute verdict drives replicas or a move only once it held for
   ``persist_windows`` consecutive diagnosis windows; a queue verdict too, unless its confidence
   reaches ``act_at_once_confidence`` (a real queue grows within one load step and the classifier is
   sure of it; a compute verdict is its least certain one).
2. The network shadow: while a tier's link binds (it carries ``link_pinned_ratio`` of its cap or the
   verdict names the network), for ``network_settle_s`` after it last did, and while a cap raise
   awaits its outcome check, a queue or compute verdict adds no replicas and moves nothing, and no
   forecast pre-scales (arrivals recovering behind a raised cap are not a demand trend): the backlog
   built behind the cap drains through those windows, and the issue's rule is that an episode whose
   only binding resource is the network never gets replicas. A queue the classifier reads *in the
   same window* as the network (a compound verdict) is trusted: both resources were seen binding.
"""

from __future__ import annotations

from dataclasses import replace

from inferslice.actions import ActionKind
from inferslice.control.settings import ControlSettings
from inferslice.control.state import ControlState, SliceState
from inferslice.diagnosis import BINDING_REGIMES, Diagnosis, Regime

CAP_MATCH = 0.05  # a reported cap within 5 % of the actuated one is that cap (HTB rounds its rates)


def link_pinned(ss: SliceState, ratio: float) -> bool:
    """The tier's edge link carries at least ``ratio`` of its cap this window."""
    snap = ss.snapshot
    cap = ss.cap_bps if ss.cap_bps is not None else (snap.edge_cap_bps if snap is not None else None)
    rx = snap.link_rx_bps if snap is not None else None
    return cap is not None and cap > 0 and rx is not None and rx >= ratio * cap


def named(diagnosis: Diagnosis | None, s: ControlSettings) -> set[Regime]:
    """The binding resources a verdict names at ``min_confidence`` or more, primary or secondary, also
    under an ``unknown`` primary (which acts on nothing): evidence of a binding resource all the same."""
    if diagnosis is None or diagnosis.confidence < s.min_confidence:
        return set()
    return {r for r in (diagnosis.regime, *diagnosis.secondary) if r in BINDING_REGIMES}


def network_only(diagnosis: Diagnosis | None, s: ControlSettings) -> bool:
    """The network is the only binding resource the verdict names: never replicas, not even from the forecast."""
    return named(diagnosis, s) == {Regime.NETWORK_LIMITED}


def track(
    st: ControlState, diagnosis: Diagnosis | None, binding: set[Regime], ss: SliceState, s: ControlSettings, now_s: float
) -> ControlState:
    """Count consecutive windows per binding regime (one count per diagnosis window, however often
    the controller steps) and remember when the network last showed binding: pinned at its cap, or
    named by a verdict (``named``: an unknown primary with a network secondary counts, or a forecast
    could pre-scale in the one window the classifier was unsure which resource came first)."""
    seen = st.network_seen_s
    if Regime.NETWORK_LIMITED in binding or Regime.NETWORK_LIMITED in named(diagnosis, s) or link_pinned(ss, s.link_pinned_ratio):
        seen = now_s
    if any(r.state == "ready" and r.gpu_share < s.contended_share for r in ss.replicas):
        st = replace(st, contended_seen_s=now_s)
    if diagnosis is None:
        return replace(st, network_seen_s=seen)
    window = diagnosis.window_end_s if diagnosis.window_end_s is not None else now_s
    if st.streak_window_s is not None and window <= st.streak_window_s:
        return replace(st, network_seen_s=seen)  # the same window again: no new evidence
    old = dict(st.streaks)
    streaks = tuple(sorted((r.value, old.get(r.value, 0) + 1) for r in binding))
    return replace(st, network_seen_s=seen, streaks=streaks, streak_window_s=window)


def cap_unseen(diagnosis: Diagnosis | None, ss: SliceState, st: ControlState, window_s: float) -> bool:
    """The verdict does not yet measure the cap in force: its snapshot reports another cap than the
    one actuated (the exporter and Prometheus lag a cap change by a window or two), or its window
    began before the latest applied cap change. Acting on it would raise the cap again for a squeeze
    already answered (the demo raised 0.5 -> 1.5 -> 4.5 Mbit/s so, with 1.5 enough)."""
    snap = ss.snapshot
    seen = snap.edge_cap_bps if snap is not None else None  # an uncapped edge reports none: nothing to match
    if seen is not None and ss.cap_bps is not None and abs(seen - ss.cap_bps) > CAP_MATCH * ss.cap_bps:
        return True
    end = diagnosis.window_end_s if diagnosis is not None else None
    if end is None:
        return False
    # The window is the snapshot's own (the API's loop reads 8 s windows every 2 s), the settings' only without one.
    length = snap.window_s if snap is not None and snap.window_s else window_s
    return any(c.kind is ActionKind.SET_CAP and c.applied and end - length < c.expected_by_s - c.delay_s for c in st.checks)


def streak(st: ControlState, regime: Regime) -> int:
    return dict(st.streaks).get(regime.value, 0)


def shadowed(st: ControlState, s: ControlSettings, now_s: float) -> bool:
    """Inside the network shadow (rule 2): recent link evidence or a cap raise not yet judged."""
    if st.network_seen_s is not None and now_s - st.network_seen_s < s.network_settle_s:
        return True
    return any(c.kind is ActionKind.SET_CAP and c.applied and c.cause == Regime.NETWORK_LIMITED.value for c in st.checks)


def share_recovered(ss: SliceState, st: ControlState, s: ControlSettings, now_s: float) -> bool:
    """Every ready replica reports its full GPU share now (the engine hosts answer at once), but the
    window saw a reduced one, or a replica reported one within ``compute_settle_s``: the latency
    statistics still carry the co-tenant that left (the demo's Premium read compute_limited for 6 s
    after, at share 1.0, and scaled out twice)."""
    snap = ss.snapshot
    ready = [r for r in ss.replicas if r.state == "ready"]
    if not ready or any(r.gpu_share < s.contended_share for r in ready):
        return False
    seen = snap.gpu_share if snap is not None else None
    if seen is not None and seen < s.contended_share:
        return True
    return st.contended_seen_s is not None and now_s - st.contended_seen_s < s.compute_settle_s


def held(
    regime: Regime, st: ControlState, confidence: float, s: ControlSettings, now_s: float, *, compound: bool, ss: SliceState | None = None
) -> str | None:
    """Why a replica or move remedy for ``regime`` waits this window (rule 2, then rule 1); None: it may act.
    ``compound``: the same window's verdict also names the network."""
    if shadowed(st, s, now_s) and not (compound and regime is Regime.QUEUE_LIMITED):
        ago = f"{now_s - st.network_seen_s:.0f} s after" if st.network_seen_s is not None else "while"
        return f"{regime.value} read {ago} the link bound or a cap raise awaits its check: no replicas until the network settles"
    if regime is Regime.COMPUTE_LIMITED and ss is not None and share_recovered(ss, st, s, now_s):
        return "compute_limited read at a GPU share the replicas no longer have (the co-tenant left): the verdict lags"
    if regime is Regime.QUEUE_LIMITED and confidence >= s.act_at_once_confidence:
        return None
    n = streak(st, regime)
    if n < s.persist_windows:
        return f"{regime.value} in {n} of the {s.persist_windows} consecutive windows a cold start's worth of remedy needs"
    return None
