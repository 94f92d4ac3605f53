"""Stepping only while leading: two controller replicas, one acts (Kubernetes), or one alone (a machine).

    run_while_leading(loop, elector, stop)     # elector: the Lease elector of service/lease.py
    loop.run_forever(stop)                     # no elector: this process is the only controller

The election itself (the Lease, its renew deadline) is the elector's; this is the loop around it: a
step only while the elector holds a term's token, and a newly elected leader first takes over what was
recorded (``Controller.resume``: the states the other replica left in the trail, then what it left
to apply).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from inferslice.errors import InferSliceError
from inferslice.service.controller.loop import ControlLoop


class _ElectorSettings(Protocol):
    @property
    def retry_period_s(self) -> float: ...

    @property
    def timeout_s(self) -> float: ...


class Elector(Protocol):
    """What the loop needs of a leader election (``LeaseElector`` has it): a renewing ``run`` for its
    own thread and the current term's fencing token (None: not leading)."""

    @property
    def settings(self) -> _ElectorSettings: ...

    def run(self, stop: threading.Event) -> None: ...

    def token(self) -> object | None: ...


def run_while_leading(loop: ControlLoop, elector: Elector, stop: threading.Event) -> None:
    """Step only while holding the Lease. The elector renews in its own thread (a slow step never
    delays a renew); each step starts from ``elector.token()`` and every write inside it re-checks
    (the controller, actuator and trail hold the elector). A new term first takes over what was
    recorded (``resume``). On exit the Lease is released, so the other replica takes over at its next round."""
    lease_stop = threading.Event()
    renewer = threading.Thread(target=elector.run, args=(lease_stop,), name="lease-elector", daemon=True)
    renewer.start()
    term: object | None = None
    try:
        while not stop.is_set():
            t0 = time.monotonic()
            token = elector.token()
            if token is None:
                term = None
            else:
                try:
                    if token != term:
                        loop.controller.resume()
                        term = token
                    loop.step()
                except InferSliceError as err:  # NotLeader mid-step, a backend failure: the next step decides again
                    loop.controller.last_error = str(err)
            stop.wait(max(0.0, min(loop.interval_s, elector.settings.retry_period_s) - (time.monotonic() - t0)))
    finally:
        lease_stop.set()
        renewer.join(timeout=elector.settings.timeout_s * 2 + 1)
