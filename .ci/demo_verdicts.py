"""Check the demo's phase verdicts: ``python3 .ci/demo_verdicts.py demo-out/demo-summary.json``.

Exit 0 when the demo wrote one verdict per phase and tier and every one is met, and every remedy the
story expects of a phase was applied in it and one of its moves judged effective (none ineffective);
1 otherwise, with each verdict not met on stderr. Exit 3 (VOID) when every miss lies in a phase the
host starved: the demo measured the hypervisor's CPU steal over each phase (``common/hostcpu.py``)
above its ``host_steal_starved_share``; there every process froze and woke together, so the miss tests
the host, not inferslice, and CI runs the demo once more. Standard library only (CI runs it with the
system python3).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

VOID = 3


def starved(summary: dict[str, Any]) -> dict[str, float]:
    """The phases the host starved, with their steal share (none where the demo measured none)."""
    bar = summary.get("host_steal_starved_share")
    if not isinstance(bar, (int, float)):
        return {}
    out = {}
    for phase in summary.get("phases", []):
        share = phase.get("host_steal_share")
        if isinstance(share, (int, float)) and share >= bar:
            out[str(phase.get("name"))] = float(share)
    return out


def problems(summary: dict[str, Any]) -> tuple[list[str], str]:
    """(what is wrong, one-line summary) of a demo summary. Each problem starts with
    ``NOT MET <phase> / ...`` (the approve segment's, ``NOT MET approve segment / ...``)."""
    verdicts: list[dict[str, Any]] = summary.get("verdicts", [])
    phases: list[dict[str, Any]] = summary.get("phases", [])
    tiers = {v.get("tier") for v in verdicts}
    if not phases or not verdicts or len(verdicts) != len(phases) * len(tiers):
        got = f"got {len(verdicts)} for {len(phases)} phases x {len(tiers)} tiers"
        return [f"expected one verdict per phase and tier, {got}"], "no full report"
    bad = [
        f"NOT MET {v.get('phase')} / {v.get('tier')}: expected {v.get('expected')}, "
        f"diagnosed {v.get('observed')} in {v.get('windows')} windows"
        for v in verdicts
        if v.get("ok") is not True
    ]
    met = len(verdicts) - len(bad)
    for phase in phases:  # the remedies the story needs the controller to have applied in a phase (a move of Premium's replicas)
        for tier, kind in (phase.get("expect_actions") or {}).items():
            done = [
                a
                for a in summary.get("actions", [])
                if a.get("tier") == tier
                and a.get("kind") == kind
                and a.get("state") == "applied"
                and float(phase.get("start_s", 0.0)) <= float(a.get("decided_s") or 0.0) <= float(phase.get("end_s", 0.0))
            ]
            outcomes = sorted({str(a.get("outcome")) for a in done})
            if not done:
                bad.append(f"NOT MET {phase.get('name')} / {tier}: no {kind} applied by the controller in the phase")
            elif "ineffective" in outcomes:  # measured under it, and its cause still bound as before
                bad.append(f"NOT MET {phase.get('name')} / {tier}: its {kind} was judged ineffective")
            elif "effective" not in outcomes:
                # The story claims the tier turns healthy *by* the move: a move left unjudged (no window
                # measured under it), superseded before its window, or insufficient (a step the next one
                # followed, control/outcomes.py) with no later step judged effective is not that evidence.
                # Every demo run on record (six, 2026-12-05/06) judged both of Premium's moves effective.
                bad.append(f"NOT MET {phase.get('name')} / {tier}: no {kind} judged effective (outcomes: {', '.join(outcomes)})")
    approval = summary.get("approval")
    if approval is not None and approval.get("state") != "applied":
        bad.append(f"NOT MET approve segment / {approval.get('tier')}: its action is {approval.get('state')}, not applied")
    return bad, f"{met}/{len(verdicts)} phase verdicts met, {summary.get('alerts', 0)} alerts delivered to the API"


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else Path("demo-out/demo-summary.json")
    if not path.is_file():
        print(f"CI: the demo wrote no {path}", file=sys.stderr)
        return 1
    try:
        summary = json.loads(path.read_text())
    except ValueError as err:
        print(f"CI: {path} is not JSON: {err}", file=sys.stderr)
        return 1
    bad, line = problems(summary)
    for item in bad:
        print(f"  {item}", file=sys.stderr)
    print(f"CI: {line}")
    if not bad:
        return 0
    hungry = starved(summary)
    segment = next((str(p.get("name")) for p in summary.get("phases", []) if p.get("control") == "approve"), "")
    phases = {_phase_of(item, segment) for item in bad}
    if hungry and phases <= set(hungry):
        said = ", ".join(f"{name} {share:.0%}" for name, share in hungry.items())
        print(f"CI: VOID: every miss lies in a phase the host starved (CPU steal {said})", file=sys.stderr)
        return VOID
    return 1


def _phase_of(item: str, segment: str) -> str:
    """The phase a problem line names (the approve segment is the approval phase's)."""
    name = item.removeprefix("NOT MET ").split(" / ", 1)[0]
    return segment if name == "approve segment" and segment else name


if __name__ == "__main__":
    sys.exit(main(sys.argv))
