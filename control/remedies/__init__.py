"""The remedies ``decide`` chooses among, one small pure function per cause:

    queue_remedy(step)              replicas for the arrivals and the attributed backlog (queue.py)
    network_remedy(step, decided)   the cap to demand x headroom, else a move toward headroom (network.py)
    compute_remedy(step, decided)   move the most contended replica, else scale out by the lost share (compute.py)
    prescale_remedy(step)           replicas for the forecast, one cold start ahead (prescale.py)
    reclaim_remedy(...)             give back a replica or half a cap's excess after a healthy period (reclaim.py)

Each reads a ``Step`` (the window, the tier's state and policy) and returns a ``Proposal`` (actions,
a replica wish, events); ``decide`` orders them by the attribution and merges their proposals.
"""

from inferslice.control.remedies.base import FORECAST, RECLAIM, ROLLBACK, Proposal, ReplicaWish, Step
from inferslice.control.remedies.compute import compute_remedy
from inferslice.control.remedies.network import network_remedy
from inferslice.control.remedies.prescale import prescale_remedy
from inferslice.control.remedies.queue import queue_remedy
from inferslice.control.remedies.reclaim import reclaim_remedy, share_hold

__all__ = [
    "FORECAST",
    "RECLAIM",
    "ROLLBACK",
    "Proposal",
    "ReplicaWish",
    "Step",
    "compute_remedy",
    "network_remedy",
    "prescale_remedy",
    "queue_remedy",
    "reclaim_remedy",
    "share_hold",
]
