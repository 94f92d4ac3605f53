"""The one builder of a controller: backend (actuator), audit trail and leader from typed settings.

    run = make_controller(ControllerSettings(mode=Mode.AUTO, backend="testbed"), topology)
    run = make_controller(settings, topology, source=InProcessSource(service, tiers))   # co-located with the API
    run.serve("127.0.0.1", 0); run.run_forever(stop); run.close()

``inferslice control`` (split deployments: verdicts from the diagnosis API over HTTP) and
``inferslice api --control MODE`` (co-located: verdicts in process) both build through here, as the
diagnosis loop's source is built by ``service.sources.make_source``. Backends:

- ``testbed``: the netns testbed (``TestbedActuator``), the SQLite audit trail at ``audit_path``;
- ``kubernetes``: KubeRay/Kube-OVN objects through the in-cluster ServiceAccount, the SliceAction
  objects as the trail (no volume), and, with ``lease_namespace``, a Lease elector: only its holder acts.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from inferslice.common.registry import DEFAULT_STATE_DIR
from inferslice.control.actuators.base import Actuator
from inferslice.control.settings import TierPolicy, tier_policies
from inferslice.errors import InputError
from inferslice.service.controller.audit import ActionTrail, AuditLog
from inferslice.service.controller.core import Controller, Mode, Source
from inferslice.service.controller.leader import Elector, run_while_leading
from inferslice.service.controller.loop import ControlLoop
from inferslice.service.controller.source import ApiSource
from inferslice.service.lease import LeaseElector
from inferslice.topology import Topology

Backend = Literal["testbed", "kubernetes"]


@dataclass(frozen=True)
class ControllerSettings:
    mode: Mode = Mode.DRY_RUN  # nothing is applied until an operator asks for more
    backend: Backend = "testbed"  # the system this machine runs; Kubernetes only in a cluster
    api_url: str = "http://127.0.0.1:8080"  # split deployment: the diagnosis API the verdicts come from
    audit_path: Path = Path("inferslice-control.db")  # testbed: the SQLite audit trail
    state_dir: Path = DEFAULT_STATE_DIR  # testbed: its registry (fronts, links)
    tiers: Sequence[str] = ()  # under control; the others are observed and forecast, never acted on (empty: all)
    interval_s: float | None = None  # None: the topology's scrape interval (one step per new verdict)
    lease_namespace: str | None = None  # kubernetes: act only while holding the Lease inferslice-controller there
    actions_namespace: str | None = None  # kubernetes: the SliceActions' namespace (default: the lease's, else $POD_NAMESPACE)


@dataclass
class ControllerRun:
    """A built controller with its loop, and the leader election it steps under (None: always leads)."""

    controller: Controller
    loop: ControlLoop
    elector: Elector | None
    trail: str  # where the audit trail is, for people
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def serve(self, host: str, port: int) -> int:
        return self.loop.serve(host, port)

    def run_forever(self, stop: threading.Event) -> None:
        if self.elector is not None:
            run_while_leading(self.loop, self.elector, stop)
        else:
            self.loop.run_forever(stop)

    def start(self) -> None:
        """Run in a background thread (co-located with the API) until ``close``."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self.run_forever, args=(self._stop,), name="controller", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.loop.interval_s + 10.0)
            self._thread = None
        self.loop.close()


def controlled_policies(topology: Topology, tiers: Sequence[str]) -> dict[str, TierPolicy]:
    """Every tier's policy; with ``tiers`` named, the others observed only (``controlled=False``)."""
    policies = tier_policies(topology)
    chosen = [t for t in tiers if t.strip()]
    unknown = [t for t in chosen if t not in policies]
    if unknown:
        raise InputError(f"unknown tiers {unknown}", "--tiers")
    if chosen:
        policies = {t: p if t in chosen else dataclasses.replace(p, controlled=False) for t, p in policies.items()}
    return policies


def _kubernetes(settings: ControllerSettings, topology: Topology) -> tuple[Actuator, ActionTrail, LeaseElector | None, str]:
    from kubernetes import client, config

    from inferslice.control.actuators.kubernetes import KubernetesActuator
    from inferslice.service.controller.audit_cr import SliceActionAuditLog
    from inferslice.service.controller.audit_store import SliceActionStore
    from inferslice.service.lease import KubernetesLeaseClient

    actions_ns = settings.actions_namespace or settings.lease_namespace or os.environ.get("POD_NAMESPACE")
    if not actions_ns:
        raise InputError("the SliceAction audit trail needs a namespace", "--actions-namespace")
    config.load_incluster_config()  # type: ignore[no-untyped-call]
    cfg = client.Configuration.get_default_copy()
    cfg.retries = False  # urllib3 would retry a timed-out read 3 times: a request timeout must be the whole wait
    api_client = client.ApiClient(cfg)
    identity = os.environ.get("POD_NAME") or socket.gethostname()
    elector: LeaseElector | None = None
    if settings.lease_namespace:
        elector = LeaseElector(KubernetesLeaseClient(api_client, settings.lease_namespace, "inferslice-controller"), identity)
    # With a Lease, every write of the actuator and the trail re-checks it and carries the term's fencing token.
    trail = SliceActionAuditLog(SliceActionStore(api_client, actions_ns), identity, leadership=elector)
    return KubernetesActuator(topology, api_client, leadership=elector), trail, elector, f"sliceactions in {actions_ns}"


def make_controller(
    settings: ControllerSettings,
    topology: Topology,
    source: Source | None = None,
    *,
    clock: Callable[[], float] = time.time,
    actuator: Actuator | None = None,
    audit: ActionTrail | None = None,
) -> ControllerRun:
    """The controller ``settings`` describe. ``source`` None: the diagnosis API at ``settings.api_url``;
    ``actuator``/``audit`` override the backend's (tests, the benchmark's counting actuator)."""
    if settings.backend not in ("testbed", "kubernetes"):
        raise InputError(f"unknown backend {settings.backend!r} (testbed or kubernetes)", "--backend")
    policies = controlled_policies(topology, settings.tiers)
    elector: LeaseElector | None = None
    trail = str(settings.audit_path)
    if settings.backend == "kubernetes" and (actuator is None or audit is None):
        k_actuator, k_audit, elector, trail = _kubernetes(settings, topology)
        actuator, audit = actuator or k_actuator, audit or k_audit
    if actuator is None:
        from inferslice.control.actuators.testbed import TestbedActuator

        actuator = TestbedActuator(settings.state_dir)
    if audit is None:
        audit = AuditLog(settings.audit_path)
    ctl = Controller(
        topology, policies, actuator, audit, source or ApiSource(settings.api_url, list(policies)),
        clock=clock,
        mode=settings.mode,
        leadership=elector,
    )
    loop = ControlLoop(ctl, settings.interval_s or topology.timing.scrape_interval_s)
    return ControllerRun(ctl, loop, elector, trail)
