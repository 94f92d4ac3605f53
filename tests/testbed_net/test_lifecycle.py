"""Lifecycle of the real kernel testbed: up/down, failure halfway, crash cleanup (root only)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from inferslice.errors import ConfigError
from inferslice.testbed.net import ServiceSpec, ServiceStartError, down, status, up
from inferslice.testbed.net.plan import NetPlan
from inferslice.topology import Topology

from .conftest import PREFIX, needs_root
from .test_network import leftovers, standins

pytestmark = [needs_root, pytest.mark.root]


def test_up_with_services_then_down_leaves_nothing(state_dir: Path) -> None:
    reg = up(None, state_dir, services=True, prefix=PREFIX, service_factory=standins, ready_timeout_s=20)
    assert {f.tier for f in reg.fronts} == {"free", "standard", "premium"}
    assert all(f.pid and f.netns == f"{PREFIX}bristol" for f in reg.fronts)
    pids = list(reg.pids.values())
    assert len(pids) == 1 + 3 + 3  # delay line, engine hosts, fronts
    removed = down(state_dir, prefix=PREFIX)
    assert any(r.startswith("netns ") for r in removed)
    assert leftovers(pids) == []
    assert down(state_dir, prefix=PREFIX) == []  # idempotent


def test_failed_service_tears_everything_down(state_dir: Path) -> None:
    def broken(top: Topology, path: str, sd: Path, plan: NetPlan) -> list[ServiceSpec]:
        return [
            ServiceSpec(
                "front-free", plan.gateway_netns, (sys.executable, "-c", "raise SystemExit('boom')"), "http://10.201.0.1:8000/admin/state"
            )
        ]

    with pytest.raises(ServiceStartError, match=r"front-free\.log"):
        up(None, state_dir, services=True, prefix=PREFIX, service_factory=broken, ready_timeout_s=10)
    assert leftovers([]) == []


def test_invalid_topology_creates_nothing(state_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((Path(__file__).parents[2] / "testbed" / "topology.yaml").read_text().replace("rtt_ms: 12", "rtt_ms: -1"))
    with pytest.raises(ConfigError) as err:
        up(str(bad), state_dir, services=False, prefix=PREFIX)
    assert err.value.field == "links[1].rtt_ms"
    assert leftovers([]) == []


def test_crash_cleanup_without_state(state_dir: Path) -> None:
    reg = up(None, state_dir, services=True, prefix=PREFIX, service_factory=standins, ready_timeout_s=20)
    pids = list(reg.pids.values())
    os.kill(reg.pids["front-free"], signal.SIGKILL)  # one service crashed ...
    for f in (state_dir / "net-state.json", state_dir / "registry.json", *(state_dir / "pids").glob("*.pid")):
        f.unlink()  # ... and the state is gone
    json.dumps(status(state_dir, prefix=PREFIX))  # status copes with missing state
    removed = down(state_dir, prefix=PREFIX)
    assert any(r.startswith("process ") for r in removed)
    assert leftovers(pids) == []


def test_up_refuses_a_leftover_management_link_and_down_removes_it(state_dir: Path) -> None:
    # What a testbed whose gateway namespace a stray process still holds leaves after `ip netns del`:
    # no namespace name, but the root end of its management veth (CI met it as netlink's bare EEXIST).
    from pyroute2 import IPRoute

    from inferslice.testbed.net.kernel import NetworkBuildError

    host_if = f"{PREFIX}mgmt"
    with IPRoute() as ipr:
        ipr.link("add", ifname=host_if, kind="veth", peer={"ifname": f"{PREFIX}mgmu"})
    with pytest.raises(NetworkBuildError, match=rf"interface {host_if} already exists.*inferslice testbed down"):
        up(None, state_dir, services=False, prefix=PREFIX)
    # refused before building anything, and the leftover is not its to remove
    assert sorted(leftovers([])) == sorted([f"link {host_if}", f"link {PREFIX}mgmu"])
    assert any(r.startswith(f"interface {PREFIX}mgm") for r in down(state_dir, prefix=PREFIX))  # either end takes both
    assert leftovers([]) == []
