"""Fast paths in the vocabulary behave like the slow ones they replace."""

from __future__ import annotations

import dataclasses

from inferslice.snapshot import SliceSnapshot, with_configured_slos
from inferslice.topology import load_topology


def test_snapshot_to_dict_is_asdict() -> None:
    values = {f.name: (f"x{i}" if f.name in ("slice", "id") else float(i)) for i, f in enumerate(dataclasses.fields(SliceSnapshot))}
    full = SliceSnapshot(**values)
    assert full.to_dict(drop_none=False) == dataclasses.asdict(full)
    sparse = SliceSnapshot(slice="free", ttft_p99_s=0.3)
    assert sparse.to_dict() == {k: v for k, v in dataclasses.asdict(sparse).items() if v is not None}


def test_configured_slos_keep_the_same_object_only_when_nothing_changes() -> None:
    snap = SliceSnapshot(slice="free", slo_ttft_p99_s=0.5)
    assert with_configured_slos(snap, 0.5, None) is snap
    changed = with_configured_slos(snap, 0.3, 0.1)
    assert (changed.slo_ttft_p99_s, changed.slo_tpot_p99_s) == (0.3, 0.1) and snap.slo_ttft_p99_s == 0.5


def test_the_tier_index_follows_a_copy_with_other_tiers() -> None:
    topo = load_topology()
    first = topo.tiers[0]
    assert topo.tier(first.name) is first
    renamed = first.model_copy(update={"name": "other"})
    copy = topo.model_copy(update={"tiers": [renamed, *topo.tiers[1:]]})
    assert copy.tier("other") is renamed
    try:
        copy.tier(first.name)
    except KeyError:
        pass
    else:
        raise AssertionError("the copy still found the old tier through the original's index")
    assert topo.tier(first.name) is first


def test_overlapping_tier_subnets_are_found_in_sorted_order() -> None:
    import pytest

    from inferslice.errors import ConfigError
    from inferslice.topology import topology_from_dict

    def topo(subnets: list[str]) -> None:
        tiers = [
            {"name": f"t{i}", "subnet": net, "vni": 100 + i, "gpu_quota": 0.5, "cpu_quota": 1, "replicas_max": 1,
             "placement": [f"a/gpu{i}"]}
            for i, net in enumerate(subnets)
        ]
        topology_from_dict({"client": {"gateway": "a"}, "pops": [{"name": "a", "gpus": 4}], "tiers": tiers})

    topo(["10.0.2.0/24", "10.0.0.0/24", "10.0.1.0/24"])  # disjoint, in any order
    for overlapping in (["10.0.0.0/16", "10.1.0.0/24", "10.0.7.0/24"], ["10.0.1.0/24", "10.0.1.0/25"], ["10.0.1.128/25", "10.0.0.0/23"]):
        with pytest.raises(ConfigError, match="overlapping subnets"):
            topo(overlapping)
