"""kill -9 of the controller in the middle of its work loses and duplicates nothing.

A real child process (crash_child.py) runs the controller in auto mode against a file-backed
backend whose apply takes a moment; it is killed with SIGKILL at random points several times and
restarted each time, then allowed to finish. Its audit log and backend are compared with a run
that was never killed. The second test does the same for a relocation (two moves in one batch):
killed at each phase of a make-before-break move, it leaves no second replica and no leaked slot."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from inferslice.topology import load_topology

from .fake_backend import FileActuator

CHILD = Path(__file__).with_name("crash_child.py")

TICKS = 30


def _run(d: Path, kill_after_s: float | None = None, scenario: str = "queue") -> int | None:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.Popen([sys.executable, str(CHILD), str(d), str(TICKS), scenario], env=env, stderr=subprocess.PIPE)
    if kill_after_s is None:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        return proc.returncode
    time.sleep(kill_after_s)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    if proc.stderr is not None:
        proc.stderr.close()
    return proc.returncode


def _run_kill_mid_apply(d: Path) -> int | None:
    """Start the child and SIGKILL it 30 ms into its next apply (the fake backend logs each begun apply)."""
    log = d / "begun.log"
    seen = len(log.read_text().split()) if log.exists() else 0
    proc = subprocess.Popen([sys.executable, str(CHILD), str(d), str(TICKS)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if log.exists() and len(log.read_text().split()) > seen:
            time.sleep(0.03)  # inside the 150 ms apply
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait(timeout=30)
    return proc.returncode


def _rows(d: Path) -> list[dict[str, object]]:
    db = sqlite3.connect(d / "audit.db")
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute("SELECT id, tier, kind, state, detail, body FROM control_actions ORDER BY decided_s, rowid")]
    db.close()
    return rows


def test_sigkill_mid_action_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    ref, crashed = tmp_path / "ref", tmp_path / "crashed"
    ref.mkdir()
    crashed.mkdir()
    _run(ref)
    rng = random.Random(7)
    kills = 0
    for _ in range(3):  # kills inside an apply
        kills += _run_kill_mid_apply(crashed) == -signal.SIGKILL
    for _ in range(3):  # and at random points (between steps, inside a decision, inside a commit)
        kills += _run(crashed, kill_after_s=rng.uniform(0.5, 1.5)) == -signal.SIGKILL
    _run(crashed)
    assert kills >= 3, "the child was never killed mid-run: the test proved nothing"
    begun = (crashed / "begun.log").read_text().split()
    assert len(begun) > len(set(begun)), "no kill landed inside an apply (no action was begun twice)"

    ref_backend = json.loads((ref / "backend.json").read_text())
    got_backend = json.loads((crashed / "backend.json").read_text())
    rows = _rows(crashed)
    # nothing left half-done, every decided action reached a final state
    assert {r["state"] for r in rows} <= {"applied", "refused"}
    applied = {str(r["id"]) for r in rows if r["state"] == "applied"}
    effects = [e["id"] for e in got_backend["effects"]]
    # no change applied twice, no change without its audit record
    assert len(effects) == len(set(effects))
    assert set(effects) <= applied
    # every action the log says took effect by that call did take effect
    assert {str(r["id"]) for r in rows if r["state"] == "applied" and r["detail"] == "applied"} <= set(effects)
    # and the crashed run ends where the uninterrupted one does, through the same changes
    assert got_backend["tiers"] == ref_backend["tiers"]
    assert [(e["tier"], e.get("replicas"), e.get("cap_bps")) for e in got_backend["effects"]] == [
        (e["tier"], e.get("replicas"), e.get("cap_bps")) for e in ref_backend["effects"]
    ]
    assert ref_backend["tiers"]["premium"]["replicas"] == 6  # the scripted queue drove Premium to its ceiling


def _moves(d: Path) -> dict[str, dict[str, object]]:
    path = d / "backend.json"
    try:
        return dict(json.loads(path.read_text()).get("moves", {}))
    except (OSError, ValueError):
        return {}


def _kill_at_phase(d: Path, phase: str) -> int | None:
    """Start the child and SIGKILL it once a move reaches ``phase`` (its record is written atomically:
    the kill lands while the move is in that phase, before the next call advances it)."""
    seen = {mid for mid, m in _moves(d).items() if m["phase"] == phase}
    proc = subprocess.Popen([sys.executable, str(CHILD), str(d), str(TICKS), "move"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if any(m["phase"] == phase and mid not in seen for mid, m in _moves(d).items()):
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait(timeout=30)
    return proc.returncode


def test_a_move_killed_at_each_phase_leaves_no_second_replica_and_no_leaked_slot(tmp_path: Path) -> None:
    """Premium's two replicas move off a co-tenant, make-before-break, in one batch; the controller is
    killed with SIGKILL while the moves are starting (successor cold-starting), serving (successor
    beside the old replica) and done (old drained, the audit not yet told), and restarted each time."""
    ref, crashed = tmp_path / "ref", tmp_path / "crashed"
    ref.mkdir()
    crashed.mkdir()
    _run(ref, scenario="move")
    kills = [_kill_at_phase(crashed, phase) == -signal.SIGKILL for phase in ("starting", "serving", "done")]
    _run(crashed, scenario="move")
    assert all(kills), f"a phase was never reached before the child finished: {kills}"

    got, want = json.loads((crashed / "backend.json").read_text()), json.loads((ref / "backend.json").read_text())
    moves = got["moves"]
    assert len(moves) == 2 and all(m["phase"] == "done" for m in moves.values())  # nothing left half-moved
    # no second replica: each slot index runs once, at its destination; no successor survives its move
    premium = got["tiers"]["premium"]
    assert premium["replicas"] == 2 and sorted(premium["moved"]) == ["0", "1"]
    assert all(
        r.state == "ready" and "relocate" not in r.id
        for r in FileActuator(crashed / "backend.json", load_topology()).observe()["premium"].replicas
    )
    # no leaked slot: every slot holds at most one GPU, and the ones the moves left are free of Premium
    use: dict[str, float] = {}
    for k in range(premium["replicas"]):
        use[premium["moved"][str(k)]] = use.get(premium["moved"][str(k)], 0.0) + 0.5
    assert all(v <= 1.0 for v in use.values()) and "bristol/gpu1" not in use
    # each move applied once, recorded once, as the uninterrupted run did
    effects = [e["id"] for e in got["effects"]]
    assert len(effects) == len(set(effects)) and got["effects"] == want["effects"] and got["tiers"] == want["tiers"]
    rows = _rows(crashed)
    assert [r["state"] for r in rows if r["kind"] == "relocate"] == ["applied", "applied"]
    assert {str(r["id"]) for r in rows if r["kind"] == "relocate"} == set(moves)
