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
