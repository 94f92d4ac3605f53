"""The controller's room: everything that runs ``decide`` + ``guard`` against a live system.

``inferslice.control`` keeps the pure policies (``decide``, the guardrails, the forecast, placement)
and the actuators; this package is the I/O shell around them, one module per part:

    core.py      Controller: one step = drive recorded actions, observe, decide, guard, record, apply
    source.py    where verdicts come from: in process from a DiagnosisService (co-located with the
                 API: objects, no JSON), or the diagnosis API over HTTP (split deployments)
    audit.py     the crash-safe SQLite audit trail (one machine)
    audit_cr.py  the SliceAction audit trail (Kubernetes), on audit_store.py's SliceAction objects
    leader.py    stepping only while leading (on Kubernetes the Lease elector of service/lease.py,
                 shared with the sharded diagnosis loop; always elsewhere)
    loop.py      ControlLoop: a step every interval, /metrics and /healthz
    api.py       the API's control routes: actions, events, approve/reject, the mode
    process.py   the controller as a Platform child (``inferslice control``)
    build.py     the one builder: backend (actuator), trail and leader from ControllerSettings,
                 as ``service.sources.make_source`` builds the diagnosis loop's source
"""

from inferslice.service.controller.core import Controller, ControllerMetrics, Mode, Source, TickReport, Verdict

__all__ = ["Controller", "ControllerMetrics", "Mode", "Source", "TickReport", "Verdict"]
