"""Client-perceived latency: each ``RequestRecord`` recorded with the OpenTelemetry SDK under the
GenAI semantic-convention names, exported to a Prometheus registry (and to OTLP when asked and
``opentelemetry-exporter-otlp`` is installed).

Instruments (OTel name -> Prometheus name):
- ``gen_ai.client.operation.duration`` (s) -> ``gen_ai_client_operation_duration_seconds``
- ``gen_ai.client.operation.time_to_first_chunk`` (s) -> ``..._time_to_first_chunk_seconds``
- ``gen_ai.client.operation.time_per_output_chunk`` (s, every gap after the first chunk) -> ``..._time_per_output_chunk_seconds``
- ``gen_ai.client.token.usage`` ({token}, ``gen_ai.token.type`` input|output) -> ``gen_ai_client_token_usage``

Attributes: ``gen_ai.operation.name``, ``gen_ai.request.model``, ``server.address``, ``slice``, and
``error.type`` on failures (duration only: a failed request has no meaningful chunk timing or
usage). Bucket edges are vLLM's (TTFT, ITL, e2e latency) so the client and engine views line up
and an SLO of 0.5 s sits on a TTFT bucket edge.

Each recorder owns its MeterProvider and registers the reader's collector only in the registry it
is given, never in prometheus_client's global REGISTRY; ``close()`` unregisters it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry

from inferslice.records import RequestRecord

log = logging.getLogger(__name__)

TTFC = "gen_ai.client.operation.time_to_first_chunk"
TPOC = "gen_ai.client.operation.time_per_output_chunk"
DURATION = "gen_ai.client.operation.duration"
TOKEN_USAGE = "gen_ai.client.token.usage"

# vLLM's bucket edges (CONTRACTS.md), so 0.5 s (the TTFT SLO) is a bucket edge.
TTFT_BUCKETS_S: tuple[float, ...] = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                                     20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS_S: tuple[float, ...] = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                                    40.0, 80.0)
LATENCY_BUCKETS_S: tuple[float, ...] = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                                        240.0, 480.0, 960.0, 1920.0, 7680.0)
# The semantic conventions' recommended edges for token usage.
TOKEN_BUCKETS: tuple[float, ...] = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)


def _views() -> list[View]:
    return [
        View(instrument_name=name, aggregation=ExplicitBucketHistogramAggregation(boundaries=buckets))
        for name, buckets in ((TTFC, TTFT_BUCKETS_S), (TPOC, ITL_BUCKETS_S), (DURATION, LATENCY_BUCKETS_S),
                              (TOKEN_USAGE, TOKEN_BUCKETS))
    ]


def _otlp_reader(endpoint: str, interval_s: float) -> MetricReader | None:
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    except ImportError:
        log.warning("OTLP export to %s skipped: opentelemetry-exporter-otlp-proto-http is not installed", endpoint)
        return None
    return PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint), export_interval_millis=interval_s * 1000.0)


class ClientMetricsRecorder:
    """A ``RecordObserver``: call it with each finished request."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        operation_name: str = "chat",  # GenAI operation: chat for /v1/chat/completions, text_completion for /v1/completions
        otlp_endpoint: str | None = None,
        otlp_interval_s: float = 10.0,  # the OTel SDK's default periodic export is 60 s; 10 s matches our scrape cadence
        service_name: str = "inferslice-loadgen",
    ) -> None:
        readers: list[MetricReader] = []
        self._registry = registry
        self._prom_reader: PrometheusMetricReader | None = None
        if registry is not None:
            # Scope labels and target_info would only repeat the service name on every series.
            self._prom_reader = PrometheusMetricReader(disable_target_info=True, scope_info_enabled=False, registry=registry)
            readers.append(self._prom_reader)
        self.otlp_enabled = False
        if otlp_endpoint:
            otlp = _otlp_reader(otlp_endpoint, otlp_interval_s)
            if otlp is not None:
                readers.append(otlp)
                self.otlp_enabled = True
        self._provider = MeterProvider(metric_readers=readers, views=_views(),
                                       resource=Resource.create({"service.name": service_name}))
        meter = self._provider.get_meter("inferslice.exporters.requests")
        self._operation = operation_name
        self._duration = meter.create_histogram(DURATION, unit="s", description="GenAI operation duration (client-perceived)")
        self._ttfc = meter.create_histogram(TTFC, unit="s", description="Time to receive the first chunk of a streamed response")
        self._tpoc = meter.create_histogram(TPOC, unit="s", description="Time between consecutive chunks after the first")
        self._tokens = meter.create_histogram(TOKEN_USAGE, unit="{token}", description="Input and output tokens used")
        self._closed = False
        self._streamed = False  # True once chunks are reported as they arrive (first_chunk/next_chunk)

    def _attributes(self, record: RequestRecord) -> dict[str, str]:
        attrs = {"gen_ai.operation.name": self._operation, "gen_ai.request.model": record.model, "slice": record.slice}
        if record.server_address:
            attrs["server.address"] = record.server_address
        return attrs

    def __call__(self, record: RequestRecord) -> None:
        self.record(record)

    # -- streaming: the load generator reports chunks as they arrive ------------------------------
    def _stream_attrs(self, slice: str, model: str, server_address: str) -> dict[str, str]:
        attrs = {"gen_ai.operation.name": self._operation, "gen_ai.request.model": model, "slice": slice}
        if server_address:
            attrs["server.address"] = server_address
        return attrs

    def first_chunk(self, slice: str, model: str, server_address: str, ttft_s: float) -> None:
        self._streamed = True  # from now on record() leaves TTFT and chunk gaps to these calls
        self._ttfc.record(ttft_s, self._stream_attrs(slice, model, server_address))

    def next_chunk(self, slice: str, model: str, server_address: str, gap_s: float) -> None:
        self._tpoc.record(gap_s, self._stream_attrs(slice, model, server_address))

    def record(self, record: RequestRecord) -> None:
        attrs = self._attributes(record)
        if not record.success:
            if record.e2e_s is not None:
                self._duration.record(record.e2e_s, {**attrs, "error.type": record.error_type})
            return
        if record.e2e_s is not None:
            self._duration.record(record.e2e_s, attrs)
        if not self._streamed:
            if record.ttft_s is not None:
                self._ttfc.record(record.ttft_s, attrs)
            for gap in record.itl_s:
                self._tpoc.record(gap, attrs)
        self._tokens.record(record.prompt_tokens, {**attrs, "gen_ai.token.type": "input"})
        self._tokens.record(record.output_tokens, {**attrs, "gen_ai.token.type": "output"})

    def record_all(self, records: Sequence[RequestRecord]) -> None:
        for r in records:
            self.record(r)

    def close(self) -> None:
        """Flush OTLP and unregister from the registry; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._provider.shutdown()  # PrometheusMetricReader.shutdown unregisters its collector
