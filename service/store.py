"""``Store``: the API's SQLite persistence (snapshots, diagnoses, references, episodes, alerts, actions).

stdlib ``sqlite3``, one connection guarded by a lock (FastAPI runs sync routes on a thread pool),
WAL for file databases so readers never block the collector's writes. Every body is stored as JSON
next to the columns queries filter on, so the schema does not chase the vocabulary's fields.

Group commit (``submit``): a unit of writes handed to the store's writer thread runs in the next
transaction that thread opens, beside every other unit queued meanwhile, each in its own savepoint;
its future resolves once that transaction committed (or fails with the unit's own error, which rolls
back that unit alone). ``POST /v1/snapshots`` answers after its future resolves: nothing it
acknowledged is lost when the process dies, while a burst of requests shares one commit instead of
paying three each. (WAL with ``synchronous=NORMAL``: a commit survives a crash of the process, not
necessarily a power cut, whose window is the last checkpoint's.)
"""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from inferslice.actions import Action
from inferslice.bottleneck import EpisodeEvent, EpisodeState, EventKind, state_from_dict
from inferslice.common import fastjson
from inferslice.diagnosis import Diagnosis
from inferslice.errors import InferSliceError, SourceUnavailable
from inferslice.snapshot import Reference, SliceSnapshot, snapshot_from_dict

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS slices (slice TEXT PRIMARY KEY, first_seen_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS snapshots (
    id INTEGER PRIMARY KEY, slice TEXT NOT NULL, ts REAL NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS snapshots_slice_ts ON snapshots (slice, ts);
CREATE TABLE IF NOT EXISTS diagnoses (
    id INTEGER PRIMARY KEY, slice TEXT NOT NULL, ts REAL NOT NULL, regime TEXT NOT NULL,
    confidence REAL NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS diagnoses_slice_ts ON diagnoses (slice, ts);
CREATE TABLE IF NOT EXISTS refs (slice TEXT PRIMARY KEY, source TEXT NOT NULL, updated_s REAL NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episode_state (slice TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    id INTEGER PRIMARY KEY, slice TEXT NOT NULL, regime TEXT NOT NULL, start_s REAL NOT NULL,
    end_s REAL, peak_confidence REAL NOT NULL, windows INTEGER NOT NULL, opened_at_s REAL NOT NULL,
    closed_at_s REAL);
CREATE INDEX IF NOT EXISTS episodes_slice ON episodes (slice, start_s);
CREATE TABLE IF NOT EXISTS alerts (
    id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL, starts_at TEXT NOT NULL, ends_at TEXT,
    starts_at_s REAL, ends_at_s REAL, status TEXT NOT NULL, alertname TEXT, slice TEXT,
    labels TEXT NOT NULL, annotations TEXT NOT NULL, generator_url TEXT, receiver TEXT,
    received_s REAL NOT NULL, UNIQUE (fingerprint, starts_at));
CREATE INDEX IF NOT EXISTS alerts_slice ON alerts (slice, received_s);
CREATE TABLE IF NOT EXISTS actions (
    id INTEGER PRIMARY KEY, slice TEXT NOT NULL, ts REAL NOT NULL, kind TEXT NOT NULL,
    outcome TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS actions_slice_ts ON actions (slice, ts);
"""


def _dumps(value: Any) -> str:
    return fastjson.dumps(value)  # compact and key-sorted; two rows a slice a round: on the loop's hot path


class Store:
    """SQLite-backed history. ``path=":memory:"`` keeps everything in process (tests, ``diagnose``)."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._batch_depth = 0  # > 0 inside batch(): writes become savepoints of its transaction
        self._unit_open = False  # inside atomic(): its savepoint (or transaction) covers the writes inside, which add none
        self._known: set[str] = set()  # slices already in the slices table (committed or in this transaction)
        self._units: queue.SimpleQueue[tuple[Callable[[], None], Future[None]] | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._writer_lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
            self._db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except sqlite3.Error as err:
            raise SourceUnavailable(f"cannot open database {self.path}: {err}") from err

    # -- plumbing ----------------------------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction around many writes (a diagnosis round's 1,000 ingests): one commit instead of
        two or three per slice. Each write inside keeps its own atomicity (a savepoint)."""
        with self._lock:
            if self._batch_depth:
                self._batch_depth += 1
                try:
                    yield
                finally:
                    self._batch_depth -= 1
                return
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as err:
                raise SourceUnavailable(f"database {self.path}: {err}") from err
            self._batch_depth = 1
            try:
                yield
            except BaseException:
                self._batch_depth = 0
                self._known.clear()  # a rolled-back touch: read the slices table again
                self._db.execute("ROLLBACK")
                raise
            self._batch_depth = 0
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as err:
                raise SourceUnavailable(f"database {self.path}: {err}") from err

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._unit_open:
                yield self._db  # inside an atomic unit: its savepoint already makes these writes one
                return
            if self._batch_depth:
                try:
                    self._db.execute("SAVEPOINT w")
                    try:
                        yield self._db
                    except BaseException:
                        self._known.clear()
                        self._db.execute("ROLLBACK TO w")
                        self._db.execute("RELEASE w")
                        raise
                    self._db.execute("RELEASE w")
                except sqlite3.Error as err:
                    raise SourceUnavailable(f"database {self.path}: {err}") from err
                return
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._known.clear()
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as err:
                raise SourceUnavailable(f"database {self.path}: {err}") from err

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Several write calls as one: a transaction, or a savepoint inside ``batch``/a submitted unit."""
        with self._lock:
            if self._unit_open:
                yield
                return
            with self._tx() if self._batch_depth else self.batch():
                self._unit_open = True
                try:
                    yield
                finally:
                    self._unit_open = False

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self._db.execute(sql, params).fetchall())
            except sqlite3.Error as err:
                raise SourceUnavailable(f"database {self.path}: {err}") from err

    def ping(self) -> bool:
        """True when the database answers a query (``/readyz``)."""
        try:
            self._query("SELECT 1")
        except SourceUnavailable:
            return False
        return True

    def close(self) -> None:
        """Commit what was submitted, stop the writer, close the database."""
        with self._writer_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            self._units.put(None)
            writer.join(timeout=30)
        with self._lock:
            self._db.close()

    # -- group commit ------------------------------------------------------------------------
    def submit(self, unit: Callable[[], None]) -> Future[None]:
        """Run ``unit`` (calls of this store's write methods) in the writer thread's next transaction.

        The future resolves when that transaction committed; it fails with the unit's exception (the
        unit's writes rolled back, the others' kept) or with ``SourceUnavailable`` if the commit failed."""
        done: Future[None] = Future()
        with self._writer_lock:
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, name="store-writer", daemon=True)
                self._writer.start()
            self._units.put((unit, done))
        return done

    def _write_loop(self) -> None:
        stop = False
        while not stop:
            first = self._units.get()
            if first is None:
                return
            units = [first]
            while True:  # everything queued meanwhile joins this transaction
                try:
                    more = self._units.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                units.append(more)
            self._commit_units(units)

    def _commit_units(self, units: list[tuple[Callable[[], None], Future[None]]]) -> None:
        errors: dict[int, BaseException] = {}
        try:
            with self.batch():
                for i, (unit, _done) in enumerate(units):
                    self._db.execute("SAVEPOINT unit")
                    try:
                        unit()
                    except (InferSliceError, sqlite3.Error) as err:  # this unit's failure is its future's, not the batch's
                        self._known.clear()
                        self._db.execute("ROLLBACK TO unit")
                        errors[i] = err
                    self._db.execute("RELEASE unit")
        except (SourceUnavailable, sqlite3.Error) as err:
            failure = err if isinstance(err, SourceUnavailable) else SourceUnavailable(f"database {self.path}: {err}")
            for _unit, done in units:
                done.set_exception(failure)
            return
        except BaseException as err:  # a bug in a unit: nobody may wait forever on its future
            for _unit, done in units:
                done.set_exception(err)
            raise
        for i, (_unit, done) in enumerate(units):
            if i in errors:
                done.set_exception(errors[i])
            else:
                done.set_result(None)

    def _touch(self, db: sqlite3.Connection, slice_name: str, ts: float) -> None:
        if slice_name not in self._known:  # once per slice, not once per window
            db.execute("INSERT OR IGNORE INTO slices (slice, first_seen_s) VALUES (?, ?)", (slice_name, ts))
            self._known.add(slice_name)

    # -- slices, snapshots, diagnoses --------------------------------------------------------
    def slices(self) -> list[str]:
        return [r[0] for r in self._query("SELECT slice FROM slices ORDER BY slice")]

    def has_slice(self, slice_name: str) -> bool:
        return bool(self._query("SELECT 1 FROM slices WHERE slice = ?", (slice_name,)))

    def record(self, snapshot: SliceSnapshot, diagnosis: Diagnosis, ts: float) -> None:
        """Store one window: its snapshot and its diagnosis, atomically."""
        with self._tx() as db:
            self._touch(db, snapshot.slice, ts)
            db.execute("INSERT INTO snapshots (slice, ts, body) VALUES (?, ?, ?)", (snapshot.slice, ts, _dumps(snapshot.to_dict())))
            db.execute(
                "INSERT INTO diagnoses (slice, ts, regime, confidence, body) VALUES (?, ?, ?, ?, ?)",
                (diagnosis.slice, ts, diagnosis.regime.value, diagnosis.confidence, _dumps({"ts": ts, **diagnosis.to_dict()})),
            )

    def latest_snapshot(self, slice_name: str) -> SliceSnapshot | None:
        rows = self._query("SELECT body FROM snapshots WHERE slice = ? ORDER BY ts DESC, id DESC LIMIT 1", (slice_name,))
        return snapshot_from_dict(json.loads(rows[0][0])) if rows else None

    def snapshots(
        self, slice_name: str, since_s: float | None = None, until_s: float | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Stored windows of one slice as dicts with their ``ts``, oldest first, within [since_s, until_s]."""
        return [{"ts": ts, **json.loads(body)} for ts, body in self._newest("snapshots", slice_name, since_s, until_s, limit)]

    def latest_diagnosis(self, slice_name: str) -> dict[str, Any] | None:
        rows = self._query("SELECT body FROM diagnoses WHERE slice = ? ORDER BY ts DESC, id DESC LIMIT 1", (slice_name,))
        return dict(json.loads(rows[0][0])) if rows else None

    def latest_diagnoses(self) -> dict[str, dict[str, Any]]:
        """The newest diagnosis of every slice (``/metrics``)."""
        rows = self._query(
            "SELECT d.slice, d.body FROM diagnoses d JOIN "
            "(SELECT slice, MAX(id) AS id FROM diagnoses GROUP BY slice) m ON d.id = m.id ORDER BY d.slice"
        )
        return {r[0]: dict(json.loads(r[1])) for r in rows}

    def diagnoses(
        self, slice_name: str, since_s: float | None = None, until_s: float | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """History of one slice, oldest first, within [since_s, until_s]."""
        return [dict(json.loads(body)) for _, body in self._newest("diagnoses", slice_name, since_s, until_s, limit)]

    def _newest(
        self, table: str, slice_name: str, since_s: float | None, until_s: float | None, limit: int
    ) -> list[tuple[Any, ...]]:
        """(ts, body) of the newest ``limit`` rows of ``table`` in [since_s, until_s], returned oldest first."""
        assert table in ("snapshots", "diagnoses")  # a literal of ours, never input: safe to format into the SQL
        return self._query(
            f"SELECT ts, body FROM (SELECT id, ts, body FROM {table} WHERE slice = ? AND ts >= ? AND ts <= ? "
            "ORDER BY ts DESC, id DESC LIMIT ?) ORDER BY ts, id",
            (slice_name, since_s if since_s is not None else float("-inf"), until_s if until_s is not None else float("inf"), limit),
        )

    # -- references --------------------------------------------------------------------------
    def reference(self, slice_name: str) -> Reference | None:
        rows = self._query("SELECT body FROM refs WHERE slice = ?", (slice_name,))
        return Reference(**json.loads(rows[0][0])) if rows else None

    def set_reference(self, slice_name: str, reference: Reference, updated_s: float) -> None:
        with self._tx() as db:
            self._touch(db, slice_name, updated_s)
            db.execute(
                "INSERT INTO refs (slice, source, updated_s, body) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (slice) DO UPDATE SET source = excluded.source, updated_s = excluded.updated_s, body = excluded.body",
                (slice_name, reference.source, updated_s, _dumps(asdict(reference))),
            )

    # -- episodes ----------------------------------------------------------------------------
    def episode_state(self, slice_name: str) -> EpisodeState:
        rows = self._query("SELECT body FROM episode_state WHERE slice = ?", (slice_name,))
        return state_from_dict(json.loads(rows[0][0])) if rows else EpisodeState(slice=slice_name)

    def save_episodes(self, slice_name: str, state: EpisodeState, events: Iterable[EpisodeEvent]) -> None:
        """Persist the machine's state and its events in one transaction."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO episode_state (slice, body) VALUES (?, ?) ON CONFLICT (slice) DO UPDATE SET body = excluded.body",
                (slice_name, _dumps(state.to_dict())),
            )
            for ev in events:
                ep = ev.episode
                if ev.kind is EventKind.OPEN:
                    db.execute(
                        "INSERT INTO episodes (slice, regime, start_s, peak_confidence, windows, opened_at_s) VALUES (?, ?, ?, ?, ?, ?)",
                        (ep.slice, ep.regime.value, ep.start_s, ep.peak_confidence, ep.windows, ev.at_s),
                    )
                else:
                    db.execute(
                        "UPDATE episodes SET end_s = ?, peak_confidence = ?, windows = ?, closed_at_s = ? "
                        "WHERE id = (SELECT MAX(id) FROM episodes WHERE slice = ? AND regime = ? AND end_s IS NULL)",
                        (ep.end_s, ep.peak_confidence, ep.windows, ev.at_s, ep.slice, ep.regime.value),
                    )

    def episodes(self, slice_name: str, limit: int = 1000) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT id, regime, start_s, end_s, peak_confidence, windows, opened_at_s, closed_at_s FROM episodes "
            "WHERE slice = ? ORDER BY start_s DESC, id DESC LIMIT ?",
            (slice_name, limit),
        )
        return [
            {
                "id": r[0],
                "slice": slice_name,
                "regime": r[1],
                "start_s": r[2],
                "end_s": r[3],
                "peak_confidence": r[4],
                "windows": r[5],
                "opened_at_s": r[6],
                "closed_at_s": r[7],
                "open": r[3] is None,
            }
            for r in rows
        ]

    def episode_counts(self) -> dict[tuple[str, str], int]:
        """Episodes ever opened, per (slice, regime): the ``episodes_total`` counter survives restarts."""
        return {(r[0], r[1]): int(r[2]) for r in self._query("SELECT slice, regime, COUNT(*) FROM episodes GROUP BY slice, regime")}

    # -- alerts (Alertmanager webhook) --------------------------------------------------------
    def put_alerts(self, alerts: Iterable[dict[str, Any]], receiver: str | None, received_s: float) -> int:
        """Upsert alerts by (fingerprint, startsAt): a re-notification updates status and end."""
        n = 0
        with self._tx() as db:
            for a in alerts:
                db.execute(
                    "INSERT INTO alerts (fingerprint, starts_at, ends_at, starts_at_s, ends_at_s, status, alertname, slice, labels, "
                    "annotations, generator_url, receiver, received_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (fingerprint, starts_at) DO UPDATE SET ends_at = excluded.ends_at, ends_at_s = excluded.ends_at_s, "
                    "status = excluded.status, labels = excluded.labels, annotations = excluded.annotations, "
                    "received_s = excluded.received_s, receiver = excluded.receiver",
                    (
                        a["fingerprint"],
                        a["starts_at"],
                        a.get("ends_at"),
                        a.get("starts_at_s"),
                        a.get("ends_at_s"),
                        a["status"],
                        a.get("alertname"),
                        a.get("slice"),
                        _dumps(a.get("labels", {})),
                        _dumps(a.get("annotations", {})),
                        a.get("generator_url"),
                        receiver,
                        received_s,
                    ),
                )
                n += 1
        return n

    def alerts(self, slice_name: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        where, params = ("WHERE slice = ?", [slice_name]) if slice_name is not None else ("", [])
        rows = self._query(
            "SELECT fingerprint, status, alertname, slice, labels, annotations, starts_at, ends_at, starts_at_s, ends_at_s, "
            f"generator_url, receiver, received_s FROM alerts {where} ORDER BY received_s DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        keys = (
            "fingerprint",
            "status",
            "alertname",
            "slice",
            "labels",
            "annotations",
            "startsAt",
            "endsAt",
            "starts_at_s",
            "ends_at_s",
            "generatorURL",
            "receiver",
            "received_s",
        )
        out = []
        for r in rows:
            item = dict(zip(keys, r, strict=True))
            item["labels"] = json.loads(item["labels"])
            item["annotations"] = json.loads(item["annotations"])
            out.append(item)
        return out

    # -- actions (written by the control loop once it exists) --------------------------------
    def put_action(self, action: Action, ts: float, outcome: str = "proposed") -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO actions (slice, ts, kind, outcome, body) VALUES (?, ?, ?, ?, ?)",
                (action.slice, ts, action.kind.value, outcome, _dumps(action.to_dict())),
            )

    def actions(self, slice_name: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        where, params = ("WHERE slice = ?", [slice_name]) if slice_name is not None else ("", [])
        rows = self._query(f"SELECT ts, outcome, body FROM actions {where} ORDER BY ts DESC, id DESC LIMIT ?", (*params, limit))
        return [{"ts": r[0], "outcome": r[1], **json.loads(r[2])} for r in rows]
