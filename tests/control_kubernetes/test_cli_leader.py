"""`inferslice control --backend kubernetes --lease-namespace NS`: steps only while holding the Lease (service/controller/leader.py)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from inferslice.service.controller.leader import run_while_leading


def test_steps_only_while_leading_and_resumes_on_each_takeover() -> None:
    leads = iter([False, True, True, False, True])
    events: list[str] = []
    stop = threading.Event()

    class Elector:
        settings = SimpleNamespace(retry_period_s=0.0)

        def tick(self, now: float) -> bool:
            try:
                return next(leads)
            except StopIteration:
                stop.set()
                return False

    class Loop:
        interval_s = 0.0
        controller = SimpleNamespace(resume=lambda: events.append("resume"))

        def step(self) -> None:
            events.append("step")

    run_while_leading(Loop(), Elector(), stop)  # type: ignore[arg-type]
    assert events == ["resume", "step", "step", "resume", "step"]
