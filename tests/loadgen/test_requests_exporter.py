"""The client-perceived exporter: exact Prometheus names, labels, bucket edges, no global registry."""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from inferslice import metric_names as mn
from inferslice.exporters.requests import ITL_BUCKETS_S, TTFT_BUCKETS_S, ClientMetricsRecorder
from inferslice.records import RequestRecord

OK = RequestRecord(slice="free", start_s=0.0, success=True, ttft_s=0.3, e2e_s=1.2, prompt_tokens=200, output_tokens=4,
                   itl_s=(0.02, 0.03, 0.6), model="meta-llama/Llama-3.1-8B-Instruct", server_address="10.1.0.1")
FAILED = RequestRecord(slice="premium", start_s=0.0, success=False, e2e_s=0.05, error="500: boom", model="m")


def _families(registry: CollectorRegistry) -> dict[str, dict[str, list[tuple[dict[str, str], float]]]]:
    out: dict[str, dict[str, list[tuple[dict[str, str], float]]]] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out.setdefault(fam.name, {}).setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_prometheus_names_match_the_metric_name_contract() -> None:
    registry = CollectorRegistry()
    recorder = ClientMetricsRecorder(registry)
    recorder(OK)
    recorder(FAILED)
    fams = _families(registry)
    assert {mn.CLIENT_TTFT, mn.CLIENT_TPOT, mn.CLIENT_DURATION, mn.CLIENT_TOKENS} <= set(fams)
    text = generate_latest(registry).decode()
    assert ('gen_ai_client_operation_time_to_first_chunk_seconds_bucket{gen_ai_operation_name="chat",'
            'gen_ai_request_model="meta-llama/Llama-3.1-8B-Instruct",le="0.5",server_address="10.1.0.1",slice="free"} 1.0') in text
    recorder.close()


def test_bucket_edges_are_vllms_and_values_land_in_them() -> None:
    registry = CollectorRegistry()
    recorder = ClientMetricsRecorder(registry)
    recorder(OK)
    fams = _families(registry)
    ttft = fams[mn.CLIENT_TTFT][mn.CLIENT_TTFT + "_bucket"]
    edges = sorted(float(labels["le"]) for labels, _ in ttft if labels["le"] != "+Inf")
    assert edges == sorted(TTFT_BUCKETS_S) and 0.5 in edges
    below = {float(lb["le"]): v for lb, v in ttft if lb["le"] != "+Inf"}
    assert below[0.25] == 0 and below[0.5] == 1
    tpot = fams[mn.CLIENT_TPOT][mn.CLIENT_TPOT + "_bucket"]
    assert sorted(float(lb["le"]) for lb, _ in tpot if lb["le"] != "+Inf") == sorted(ITL_BUCKETS_S)
    per_chunk = {float(lb["le"]): v for lb, v in tpot if lb["le"] != "+Inf"}
    assert per_chunk[0.025] == 1 and per_chunk[0.05] == 2 and per_chunk[0.75] == 3  # one sample per ITL
    tokens = {lb["gen_ai_token_type"]: v for lb, v in fams[mn.CLIENT_TOKENS][mn.CLIENT_TOKENS + "_sum"]}
    assert tokens == {"input": 200, "output": 4}
    recorder.close()


def test_failures_carry_error_type_and_only_a_duration() -> None:
    registry = CollectorRegistry()
    recorder = ClientMetricsRecorder(registry)
    recorder(FAILED)
    fams = _families(registry)
    (labels, count), = fams[mn.CLIENT_DURATION][mn.CLIENT_DURATION + "_count"]
    assert labels["error_type"] == "500" and labels["slice"] == "premium" and count == 1
    assert mn.CLIENT_TTFT not in fams and mn.CLIENT_TOKENS not in fams
    recorder.close()


def test_recorders_are_independent_and_never_touch_the_global_registry() -> None:
    before = set(REGISTRY._names_to_collectors)
    r1, r2 = CollectorRegistry(), CollectorRegistry()
    a, b = ClientMetricsRecorder(r1), ClientMetricsRecorder(r2)
    a(OK)
    assert mn.CLIENT_TTFT in _families(r1) and mn.CLIENT_TTFT not in _families(r2)
    assert set(REGISTRY._names_to_collectors) == before
    a.close()
    a.close()  # idempotent
    assert generate_latest(r1) == b""  # unregistered
    b.close()


def test_missing_otlp_exporter_is_skipped_cleanly() -> None:
    recorder = ClientMetricsRecorder(CollectorRegistry(), otlp_endpoint="http://127.0.0.1:4318/v1/metrics")
    try:
        import opentelemetry.exporter.otlp.proto.http.metric_exporter  # noqa: F401
    except ImportError:
        assert recorder.otlp_enabled is False
    recorder(OK)
    recorder.close()
