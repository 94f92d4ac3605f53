"""PrometheusSource without a server: the HTTP contract, batching and error mapping (MockTransport)."""

from __future__ import annotations

import json
import math

import httpx
import pytest

from inferslice.collectors import FieldSettings, PrometheusSource, SliceConfig, parse_query_response
from inferslice.common.promtime import format_duration as promql_duration
from inferslice.errors import ConfigError, ParseError, SourceUnavailable

SLICES = (SliceConfig("free", 0.5), SliceConfig("premium", 0.5))


def _vector(*items: tuple[dict[str, str], str]) -> dict[str, object]:
    return {"status": "success", "data": {"resultType": "vector", "result": [{"metric": m, "value": [1, v]} for m, v in items]}}


def test_one_query_per_field_batched_over_slices() -> None:
    seen: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        seen.append(params)
        q = params["query"]
        if q.startswith("histogram_quantile(0.99, sum by (slice, le) (rate(inferslice_engine_time_to_first_token"):
            return httpx.Response(200, json=_vector(({"slice": "free"}, "2.5"), ({"slice": "premium"}, "NaN")))
        if "inferslice_engine_requests_running" in q:
            return httpx.Response(200, json=_vector(({"slice": "free"}, "10"), ({"slice": "other"}, "3")))
        if "inferslice_link_receive_bytes_total" in q:
            return httpx.Response(200, json=_vector(({"slice": "premium"}, "+Inf")))
        return httpx.Response(200, json=_vector())

    src = PrometheusSource(SLICES, transport=httpx.MockTransport(handler))
    snaps = src.snapshots(1700000000.5, window_s=15)
    assert len(seen) == len(src.specs)  # one query per field, not per slice
    assert all(p["time"] == "1700000000.500" for p in seen)
    assert all('slice=~"free|premium"' in p["query"] for p in seen)
    assert all("[15s]" in p["query"] for p in seen if "rate(" in p["query"])
    free, premium = snaps
    assert free.ttft_p99_s == 2.5 and free.requests_running == 10
    assert premium.ttft_p99_s is None  # NaN: no observations in the window
    assert premium.link_rx_bps is None  # +Inf is not a measurement
    assert free.slo_ttft_p99_s == 0.5 and free.window_s == 15
    assert src.health()["ok"] is True


def test_single_slice_selector_and_client_perspective() -> None:
    src = PrometheusSource(SLICES, fields=FieldSettings(perspective="client", link_name="edge-x"))
    queries = src.queries(("free",), 2.5)
    assert 'slice="free"' in queries["ttft_p50_s"] and "[2500ms]" in queries["ttft_p50_s"]
    assert "gen_ai_client_operation_time_to_first_chunk_seconds_bucket" in queries["ttft_p99_s"]
    assert 'link="edge-x"' in queries["link_rx_bps"] and 'direction="receive"' in queries["link_cap_bps"]
    assert promql_duration(10) == "10s"


def test_unreachable_prometheus_is_source_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    src = PrometheusSource(SLICES, transport=httpx.MockTransport(refuse))
    with pytest.raises(SourceUnavailable):
        src.snapshots(1.0)
    assert src.health()["ok"] is False and "ConnectError" in src.health()["last_error"]

    src = PrometheusSource(SLICES, transport=httpx.MockTransport(lambda r: httpx.Response(503, text="overloaded")))
    with pytest.raises(SourceUnavailable):
        src.snapshot("free", 10, 1.0)


def test_rejected_query_is_a_config_error() -> None:
    body = {"status": "error", "errorType": "bad_data", "error": "parse error"}
    src = PrometheusSource(SLICES, transport=httpx.MockTransport(lambda r: httpx.Response(400, json=body)))
    with pytest.raises(ConfigError):
        src.snapshots(1.0)


def test_parse_query_response() -> None:
    assert parse_query_response(_vector(({"slice": "a"}, "1.5")))[0].value == 1.5
    assert math.isnan(parse_query_response(_vector(({"slice": "a"}, "NaN")))[0].value)
    scalar = {"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}}
    assert parse_query_response(scalar)[0].value == 2.0
    for bad in (None, {"status": "error"}, {"status": "success"}, {"status": "success", "data": {"resultType": "matrix", "result": []}}):
        with pytest.raises(ParseError):
            parse_query_response(bad)
    with pytest.raises(ParseError):
        parse_query_response(json.loads('{"status":"success","data":{"resultType":"vector","result":[{"value":[1]}]}}'))
