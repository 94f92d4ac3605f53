"""Fetching many targets at once, within a deadline, from inside a synchronous ``collect()``.

prometheus_client calls ``collect()`` synchronously, once per scrape of our /metrics. Replicas are
fetched concurrently on a small private thread pool; the whole round has one deadline (the
per-target timeout plus a little grace), so one hung replica costs its own ``target_up=0`` and
never the scrape. A job still running at the deadline is abandoned (its thread ends at the HTTP
client's own timeout shortly after).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ALL_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

from inferslice.errors import InferSliceError, ParseError, SourceUnavailable

Fetcher = Callable[[str, float], str]  # (url, timeout_s) -> body; raises SourceUnavailable/ParseError
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

MAX_BODY_BYTES = 16 * 1024 * 1024  # a vLLM exposition is ~50 kB; anything near this is not one


class HttpFetcher:
    """GET with one shared keep-alive client; HTTP errors become ``SourceUnavailable``."""

    def __init__(self, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self._max = max_body_bytes
        # Plain text 0.0.4: every exporter speaks it, so negotiation never changes what we parse.
        self._client = httpx.Client(headers={"Accept": "text/plain;version=0.0.4"}, follow_redirects=False)

    def __call__(self, url: str, timeout_s: float) -> str:
        try:
            with self._client.stream("GET", url, timeout=timeout_s) as resp:
                if resp.status_code != 200:
                    raise SourceUnavailable(f"{url}: HTTP {resp.status_code}")
                chunks: list[bytes] = []
                size = 0
                for chunk in resp.iter_bytes():
                    size += len(chunk)
                    if size > self._max:
                        raise ParseError(f"{url}: body larger than {self._max} bytes")
                    chunks.append(chunk)
        except httpx.TimeoutException:
            raise SourceUnavailable(f"{url}: timed out after {timeout_s:g} s") from None
        except httpx.HTTPError as err:
            raise SourceUnavailable(f"{url}: {type(err).__name__}: {err}") from None
        try:
            return b"".join(chunks).decode("utf-8")
        except UnicodeDecodeError:
            raise ParseError(f"{url}: body is not UTF-8") from None

    def get_json(self, url: str, timeout_s: float) -> Any:
        text = self(url, timeout_s)
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise ParseError(f"{url}: not JSON: {err}") from None

    def close(self) -> None:
        self._client.close()


class TimedOut(SourceUnavailable):
    """The job did not finish before the round's deadline."""


class ConcurrentRunner:
    """Runs keyed jobs on a private pool and returns each result or its error by the deadline."""

    def __init__(self, max_workers: int = 16) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="inferslice-engine-scrape")

    def run(self, jobs: Mapping[K, Callable[[], T]], deadline_s: float) -> dict[K, T | InferSliceError]:
        futures: dict[Future[T], K] = {self._pool.submit(job): key for key, job in jobs.items()}
        done, _pending = wait(futures, timeout=deadline_s, return_when=ALL_COMPLETED)
        out: dict[K, T | InferSliceError] = {}
        for fut, key in futures.items():
            if fut not in done:
                fut.cancel()
                out[key] = TimedOut(f"no answer within {deadline_s:g} s")
                continue
            try:
                out[key] = fut.result()
            except InferSliceError as err:
                out[key] = err
            except OSError as err:
                out[key] = SourceUnavailable(f"{type(err).__name__}: {err}")
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class _Flight(Generic[T]):
    done: threading.Event = field(default_factory=threading.Event)
    result: T | None = None
    error: BaseException | None = None


class SingleFlight(Generic[T]):
    """At most one call of a function in flight; a caller that arrives during one waits for it and
    shares its result (or its exception).

    Two scrapers reading one exporter at once (Prometheus and the embedded source, or an HA pair of
    Prometheus servers) would otherwise queue one round of target fetches behind the other: with one
    replica behind a congested WAN link each round takes its full deadline, and the second scraper
    waited two rounds, past its own timeout, and lost every family of the exporter (issue 17's
    WAN-rate corpus windows). Sharing the round bounds every scrape by one deadline and fetches each
    target once however many scrapers ask.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: _Flight[T] | None = None
        self.calls = 0  # rounds actually run (tests and health read it)
        self.shared = 0  # callers that joined a round in flight

    def run(self, fn: Callable[[], T]) -> T:
        with self._lock:
            flight = self._current
            leader = flight is None
            if flight is None:
                flight = self._current = _Flight()
                self.calls += 1
            else:
                self.shared += 1
        if leader:
            try:
                flight.result = fn()
            except BaseException as err:  # noqa: BLE001  (not swallowed: every caller of this round re-raises it below)
                flight.error = err
            finally:
                with self._lock:
                    self._current = None
                flight.done.set()
        else:
            flight.done.wait()
        if flight.error is not None:
            raise flight.error
        return flight.result  # type: ignore[return-value]  # set whenever error is None
