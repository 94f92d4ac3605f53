"""The store's group commit: units queued together share a transaction, each stays atomic on its own,
order is kept, a failing unit fails only its own future; the service's in-memory state follows it."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from inferslice.diagnosis import Diagnosis, Regime
from inferslice.errors import SourceUnavailable
from inferslice.service.diagnosis import DiagnosisService
from inferslice.service.store import Store
from inferslice.snapshot import Reference, SliceSnapshot
from inferslice.topology import load_topology


def _snap(slice_name: str, ts: float) -> SliceSnapshot:
    return SliceSnapshot(slice=slice_name, window_end_s=ts, ttft_p99_s=0.2, tpot_p50_s=0.026)


def _diag(slice_name: str) -> Diagnosis:
    return Diagnosis(slice=slice_name, regime=Regime.HEALTHY, confidence=1.0)


def test_units_queued_while_a_commit_runs_share_the_next_one(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    commits = []
    store._db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    gate, inside = threading.Event(), threading.Event()
    try:
        def hold() -> None:  # keeps the writer inside its transaction
            inside.set()
            gate.wait(5)

        first = store.submit(hold)
        assert inside.wait(5)
        rest = [store.submit(lambda i=i: store.record(_snap("free", float(i)), _diag("free"), float(i))) for i in range(50)]
        gate.set()
        first.result(timeout=10)
        for f in rest:
            f.result(timeout=10)
        assert len(store.snapshots("free")) == 50
        assert len(commits) == 2  # the blocked one, then all fifty together
        assert [s["ts"] for s in store.snapshots("free")] == [float(i) for i in range(50)]  # in submission order
    finally:
        store.close()


def test_a_failing_unit_rolls_back_alone_and_fails_only_its_future(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    gate = threading.Event()
    try:
        blocker = store.submit(lambda: gate.wait(5))
        ok = store.submit(lambda: store.record(_snap("free", 1.0), _diag("free"), 1.0))

        def half_then_fail() -> None:
            store.record(_snap("standard", 2.0), _diag("standard"), 2.0)
            raise SourceUnavailable("the unit's own failure")

        bad = store.submit(half_then_fail)
        after = store.submit(lambda: store.record(_snap("premium", 3.0), _diag("premium"), 3.0))
        gate.set()
        blocker.result(timeout=10)
        ok.result(timeout=10)
        after.result(timeout=10)
        with pytest.raises(SourceUnavailable, match="own failure"):
            bad.result(timeout=10)
        assert [len(store.snapshots(s)) for s in ("free", "standard", "premium")] == [1, 0, 1]
    finally:
        store.close()


def test_a_failed_commit_fails_every_unit_of_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    other = sqlite3.connect(tmp_path / "s.db", isolation_level=None, timeout=0)
    try:
        store._db.execute("PRAGMA busy_timeout=50")
        other.execute("BEGIN IMMEDIATE")  # another writer holds the database: BEGIN IMMEDIATE cannot start
        futures = [store.submit(lambda i=i: store.record(_snap("free", float(i)), _diag("free"), float(i))) for i in range(3)]
        for f in futures:
            with pytest.raises(SourceUnavailable):
                f.result(timeout=10)
        other.execute("ROLLBACK")
        store.submit(lambda: store.record(_snap("free", 9.0), _diag("free"), 9.0)).result(timeout=10)  # the writer lives on
        assert [s["ts"] for s in store.snapshots("free")] == [9.0]
    finally:
        other.close()
        store.close()


def test_close_commits_what_was_submitted(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    futures = [store.submit(lambda i=i: store.record(_snap("free", float(i)), _diag("free"), float(i))) for i in range(20)]
    store.close()
    assert all(f.done() and f.exception() is None for f in futures)
    again = Store(tmp_path / "s.db")
    try:
        assert len(again.snapshots("free")) == 20
    finally:
        again.close()


def test_deferred_ingest_sees_its_predecessor_before_either_committed(tmp_path: Path) -> None:
    """Episode state and references advance in memory in ingest order, committed or not."""
    store = Store(tmp_path / "s.db")
    service = DiagnosisService(store, load_topology(), clock=lambda: 1_800_000_000.0)
    gate = threading.Event()
    try:
        service.reference_for("free")  # the slice's state is read from the store once, before the writer is held up
        service._episode_state("free")
        blocker = store.submit(lambda: gate.wait(5))
        queue_limited = {"ttft_p99_s": 5.0, "tpot_p50_s": 0.026, "requests_waiting": 6.0, "link_rx_bps": 1e5, "link_cap_bps": 1e9}
        futures = []
        for k in range(6):
            snap = SliceSnapshot(slice="free", window_end_s=1_800_000_000.0 + 2 * k, ref_tpot_p50_s=0.025, ref_ttft_p50_s=0.05,
                                 **queue_limited)  # fmt: skip
            _result, durable = service.ingest_deferred(snap)
            futures.append(durable)
        assert not any(f.done() for f in futures)  # nothing committed yet ...
        assert service._states["free"].open  # ... and the episode machine already opened on the windows before
        gate.set()
        blocker.result(timeout=10)
        for f in futures:
            f.result(timeout=10)
        assert len(store.snapshots("free")) == 6
        assert store.episode_state("free") == service._states["free"]
        assert [e["regime"] for e in store.episodes("free")] == ["queue_limited"]
        configured = service.set_reference("free", Reference(tpot_p50_s=0.03))
        assert store.reference("free") == configured and service.reference_for("free") == configured
    finally:
        store.close()


def test_a_steady_slice_costs_its_window_rows_only(tmp_path: Path) -> None:
    """Healthy windows: the learned reference reaches the store every REFERENCE_WRITE_S (the service
    holds the current one), an unchanged episode machine is not rewritten, the slice is registered once."""
    from inferslice.service.diagnosis import REFERENCE_WRITE_S

    store = Store(tmp_path / "s.db")
    service = DiagnosisService(store, load_topology(), clock=lambda: 1_800_000_000.0)
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    healthy = {"ttft_p99_s": 0.12, "ttft_p50_s": 0.05, "tpot_p50_s": 0.026, "tpot_p99_s": 0.03, "output_tokens_per_s": 300.0,
               "link_rx_bps": 1e5, "link_cap_bps": 1e9, "requests_waiting": 0.0, "gpu_share": 1.0}  # fmt: skip
    try:
        windows = int(3 * REFERENCE_WRITE_S / 2)
        for k in range(windows):
            with store.batch():
                service.ingest(SliceSnapshot(slice="premium", window_end_s=1_800_000_000.0 + 2 * k, **healthy))
        ref_writes = [s for s in statements if s.startswith("INSERT INTO refs")]
        state_writes = [s for s in statements if s.startswith("INSERT INTO episode_state")]
        touches = [s for s in statements if s.startswith("INSERT OR IGNORE INTO slices")]
        assert 2 <= len(ref_writes) <= 4  # every 30 s of windows, not every window
        assert len(state_writes) <= 2  # the machine's first state, then nothing changes
        assert len(touches) == 1
        assert len(store.snapshots("premium")) == windows  # every window is still stored
        current, stored = service.current_reference("premium"), store.reference("premium")
        assert current is not None and stored is not None and 0 <= current.samples - stored.samples <= REFERENCE_WRITE_S / 2
    finally:
        store.close()
