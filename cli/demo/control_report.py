"""The demo report's control section: each action the controller took, its cause and its measured
effect (the tier's regime and P99 TTFT before the action and once it should have helped)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _at(history: Sequence[Mapping[str, Any]], t: float) -> Mapping[str, Any] | None:
    """The diagnosis whose window ended last at or before ``t``."""
    best = None
    for d in history:
        end = d.get("window_end_s")
        if end is not None and float(end) <= t and (best is None or float(end) > float(best["window_end_s"])):
            best = d
    return best


def _first_after(history: Sequence[Mapping[str, Any]], t: float) -> Mapping[str, Any] | None:
    """The first diagnosis whose window ended at or after ``t``."""
    later = [d for d in history if d.get("window_end_s") is not None and float(d["window_end_s"]) >= t]
    return min(later, key=lambda d: float(d["window_end_s"])) if later else None


def _knob(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The knob an action turns: the tier's cap, its replica count, its placement. Every move of a tier
    is one knob here: the "after" columns measure the whole tier, so the next move's effect shows in them."""
    a = row.get("action", {})
    return (row.get("tier"), a.get("kind"))


def _next_on_knob(actions: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> float | None:
    """When the next action on the same tier and knob took effect: a window ending after it measures
    that action too (a second raise on the same evidence would lend the first its effect). Another knob
    of the same tier (a scale-out during a cap raise) does not cut it: those are judged each on its own."""
    applied = row.get("applied_s")
    if applied is None:
        return None
    later = [
        float(o["applied_s"])
        for o in actions
        if o is not row and o.get("applied_s") is not None and float(o["applied_s"]) > float(applied) and _knob(o) == _knob(row)
    ]
    return min(later) if later else None


def _ttft_p99(d: Mapping[str, Any] | None) -> str:
    if d is None:
        return "—"
    att = d.get("attribution") or {}
    share = att.get("ttft_p99") if isinstance(att, dict) else None
    if isinstance(share, dict) and share.get("observed_s") is not None:
        return f"{float(share['observed_s']):.2f} s"
    for e in d.get("evidence") or []:
        if e.get("signal") in ("ttft_p99_s", "ttft_p99") and e.get("value") is not None:
            return f"{float(e['value']):.2f} s"
    return "—"


def _tpot_p50(d: Mapping[str, Any] | None) -> str:
    """The window's median TPOT (a co-tenant slows decode: where a move's effect shows)."""
    att = (d or {}).get("attribution") or {}
    share = att.get("tpot_p50") if isinstance(att, dict) else None
    if isinstance(share, dict) and share.get("observed_s") is not None:
        return f"{1000 * float(share['observed_s']):.0f} ms"
    return "—"


def phase_of(t: float, timeline: Sequence[tuple[Any, float, float]]) -> str:
    for phase, start, end in timeline:
        if start <= t <= end:
            return str(phase.name)
    for phase, start, _ in timeline:  # a mode switch lands just before its phase's clock starts
        if 0.0 <= start - t <= 2.0:
            return str(phase.name)
    return "-"


def _shown(kind: Any, value: Any) -> str:
    if kind == "set_cap" and isinstance(value, (int, float)):
        return f"{float(value) / 1e6:.2f} Mbit/s"
    return str(value)


def fold(actions: Sequence[Mapping[str, Any]], timeline: Sequence[tuple[Any, float, float]]) -> list[dict[str, Any]]:
    """Identical proposals within a phase (same mode, kind, tier, value, cause and state: a dry-run
    controller proposes the same remedy every window) become one row with a count and first/last time,
    in the order of the first; every applied, pending or approved action keeps its own row."""
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in sorted(actions, key=lambda r: float(r.get("decided_s") or 0.0)):
        a = row.get("action", {})
        decided = float(row.get("decided_s") or 0.0)
        phase = phase_of(decided, timeline)
        key: tuple[Any, ...] = (phase, row.get("mode"), a.get("kind"), row.get("tier"), str(a.get("value")), a.get("regime"))
        key += (row.get("state"), a.get("replica"))
        folded = seen.get(key)
        if folded is not None and row.get("state") in ("dry_run", "rejected", "failed"):
            folded["count"] += 1
            folded["last_s"] = decided
            continue
        seen[key] = {"key": key, "row": row, "count": 1, "first_s": decided, "last_s": decided}
        rows.append(seen[key])
    return rows


def control_section(
    actions: Sequence[Mapping[str, Any]],
    history: Mapping[str, Sequence[Mapping[str, Any]]],
    timeline: Sequence[tuple[Any, float, float]],
    events: Sequence[Mapping[str, Any]] = (),
    window_s: float = 8.0,
) -> list[str]:
    """``window_s``: the diagnosis window; the "after" column reads the first window measured wholly under the action and
    before the next action on the same tier and knob took effect (``_next_on_knob``)."""
    refused = [a for a in actions if a.get("state") == "refused"]
    actions = [a for a in actions if a.get("state") != "refused"]
    t0 = timeline[0][1] if timeline else 0.0
    lines = [
        "",
        "## Control actions (the controller's own decisions)",
        "",
        "Times are seconds into the story. Repeated proposals are one row (`n`: how many, `when`: first-last).",
        "The outcome is the controller's verdict on a window measured under the action (effective, insufficient,",
        "ineffective, superseded, unjudged); before -> after compares the window before it with the first after it should have helped,",
        "measured before any later action on the same tier and knob took effect (— where there is none).",
        "",
        "| phase | mode | action | tier | value | cause | state | n | when | approved by | regime before -> after"
        " | P99 TTFT before -> after | P50 TPOT before -> after | outcome |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for folded in fold(actions, timeline):
        row = folded["row"]
        a = row.get("action", {})
        tier = str(row.get("tier"))
        decided = float(row.get("decided_s") or 0.0)
        applied = row.get("applied_s")
        hist = history.get(tier, [])
        before = _at(hist, decided)
        after = None
        if applied is not None:
            delay = float(a.get("expected_by_s") or decided) - decided
            after = _first_after(hist, float(applied) + max(delay, window_s))
            cut = _next_on_knob(actions, row)
            if after is not None and cut is not None and float(after["window_end_s"]) > cut:
                after = None  # no window measured under this action alone: "—", not the next one's effect
        first, last = folded["first_s"] - t0, folded["last_s"] - t0
        when = f"{first:.0f} s" if folded["count"] == 1 else f"{first:.0f}-{last:.0f} s"
        what = a.get("kind") if not a.get("replica") else f"{a.get('kind')} {a.get('replica')}"
        value = _shown(a.get("kind"), a.get("value"))
        lines.append(
            f"| {phase_of(decided, timeline)} | {row.get('mode')} | {what} | {tier} | {value} | {a.get('regime')}"
            f" | {row.get('state')} | {folded['count']} | {when} |"
            f" {row.get('approved_by') or '-'} | {before['regime'] if before else '—'} -> {after['regime'] if after else '—'} |"
            f" {_ttft_p99(before)} -> {_ttft_p99(after)} | {_tpot_p50(before)} -> {_tpot_p50(after)} | {row.get('outcome') or '-'} |"
        )
    if not actions:
        lines.append("| - | - | (no actions) | | | | | | | | | | | |")
    lines += ["", f"{len(refused)} further proposals were refused by the guardrails (cooldowns, rate, duplicate ids); see the audit log."]
    notable = [e for e in events if e.get("kind") in ("at_ceiling", "ineffective", "insufficient", "budget_exhausted", "mode")]
    if notable:
        lines += ["", "Controller events:"]
        lines += [f"- {phase_of(float(e['at_s']), timeline)}: {e['kind']} ({e['tier']}): {e['message']}" for e in notable]
    return lines
