"""The testbed actuator against a stand-in of the tier front's documented admin API (httpx mock
transport, spoken through the front's one client) and a recorded cap call: idempotent by target,
typed errors. The real cap path (``lifecycle.set_cap`` on HTB) runs in the demo and the testbed tests."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from inferslice.actions import Action, ActionKind
from inferslice.common.registry import FrontEntry, LinkEntry, Registry, read_registry, write_registry
from inferslice.control.actuators.base import Actuator, ApplyStatus, PermanentActuatorError, RetryableActuatorError
from inferslice.control.actuators.testbed import TestbedActuator
from inferslice.errors import NotPrivilegedError


class FakeFront:
    """GET /admin/state, PUT /admin/autoscale, PUT /admin/replicas as testbed/serving/front.py documents them."""

    def __init__(self, tier: str, replicas_max: int) -> None:
        self.tier, self.max = tier, replicas_max
        self.mode, self.target = "autoscale", 1
        self.puts: list[tuple[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/admin/state":
            reps = [
                {"id": f"{self.tier}-{k}", "slot": k, "pop": "bristol", "gpu": 1, "state": "ready", "gpu_share": 1.0}
                for k in range(self.target)
            ]
            return httpx.Response(200, json={"tier": self.tier, "mode": self.mode, "target": self.target, "replicas": reps})
        body = json.loads(request.content)
        self.puts.append((request.url.path, body))
        if request.url.path == "/admin/autoscale":
            self.mode = "autoscale" if body["enabled"] else "fixed"
            return httpx.Response(200, json={})
        if request.url.path == "/admin/replicas":
            n = body["replicas"]
            if not 0 <= n <= self.max:
                return httpx.Response(422, json={"error": f"replicas must be an integer within [0, {self.max}]"})
            if self.mode == "autoscale":
                return httpx.Response(409, json={"error": "autoscaling is on"})
            self.target = n
            return httpx.Response(200, json={})
        return httpx.Response(404)


def _setup(tmp_path: Path) -> tuple[TestbedActuator, FakeFront, list[tuple[str, float, Path]]]:
    reg = Registry(
        topology_path="t.yaml",
        state_dir=str(tmp_path),
        fronts=(FrontEntry("premium", "http://10.0.0.1:8000", "http://front.test"),),
        links=(
            LinkEntry(
                "client-edge", "access", "ns-gw", "edge0", "bristol", tier="premium", direction="receive", htb_classid="1:13", cap_bps=5e5
            ),
        ),
    )
    write_registry(reg, tmp_path)
    front = FakeFront("premium", 6)
    calls: list[tuple[str, float, Path]] = []

    def set_cap(tier: str, cap_bps: float, state_dir: Path) -> None:
        calls.append((tier, cap_bps, state_dir))
        # lifecycle.set_cap changes the HTB class and rewrites the registry's cap: do the latter
        r = read_registry(state_dir)
        links = tuple(dataclasses.replace(lk, cap_bps=cap_bps) for lk in r.links)
        write_registry(dataclasses.replace(r, links=links), state_dir)

    act = TestbedActuator(tmp_path, set_cap=set_cap, client=httpx.Client(transport=httpx.MockTransport(front)))
    return act, front, calls


def test_replicas_through_the_admin_api_idempotently(tmp_path: Path) -> None:
    act, front, _ = _setup(tmp_path)
    assert isinstance(act, Actuator)
    a = Action(ActionKind.SET_REPLICAS, "premium", 4, id="premium-1-set_replicas")
    assert act.apply(a).status is ApplyStatus.APPLIED
    assert front.puts == [("/admin/autoscale", {"enabled": False}), ("/admin/replicas", {"replicas": 4})]
    assert act.apply(a).status is ApplyStatus.ALREADY_APPLIED and len(front.puts) == 2
    obs = act.observe()["premium"]
    assert (obs.replicas_target, obs.replicas_ready, obs.cap_bps, obs.externally_controlled) == (4, 4, 5e5, True)


def test_cap_through_the_testbed_library_idempotently(tmp_path: Path) -> None:
    act, _, calls = _setup(tmp_path)
    a = Action(ActionKind.SET_CAP, "premium", 1.2e6, id="premium-2-set_cap")
    assert act.apply(a).status is ApplyStatus.APPLIED
    assert calls == [("premium", 1200000, tmp_path)]
    assert act.apply(a).status is ApplyStatus.ALREADY_APPLIED and len(calls) == 1


def test_cap_errors_are_typed(tmp_path: Path) -> None:
    act, _, _ = _setup(tmp_path)

    def not_root(tier: str, cap_bps: float, state_dir: Path) -> None:
        raise NotPrivilegedError("changing a cap needs root")

    def busy(tier: str, cap_bps: float, state_dir: Path) -> None:
        raise OSError(16, "Device or resource busy")

    act.set_cap = not_root
    with pytest.raises(PermanentActuatorError, match="root"):
        act.apply(Action(ActionKind.SET_CAP, "premium", 2e6, id="c-1"))
    act.set_cap = busy
    with pytest.raises(RetryableActuatorError):
        act.apply(Action(ActionKind.SET_CAP, "premium", 2e6, id="c-1"))


def test_an_unanswering_or_conflicting_front_is_retryable(tmp_path: Path) -> None:
    act, _, _ = _setup(tmp_path)

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    act.client = httpx.Client(transport=httpx.MockTransport(refused))
    with pytest.raises(RetryableActuatorError):
        act.observe()
    act.client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(409, json={"error": "already moving"})))
    with pytest.raises(RetryableActuatorError):
        act.apply(Action(ActionKind.RELOCATE, "premium", "london/gpu1", id="m-1", replica="premium-0"))


def test_errors_are_typed(tmp_path: Path) -> None:
    act, _, _ = _setup(tmp_path)
    with pytest.raises(PermanentActuatorError):
        act.apply(Action(ActionKind.SET_REPLICAS, "premium", 9, id="x-1"))  # 422 from the front
    with pytest.raises(PermanentActuatorError):
        act.apply(Action(ActionKind.SET_GPU_SHARE, "premium", 0.5, id="x-2"))  # a kind the testbed does not apply
    with pytest.raises(PermanentActuatorError):
        act.apply(Action(ActionKind.SET_REPLICAS, "nope", 1, id="x-3"))
    down = TestbedActuator(tmp_path / "missing")
    with pytest.raises(RetryableActuatorError):
        down.observe()


def test_refuses_a_testbed_rebuilt_under_it(tmp_path: Path) -> None:
    act, _, _ = _setup(tmp_path)
    act.observe()
    reg = read_registry(tmp_path)
    write_registry(dataclasses.replace(reg, fronts=tuple(dataclasses.replace(f, pid=4242) for f in reg.fronts)), tmp_path)
    with pytest.raises(PermanentActuatorError):
        act.apply(Action(ActionKind.SET_REPLICAS, "premium", 2, id="x-9"))


class MovingFront(FakeFront):
    """FakeFront plus POST /admin/moves and GET /admin/moves/{id} as testbed/serving/admin.py documents
    them; a move finishes after ``steps`` reads (the successor's cold start)."""

    def __init__(self, steps: int) -> None:
        super().__init__("premium", 6)
        self.moves: dict[str, dict[str, Any]] = {}
        self.steps = steps
        self.posts = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path.startswith("/admin/moves/"):
            m = self.moves.get(path.removeprefix("/admin/moves/"))
            if m is None:
                return httpx.Response(404, json={"error": "no such move"})
            m["reads"] += 1
            m["phase"] = "done" if m["reads"] > self.steps else "starting"
            return httpx.Response(200, json=m)
        if request.method == "POST" and path == "/admin/moves":
            body = json.loads(request.content)
            self.posts += 1
            if body["replica"] != "premium-0":
                return httpx.Response(404, json={"error": f"no replica {body['replica']!r}"})
            self.moves[body["id"]] = {**body, "dest": f"{body['pop']}/gpu{body['gpu']}", "phase": "starting", "reads": 0}
            return httpx.Response(202, json=self.moves[body["id"]])
        return super().__call__(request)


def test_relocation_is_a_front_move_named_by_the_action_id(tmp_path: Path) -> None:
    act, _, _ = _setup(tmp_path)
    front = MovingFront(steps=1)
    act.client = httpx.Client(transport=httpx.MockTransport(front))
    assert ActionKind.RELOCATE in act.kinds  # so the controller lets the policy relocate on the testbed
    a = Action(ActionKind.RELOCATE, "premium", "london/gpu1", id="rel-1", replica="premium-0")
    assert act.apply(a).status is ApplyStatus.IN_PROGRESS
    assert front.moves["rel-1"]["pop"] == "london" and front.moves["rel-1"]["gpu"] == 1
    assert act.apply(a).status is ApplyStatus.IN_PROGRESS  # the successor still cold-starts
    assert act.apply(a).status is ApplyStatus.APPLIED
    assert act.apply(a).status is ApplyStatus.APPLIED  # a repeat after a crash changes nothing
    assert front.posts == 1
    assert act.apply(Action(ActionKind.RELOCATE, "premium", "dublin", id="rel-2", replica="premium-0")).status is ApplyStatus.IN_PROGRESS
    assert front.moves["rel-2"]["gpu"] == 0  # a bare PoP means its first GPU
    with pytest.raises(PermanentActuatorError):
        act.apply(Action(ActionKind.RELOCATE, "premium", "london/gpu1", id="rel-3", replica="premium-9"))
    with pytest.raises(PermanentActuatorError):
        act.apply(Action(ActionKind.RELOCATE, "premium", "london/disk1", id="rel-4", replica="premium-0"))
    with pytest.raises(PermanentActuatorError):
        act.apply(Action(ActionKind.RELOCATE, "premium", "london", id="rel-5"))
