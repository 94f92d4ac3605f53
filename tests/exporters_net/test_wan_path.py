"""Which WAN links each slice's replicas reach the gateway over (``exporters/network/path.py``)."""

from __future__ import annotations

from inferslice import metric_names as mn
from inferslice.common.registry import LinkEntry, Registry, ReplicaEntry
from inferslice.exporters.network.path import WanPathSource, path_rows
from inferslice.topology import default_topology_path, load_topology

TOP = load_topology(None)  # gateway bristol; bristol-london 9 ms, london-dublin 12, bristol-dublin 18


def _wan(pop: str, peer: str) -> LinkEntry:
    return LinkEntry(f"wan-{pop}-{peer}", "wan", f"isl-{pop}", "isl-w0", pop, peer_pop=peer)


def _rep(rid: str, tier: str, pop: str, state: str = "ready") -> ReplicaEntry:
    return ReplicaEntry(rid, tier, pop, 0, 0.5, 1.0, "http://x", state=state)


REG = Registry(
    topology_path=str(default_topology_path()),
    state_dir="/tmp",
    replicas=(
        _rep("free-0", "free", "bristol"),
        _rep("premium-0", "premium", "bristol"),
        _rep("premium-2", "premium", "london"),
        _rep("premium-3", "premium", "london"),
        _rep("premium-4", "premium", "dublin", "starting"),
        _rep("standard-1", "standard", "london", "stopping"),
    ),
    links=tuple(_wan(a, b) for a, b in [("bristol", "london"), ("london", "bristol"), ("bristol", "dublin"), ("dublin", "bristol")]),
)


def test_each_serving_replica_off_the_gateway_puts_its_route_on_the_path() -> None:
    rows = dict(path_rows(REG, TOP))
    assert rows == {
        ("premium", "bristol", "london", "wan-bristol-london"): 0.009,
        ("premium", "bristol", "dublin", "wan-bristol-dublin"): 0.018,
    }  # free sits at the gateway; standard's only remote replica is stopping; two london replicas, one row


def test_a_route_over_two_links_names_both_at_their_gateway_side_ends() -> None:
    top = TOP.model_copy(update={"links": [TOP.links[0], TOP.links[1]]})  # no bristol-dublin: dublin goes via london
    reg = Registry(REG.topology_path, "/tmp", replicas=(_rep("premium-4", "premium", "dublin"),),
                   links=(*REG.links, _wan("london", "dublin"), _wan("dublin", "london")))  # fmt: skip
    assert dict(path_rows(reg, top)) == {
        ("premium", "london", "dublin", "wan-london-dublin"): 0.012,
        ("premium", "bristol", "london", "wan-bristol-london"): 0.009,
    }


def test_the_source_exports_the_gauge() -> None:
    fam = next(iter(WanPathSource("unused", TOP, reader=lambda _: REG).collect()))
    assert fam.name == mn.SLICE_WAN_PATH_RTT
    got = {(s.labels["slice"], s.labels["link"]): s.value for s in fam.samples}
    assert got == {("premium", "wan-bristol-london"): 0.009, ("premium", "wan-bristol-dublin"): 0.018}
