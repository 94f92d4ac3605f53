"""Fetching many targets at once, within a deadline, from inside a synchronous ``collect()``.

prometheus_client calls ``collect()`` synchronously, once per scrape of our /metrics. Replicas are
fetched concurrently on a small private thread pool; the whole round has one deadline (the
per-target timeout plus a little grace), so one hung replica costs its own ``target_up=0`` and
never the scrape. A job still running at the deadline is abandoned (its thread ends at the HTTP
client's own timeout shortly after).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ALL_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

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
