"""Stepping only while leading: two controller replicas, one acts (Kubernetes), or one alone (a machine).

    run_while_leading(loop, elector, stop)     # elector: the Lease elector of control/actuators/kubernetes_lease.py
    loop.run_forever(stop)                     # no elector: this process is the only controller

The election itself (the Lease, its renew deadline) is the elector's; this is the loop around it: a
step only while ``tick`` says we lead, and a newly elected leader first takes over what was
recorded (``Controller.resume``: the states the other replica left in the trail, then what it left
to apply).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from inferslice.service.controller.loop import ControlLoop


class _ElectorSettings(Protocol):
    @property
    def retry_period_s(self) -> float: ...


class Elector(Protocol):
    """What the loop needs of a leader election (``LeaseElector`` has it)."""

    @property
    def settings(self) -> _ElectorSettings: ...

    def tick(self, now: float) -> bool: ...


def run_while_leading(loop: ControlLoop, elector: Elector, stop: threading.Event) -> None:
    leading = False
    while not stop.is_set():
        t0 = time.monotonic()
        if elector.tick(t0):
            if not leading:
                loop.controller.resume()
                leading = True
            loop.step()
        else:
            leading = False
        stop.wait(max(0.0, min(loop.interval_s, elector.settings.retry_period_s) - (time.monotonic() - t0)))
