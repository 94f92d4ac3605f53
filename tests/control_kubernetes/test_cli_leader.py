"""`inferslice control --backend kubernetes --lease-namespace NS`: steps only while holding the Lease."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from inferslice.cli.control import _run_as_leader


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

    _run_as_leader(Loop(), Elector(), stop)
    assert events == ["resume", "step", "step", "resume", "step"]
