"""Fencing: what every actuation carries so that a deposed leader's late write is refused.

A leadership term is a ``FencingToken`` (the Lease's ``leaseTransitions``, incremented on every change
of holder, and the holder). The elector (``service/lease.py``, the Lease that cannot split)
hands it out; the Kubernetes actuator writes it into every object it changes and refuses to act once it
sees a newer one (``control/actuators/kubernetes.py``). These types are the actuator's contract with
whoever elects; the election itself is the controller's room's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from inferslice.errors import InferSliceError


@dataclass(frozen=True, order=True)
class FencingToken:
    """One leadership term: ``transitions`` grows with every change of holder, so a higher token is a
    later term. Written ``"<transitions>/<holder>"`` into what the term changes."""

    transitions: int
    holder: str

    def __str__(self) -> str:
        return f"{self.transitions}/{self.holder}"

    @classmethod
    def parse(cls, text: str) -> FencingToken:
        transitions, sep, holder = str(text).partition("/")
        if not sep or not transitions.isdigit() or not holder:
            raise ValueError(f"not a fencing token: {text!r} (want '<leaseTransitions>/<holder>')")
        return cls(int(transitions), holder)


class NotLeader(InferSliceError):
    """This replica does not lead now: nothing may be written. Neither retryable nor permanent for the
    action at hand: the action stays as recorded, for whoever leads."""


class Deposed(NotLeader):
    """A newer term (a higher fencing token) was seen on an object: this replica lost the Lease and
    must stop at once."""


class Leadership(Protocol):
    """What an actuator needs from the elector: the token to write, re-checked before every write."""

    def check(self) -> FencingToken: ...

    def step_down(self, reason: str) -> None: ...
