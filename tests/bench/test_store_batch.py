"""Store.batch(): one transaction around a round's writes; each write stays atomic inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferslice.diagnosis import Diagnosis, Regime
from inferslice.service.store import Store
from inferslice.snapshot import SliceSnapshot


def _snap(name: str, t: float) -> SliceSnapshot:
    return SliceSnapshot(slice=name, window_end_s=t)


def test_batched_writes_land_together_and_a_failed_batch_leaves_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    with store.batch():
        for i in range(5):
            store.record(_snap(f"s{i}", 1.0), Diagnosis(f"s{i}", Regime.HEALTHY), 1.0)
    assert sorted(Store(tmp_path / "s.db").slices()) == [f"s{i}" for i in range(5)]

    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.batch():
        store.record(_snap("late", 2.0), Diagnosis("late", Regime.HEALTHY), 2.0)
        raise Boom
    assert "late" not in store.slices()
    store.record(_snap("after", 3.0), Diagnosis("after", Regime.HEALTHY), 3.0)  # the store still works
    assert "after" in store.slices()


def test_the_diagnosis_loop_ingests_a_round_in_one_batch() -> None:
    from inferslice.service.loop import DiagnosisLoop

    class Source:
        def poll(self, now_s: float) -> None:
            return None

        def snapshots(self, now_s: float, window_s: float | None = None) -> list[SliceSnapshot]:
            return [_snap(f"s{i}", now_s) for i in range(3)]

    depth: list[int] = []
    store = Store()

    def ingest(snap: SliceSnapshot) -> None:
        depth.append(store._batch_depth)

    DiagnosisLoop(Source(), ingest, batch=store.batch).run_once(10.0)  # type: ignore[arg-type]
    assert depth == [1, 1, 1]
