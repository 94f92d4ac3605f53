"""The scenarios' WAN impairments on the netns testbed, and the per-PoP path reading the controller gets.

Impairments go through the testbed's one mechanism (``testbed/net/wan.py``): cross-traffic that
"fills the link but X" is UDP iperf3 at (the link's physical rate - X) toward the gateway; an added
delay sets the link's round trip in the delay line to its declared RTT + the step. Both are undone
at the end of the event and before every run.

``path_excess_s`` is what ``SliceState.path_excess_s`` needs per PoP: how much slower than declared
the PoP's route to the gateway is, the largest excess over its hops of the PoP prober's mean RTT
(``inferslice_pop_rtt_seconds``, both directions of a hop) over the declared RTT (pure; the runner
queries Prometheus).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inferslice import metric_names as m
from inferslice.bench.control_scenarios import Scenario, WanEvent
from inferslice.topology import Topology


def link_name(key: str) -> str:
    """ "bristol|london" -> the testbed's "wan-bristol-london" (the library takes either order)."""
    a, b = key.split("|")
    return f"wan-{a}-{b}"


class WanPlayer:
    """Starts and ends a scenario's WAN events on the testbed as the run's clock passes them."""

    def __init__(self, top: Topology, sc: Scenario, state_dir: Path) -> None:
        self.top, self.state_dir = top, state_dir
        self.pending: list[WanEvent] = sorted(sc.wan, key=lambda e: e[0])
        self.active: list[WanEvent] = []

    @staticmethod
    def reset(top: Topology, state_dir: Path) -> None:
        """No cross-traffic and every link at its declared RTT (the start of every run)."""
        from inferslice.testbed.net import wan

        wan.stop_cross_traffic(None, state_dir)
        for lk in top.links:
            wan.set_wan_delay(link_name(f"{lk.a}|{lk.b}"), None, state_dir)

    def step(self, now: float) -> None:
        from inferslice.testbed.net import wan

        while self.pending and self.pending[0][0] <= now:
            ev = self.pending.pop(0)
            _, _, key, state = ev
            name = link_name(key)
            a, b = key.split("|")
            if state.leaves_bps is not None:
                link = self.top.link_between(a, b)
                rate = link.capacity_bps if link is not None else None
                if rate is None:
                    raise ValueError(f"{name} has no physical rate in the topology: cross-traffic cannot leave it a fixed rate")
                wan.start_cross_traffic(name, max(rate - state.leaves_bps, 1e3), protocol="udp", state_dir=self.state_dir)
            if state.extra_rtt_s > 0:
                wan.set_wan_delay(name, self.top.rtt_s(a, b) + state.extra_rtt_s, self.state_dir)
            self.active.append(ev)
        for ev in [e for e in self.active if e[1] <= now]:
            self._end(ev)

    def _end(self, ev: WanEvent) -> None:
        from inferslice.testbed.net import wan

        _, _, key, state = ev
        if state.leaves_bps is not None:
            wan.stop_cross_traffic(link_name(key), self.state_dir)
        if state.extra_rtt_s > 0:
            wan.set_wan_delay(link_name(key), None, self.state_dir)
        self.active.remove(ev)

    def close(self) -> None:
        for ev in list(self.active):
            self._end(ev)


def probe_query(window_s: float) -> str:
    """Mean probe RTT per (pop, peer_pop) over the window."""
    w = f"{max(1, round(window_s))}s"
    return f"sum by (pop, peer_pop) (rate({m.POP_RTT}_sum[{w}])) / sum by (pop, peer_pop) (rate({m.POP_RTT}_count[{w}]))"


def measured_rtts(result: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for row in result:
        labels, value = row.get("metric", {}), row.get("value", [None, "nan"])[1]
        try:
            v = float(value)
        except (TypeError, ValueError):
            continue
        if v == v and "pop" in labels and "peer_pop" in labels:  # NaN: no answered probe in the window
            out[(str(labels["pop"]), str(labels["peer_pop"]))] = v
    return out


def path_excess_s(top: Topology, rtts: Mapping[tuple[str, str], float]) -> dict[str, float]:
    """Per PoP: the largest (measured - declared) over the hops of its route to the gateway (0 at the gateway)."""
    gw = top.client.gateway
    out: dict[str, float] = {}
    for pop in top.pops:
        if pop.name == gw:
            out[pop.name] = 0.0
            continue
        try:
            route = top.route(pop.name, gw)
        except KeyError:
            continue
        worst = 0.0
        for u, v in itertools.pairwise(route):
            seen = [rtts[k] for k in ((u, v), (v, u)) if k in rtts]
            if seen:
                worst = max(worst, max(seen) - top.rtt_s(u, v))
        out[pop.name] = worst
    return out
