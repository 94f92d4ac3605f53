from __future__ import annotations

import math
from pathlib import Path

import pytest

from inferslice.common.registry import (
    FrontEntry,
    LinkEntry,
    Registry,
    ReplicaEntry,
    read_registry,
    write_registry,
    write_replicas_fragment,
)
from inferslice.errors import InputError, ParseError, SourceUnavailable
from inferslice.snapshot import Reference, snapshot_from_dict


def test_snapshot_parses_known_keys_and_ignores_unknown() -> None:
    snap = snapshot_from_dict({"slice": "x", "id": 7, "ttft_p99_s": 5, "link_cap_bps": 5e5, "colour": "red"})
    assert snap.id == "7" and snap.ttft_p99_s == 5.0 and snap.link_cap_bps == 5e5
    assert snap.tpot_p50_s is None


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({}, "slice"),
        ({"slice": ""}, "slice"),
        ({"slice": "a", "ttft_p99_s": "slow"}, "ttft_p99_s"),
        ({"slice": "a", "ttft_p99_s": True}, "ttft_p99_s"),
        ({"slice": "a", "gpu_share": 1.5}, "gpu_share"),
        ({"slice": "a", "link_rx_bps": -1}, "link_rx_bps"),
        ({"slice": "a", "link_rx_bps": math.inf}, "link_rx_bps"),
        ({"slice": "a", "id": [1]}, "id"),
    ],
)
def test_snapshot_rejects_bad_fields_by_name(doc: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        snapshot_from_dict(doc)
    assert err.value.field == field


def test_reference_fills_only_missing_ref_fields() -> None:
    snap = snapshot_from_dict({"slice": "a", "ref_tpot_p50_s": 0.03})
    filled = snap.with_reference(Reference(tpot_p50_s=0.025, ttft_p50_s=0.1))
    assert filled.ref_tpot_p50_s == 0.03 and filled.ref_ttft_p50_s == 0.1
    assert snap.reference() is not None and snapshot_from_dict({"slice": "a"}).reference() is None


def test_registry_round_trip_with_fragments(tmp_path: Path) -> None:
    reg = Registry(
        topology_path="t.yaml",
        state_dir=str(tmp_path),
        fronts=(FrontEntry(tier="free", url="http://10.201.0.1:8000", admin_url="http://10.201.0.1:8000"),),
        links=(LinkEntry(name="client-edge", kind="access", netns="isl-bristol", ifname="isl-e0", pop="bristol", tier="free"),),
    )
    write_registry(reg, tmp_path)
    rep = ReplicaEntry(id="free-0", tier="free", pop="bristol", gpu=0, gpu_fraction=0.5, gpu_share=1.0, url="http://x")
    write_replicas_fragment(tmp_path, "free", [rep])
    back = read_registry(tmp_path)
    assert back.fronts == reg.fronts and back.links == reg.links
    assert back.replicas_of("free") == [rep] and back.front("free") is not None


def test_registry_missing_and_corrupt(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable):
        read_registry(tmp_path)
    (tmp_path / "registry.json").write_text("{not json")
    with pytest.raises(ParseError):
        read_registry(tmp_path)


def test_client_netns_is_the_client_end_of_the_access_link(tmp_path: Path) -> None:
    edge = LinkEntry(name="client-edge", kind="access", netns="isl-client", ifname="isl-edge", pop="bristol", tier="free",
                     direction="transmit")
    reg = Registry(topology_path="t.yaml", state_dir=str(tmp_path), links=(edge,))
    assert reg.client_netns() == "isl-client"
    with pytest.raises(ParseError):
        Registry(topology_path="t.yaml", state_dir=str(tmp_path)).client_netns()


def test_terminate_kills_what_ignores_sigterm() -> None:
    import subprocess
    import sys

    from inferslice.common.processes import terminate

    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    terminate(proc, timeout_s=0.5)
    assert proc.returncode is not None and proc.returncode < 0
    terminate(proc)  # already gone: a no-op
