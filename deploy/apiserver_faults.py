"""Faults for the kube-apiserver stand-in (``deploy/apiserver.py``): hold or delay a request before it
is processed (it arrives late) or its answer after (the answer arrives late), drop it (a partition),
or answer it with an error (an overloaded server). The HA tests build slow and partitioned servers
from these."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .apiserver_status import ApiError, Call


@dataclass
class Fault:
    """What happens to the requests ``match`` selects (``match(call)``; the call's code is 0 then).

    ``hold_before``/``hold_after``: block until the event is set, before the request is processed
    (it arrives late) or after (it was processed; the answer arrives late); ``delay_before_s`` /
    ``delay_after_s``: the same for a fixed time; ``drop``: never processed, the connection closes
    without an answer once the hold (if any) ends (a partition); ``answer``: not processed, answered
    with this error instead (a 429 or 5xx of an overloaded server). ``times``: how many requests it
    applies to (None: all); ``seen`` counts them."""

    match: Callable[[Call], bool]
    hold_before: threading.Event | None = None
    hold_after: threading.Event | None = None
    delay_before_s: float = 0.0
    delay_after_s: float = 0.0
    drop: bool = False
    answer: ApiError | None = None
    times: int | None = None
    seen: int = 0
    entered: threading.Event = field(default_factory=threading.Event)  # set when a matching request arrived


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        with self._lock:
            if fault in self._faults:
                self._faults.remove(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def pick(self, call: Call) -> Fault | None:
        with self._lock:
            for f in self._faults:
                if (f.times is None or f.seen < f.times) and f.match(call):
                    f.seen += 1
                    f.entered.set()
                    return f
        return None


def wait(event: threading.Event | None, delay_s: float) -> None:
    if event is not None:
        event.wait(timeout=300)  # never hang a test run forever
    if delay_s:
        time.sleep(delay_s)


class Drop(Exception):
    """The request is lost: close the connection without an answer."""
