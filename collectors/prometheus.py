"""``PrometheusSource``: snapshots from a Prometheus server's HTTP API.

Two ways to read a round, the same fields either way (``fields.field_specs``):

- ``recorded=False``: one query per field over every slice (``fields.render_promql``); needs no
  rules, costs the server a scan of every raw series a field reads, each round.
- ``recorded=True``: the recording rules of ``collectors.recorded`` (generated into the rule file
  with the loop's window and interval) did that work on Prometheus's schedule; a round is three
  instant queries, one per combining family, whatever the slice count. ``pops`` narrows them to a
  set of PoPs (a diagnosis shard's group); the answer can come from VictoriaMetrics or any other
  PromQL endpoint the shards remote-write their recorded series to.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from inferslice.collectors import recorded
from inferslice.collectors.fields import FieldSettings, field_specs, render_promql
from inferslice.collectors.source import SliceConfig, assemble_snapshot, find_slice
from inferslice.common import fastjson
from inferslice.errors import ConfigError, ParseError, SourceUnavailable
from inferslice.snapshot import SliceSnapshot


@dataclass(frozen=True)
class PrometheusSettings:
    base_url: str = "http://127.0.0.1:9090"  # the testbed's Prometheus
    timeout_s: float = 5.0  # a PromQL query over a few minutes of data answers in milliseconds; 5 s means it is down
    window_s: float = 10.0  # five scrapes at the testbed's 2 s interval, well inside a 20-30 s load step
    recorded: bool = False  # read the snapshot recording rules (three queries a round) instead of one query per field
    pops: tuple[str, ...] | None = None  # recorded: only these PoPs' parts (a diagnosis shard's group); None: all


@dataclass(frozen=True)
class VectorSample:
    labels: Mapping[str, str]
    value: float  # NaN and +-Inf kept as Prometheus sent them


def parse_query_response(body: Any) -> tuple[VectorSample, ...]:
    """An ``/api/v1/query`` answer of type vector (or scalar) -> samples; ``ParseError`` on anything else."""
    if not isinstance(body, dict) or body.get("status") != "success":
        raise ParseError(f"prometheus: not a success response: {str(body)[:200]}")
    data = body.get("data")
    if not isinstance(data, dict):
        raise ParseError("prometheus: response without data")
    kind, result = data.get("resultType"), data.get("result")
    try:
        if kind == "vector" and isinstance(result, list):
            return tuple(VectorSample(dict(item.get("metric", {})), float(item["value"][1])) for item in result)
        if kind == "scalar" and isinstance(result, list):
            return (VectorSample({}, float(result[1])),)
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise ParseError(f"prometheus: malformed {kind} result: {err}") from None
    raise ParseError(f"prometheus: unexpected result type {kind!r}")


def by_slice(samples: Sequence[VectorSample]) -> dict[str, float]:
    return {s.labels["slice"]: s.value for s in samples if "slice" in s.labels}


class PrometheusSource:
    """``MetricSource`` over Prometheus's HTTP API (``/api/v1/query`` with ``time=``).

    ``transport`` lets tests inject an ``httpx.MockTransport``; in production leave it ``None``.
    """

    def __init__(
        self,
        slices: Sequence[SliceConfig],
        settings: PrometheusSettings | None = None,
        fields: FieldSettings | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.slices = tuple(slices)
        self.settings = settings or PrometheusSettings()
        self.specs = field_specs(fields or FieldSettings())
        self.link_capacity_bps = (fields or FieldSettings()).nominal_link_bps
        self._client = httpx.Client(base_url=self.settings.base_url, timeout=self.settings.timeout_s, transport=transport)
        self._last_ok_s: float | None = None
        self._last_error: str | None = None
        self._queries = 0
        self.recorded_series = 0  # (slice, pop, term) samples the last recorded round read
        self._assemblers: tuple[float, list[tuple[str, Callable[[Mapping[str, float]], float | None]]]] | None = None

    def close(self) -> None:
        self._client.close()

    def queries(self, slices: Sequence[str], window_s: float) -> dict[str, str]:
        """The PromQL of every field for these slices (exposed so dashboards and docs can show it)."""
        names = tuple(slices)
        return {name: render_promql(spec, names, window_s) for name, spec in self.specs.items()}

    def query(self, promql: str, at_s: float) -> tuple[VectorSample, ...]:
        samples = parse_query_response(self._get_json(promql, at_s))
        self._mark_ok(at_s)
        return samples

    def _mark_ok(self, at_s: float) -> None:
        self._last_ok_s = at_s  # the caller's clock: tests drive it
        self._last_error = None

    def _get(self, promql: str, at_s: float) -> httpx.Response:
        try:
            resp = self._client.get("/api/v1/query", params={"query": promql, "time": f"{at_s:.3f}"})
        except httpx.HTTPError as err:
            self._last_error = f"{type(err).__name__}: {err}"
            raise SourceUnavailable(f"prometheus at {self.settings.base_url}: {self._last_error}") from None
        self._queries += 1
        return resp

    def _checked_json(self, resp: httpx.Response, promql: str) -> Any:
        try:
            body = fastjson.loads(resp.content)
        except json.JSONDecodeError:
            body = None
        if resp.status_code == 400 and isinstance(body, dict) and body.get("errorType") == "bad_data":
            # Our queries are generated, so a rejected one means a bad selector in the configuration.
            raise ConfigError(f"prometheus rejected {promql!r}: {body.get('error')}")
        if resp.status_code >= 400:
            self._last_error = f"HTTP {resp.status_code}: {str(body)[:200] if body else resp.text[:200]}"
            raise SourceUnavailable(f"prometheus at {self.settings.base_url}: {self._last_error}")
        return body

    def _get_json(self, promql: str, at_s: float) -> Any:
        """One instant query's decoded answer; ``SourceUnavailable``/``ConfigError`` as ``query`` documents."""
        return self._checked_json(self._get(promql, at_s), promql)

    def recorded_queries(self, window_s: float) -> dict[recorded.Combine, str]:
        """The three instant queries of a recorded round (by combining family)."""
        pops = self.settings.pops
        # "|" last: an empty pop too, the per-slice terms (WAN path values) have none
        sel = "" if pops is None else "{pop=~" + recorded._quote("|".join(sorted(pops)) + "|") + "}"
        return {fam: recorded.family_name(fam, window_s) + sel for fam in recorded.FAMILIES}

    def _collect_recorded(self, names: tuple[str, ...], window_s: float, now_s: float) -> dict[str, dict[str, float | None]]:
        parts: list[tuple[recorded.Combine, str, str, float]] = []
        for fam, promql in self.recorded_queries(window_s).items():
            parts += [(fam, sl, term, v) for sl, term, v in self._recorded_samples(promql, now_s)]
        self.recorded_series = len(parts)
        terms = recorded.combine(parts)
        if self._assemblers is None or self._assemblers[0] != window_s:
            self._assemblers = (window_s, [(f, recorded.assembler(spec, window_s)) for f, spec in self.specs.items()])
        fields = self._assemblers[1]
        empty: dict[str, float] = {}
        out = {}
        for n in names:
            mine = terms.get(n, empty)
            out[n] = {f: build(mine) for f, build in fields}
        return out

    def _recorded_samples(self, promql: str, at_s: float) -> list[tuple[str, str, float]]:
        """(slice, term, value) of a recorded family's samples, read straight from the JSON (a round is
        ~25,000 of them at 1,000 slices). A well-formed answer is scanned without decoding it
        (``recorded.scan_vector``: decoding 3-5 MB into objects was half the read's CPU); anything
        the scanner declines is decoded and checked in full."""
        resp = self._get(promql, at_s)
        if resp.status_code == 200:
            scanned = recorded.scan_vector(resp.content)
            if scanned is not None:
                self._mark_ok(at_s)
                return scanned
        body = self._checked_json(resp, promql)
        data = body.get("data") if isinstance(body, dict) else None
        ok = isinstance(body, dict) and body.get("status") == "success"
        if not ok or not isinstance(data, dict) or data.get("resultType") != "vector":
            parse_query_response(body)  # raises the ParseError that says what is wrong
            return []
        out = []
        try:
            for item in data["result"]:
                metric = item["metric"]
                sl, term = metric.get("slice"), metric.get(recorded.TERM_LABEL)
                if sl and term:
                    out.append((sl, term, float(item["value"][1])))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as err:
            raise ParseError(f"prometheus: malformed vector result: {err}") from None
        self._mark_ok(at_s)
        return out

    def _collect(self, names: tuple[str, ...], window_s: float, now_s: float) -> dict[str, dict[str, float | None]]:
        if self.settings.recorded:
            return self._collect_recorded(names, window_s, now_s)
        per_slice: dict[str, dict[str, float | None]] = {n: {} for n in names}
        for field_name, promql in self.queries(names, window_s).items():
            for sl, value in by_slice(self.query(promql, now_s)).items():
                if sl in per_slice:
                    per_slice[sl][field_name] = None if math.isnan(value) else value
        return per_slice

    def poll(self, now_s: float) -> None:
        """Nothing to collect: Prometheus scrapes on its own schedule."""

    def snapshot(self, slice: str, window_s: float, now_s: float) -> SliceSnapshot:
        values = self._collect((slice,), window_s, now_s)[slice]
        snap: SliceSnapshot = assemble_snapshot(find_slice(self.slices, slice), values, now_s, window_s, self.link_capacity_bps)
        return snap

    def snapshots(self, now_s: float, window_s: float | None = None) -> list[SliceSnapshot]:
        w = window_s if window_s is not None else self.settings.window_s
        names = tuple(c.name for c in self.slices)
        if not names:
            return []
        values = self._collect(names, w, now_s)
        return [assemble_snapshot(c, values[c.name], now_s, w, self.link_capacity_bps) for c in self.slices]

    def health(self) -> dict[str, Any]:
        return {
            "source": "prometheus",
            "url": self.settings.base_url,
            "ok": self._last_error is None and self._last_ok_s is not None,
            "last_ok_s": self._last_ok_s,
            "last_error": self._last_error,
            "queries": self._queries,
            "recorded": self.settings.recorded,
            **({"recorded_series": self.recorded_series} if self.settings.recorded else {}),
        }
