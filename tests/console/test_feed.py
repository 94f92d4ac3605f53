"""``ConsoleFeed`` over a real store holding the recorded session: incremental reads, restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inferslice.service.app import create_app
from inferslice.service.console.feed import ConsoleFeed
from inferslice.service.store import Store
from inferslice.snapshot import snapshot_from_dict

from .session import Clock, load_session, session_topology, windows


class CountingStore:
    """The store, counting the rows each history read returns (what a poll costs)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.rows = 0

    def diagnoses(self, slice_name: str, since_s: float | None = None, until_s: float | None = None, limit: int = 1000) -> Any:
        out = self.store.diagnoses(slice_name, since_s, until_s, limit)
        self.rows += len(out)
        return out

    def snapshots(self, slice_name: str, since_s: float | None = None, until_s: float | None = None, limit: int = 1000) -> Any:
        out = self.store.snapshots(slice_name, since_s, until_s, limit)
        self.rows += len(out)
        return out

    def alerts(self, slice_name: str | None = None, limit: int = 1000) -> Any:
        return self.store.alerts(slice_name, limit)


def _loaded(db: Path) -> tuple[Store, Clock, float]:
    topology = session_topology()
    clock = Clock(0.0)
    store = Store(db)
    last = load_session(create_app(store, topology, clock=clock).state.service, store)
    clock.t = last + 1.0
    return store, clock, last


def test_a_poll_reads_only_the_windows_the_feed_lacks(tmp_path: Path) -> None:
    store, clock, last = _loaded(tmp_path / "s.db")
    counting = CountingStore(store)
    feed = ConsoleFeed(counting, session_topology(), clock, actions=lambda n: store.actions(limit=n))
    first = feed.state()
    per_tier = {t["name"]: len(t["history"]) for t in first["tiers"]}
    assert per_tier == {"free": 61, "standard": 61, "premium": 61}  # 120 s of windows every 2 s
    counting.rows = 0
    again = feed.state(since_s=last)
    assert counting.rows == 0  # nothing new: no history row read
    assert all(t["history"] == [] for t in again["tiers"])

    template = next(w for w in reversed(windows()) if w["slice"] == "free")  # one more window for free, 2 s later
    clock.t = last + 2.5
    create_app(store, session_topology(), clock=clock).state.service.ingest(snapshot_from_dict({**template, "window_end_s": last + 2.0}))
    counting.rows = 0
    update = feed.state(since_s=last)
    free = next(t for t in update["tiers"] if t["name"] == "free")
    assert [p["ts"] for p in free["history"]] == [last + 2.0]
    assert counting.rows == 2  # that window's diagnosis and snapshot
    # the burn rate kept incrementally equals one counted afresh over all the windows held
    points = next(t for t in first["tiers"] if t["name"] == "free")["history"] + free["history"]
    judged = [p for p in points if p["slo"] in ("met", "at_risk", "breached")]
    expected = sum(p["slo"] == "breached" for p in judged) / len(judged) / (1 - 0.95)
    assert free["burn_rate"] is not None and abs(free["burn_rate"] - expected) < 1e-9
    store.close()


def test_a_restarted_feed_rebuilds_the_same_history_from_sqlite(tmp_path: Path) -> None:
    store, clock, _ = _loaded(tmp_path / "s.db")
    before = ConsoleFeed(store, session_topology(), clock, actions=lambda n: store.actions(limit=n)).state()
    store.close()
    reopened = Store(tmp_path / "s.db")
    after = ConsoleFeed(reopened, session_topology(), clock, actions=lambda n: reopened.actions(limit=n)).state()
    assert [t["history"] for t in after["tiers"]] == [t["history"] for t in before["tiers"]]
    assert [t["diagnosis"] for t in after["tiers"]] == [t["diagnosis"] for t in before["tiers"]]
    reopened.close()
