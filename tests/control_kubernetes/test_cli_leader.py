"""`inferslice control --backend kubernetes --lease-namespace NS`: steps only while holding the Lease,
resumes once per term, and releases the Lease on the way out."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from inferslice.control.actuators.fencing import FencingToken, NotLeader
from inferslice.service.controller.leader import run_while_leading


def test_steps_only_while_leading_and_resumes_once_per_term() -> None:
    a1, a2 = FencingToken(0, "me"), FencingToken(2, "me")
    terms = iter([None, a1, a1, None, a2, a2])
    events: list[str] = []
    stop = threading.Event()

    class Elector:
        settings = SimpleNamespace(retry_period_s=0.0, timeout_s=0.1)
        released = False

        def token(self) -> FencingToken | None:
            try:
                return next(terms)
            except StopIteration:
                stop.set()
                return None

        def run(self, lease_stop: threading.Event) -> None:
            lease_stop.wait(10)
            Elector.released = True

    class Controller:
        last_error: str | None = None

        def resume(self) -> None:
            events.append("resume")

    class Loop:
        interval_s = 0.0
        controller = Controller()

        def step(self) -> None:
            events.append("step")
            if len(events) == 2:
                raise NotLeader("lost it mid-step")  # the step stops; the loop carries on

    run_while_leading(Loop(), Elector(), stop)  # type: ignore[arg-type]
    assert events == ["resume", "step", "step", "resume", "step", "step"]
    assert Loop.controller.last_error == "lost it mid-step"
    assert Elector.released, "the elector's loop was stopped (it releases the Lease)"
