"""The run summary: a pure function of the records, with the keys ``vllm bench serve --save-result``
writes, and its stdout report in the same layout.

Definitions follow vLLM's ``calculate_metrics``: only successful requests count; TPOT per request
is ``(e2e - ttft) / (output_tokens - 1)`` for requests with more than one token; ITL pools every
gap of every request; std is the population std; percentiles are ``numpy.percentile`` (linear);
empty samples give 0. A request is *good* when every configured SLO holds (``ttft``, ``tpot``,
``e2el`` in ms, inclusive), and goodput is good requests per second of run duration.

Beyond vLLM's keys: ``slice`` and ``endpoint``. ``queue_times`` here is the delay between a
request's scheduled arrival and its send (waiting for a ``max_concurrency`` slot); closed-loop
runs have none.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferslice.errors import InputError
from inferslice.records import RequestRecord

GOODPUT_METRICS = ("ttft", "tpot", "e2el")
LATENCY_METRICS = (("ttft", "TTFT", "Time to First Token"), ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
                   ("itl", "ITL", "Inter-token Latency"), ("e2el", "E2EL", "End-to-end Latency"))


@dataclass(frozen=True)
class Goodput:
    """SLO thresholds in ms, as ``vllm bench serve --goodput ttft:500 tpot:50``."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None

    def as_dict(self) -> dict[str, float]:
        return {k: v for k, v in (("ttft", self.ttft_ms), ("tpot", self.tpot_ms), ("e2el", self.e2el_ms)) if v is not None}

    def is_good(self, record: RequestRecord) -> bool:
        if not record.success or record.ttft_s is None or record.e2e_s is None:
            return False
        tpot_ms = (record.tpot_s or 0.0) * 1000.0  # vLLM counts a one-token request as TPOT 0
        checks = ((self.ttft_ms, record.ttft_s * 1000.0), (self.tpot_ms, tpot_ms), (self.e2el_ms, record.e2e_s * 1000.0))
        return all(slo is None or value <= slo for slo, value in checks)


def parse_goodput(items: Iterable[str]) -> Goodput:
    """``["ttft:500", "tpot:50"]`` -> Goodput; raises InputError on anything else."""
    values: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or name not in GOODPUT_METRICS:
            raise InputError(f"expected NAME:MS with NAME in {', '.join(GOODPUT_METRICS)}, got {item!r}", field="goodput")
        try:
            ms = float(value)
        except ValueError as err:
            raise InputError(f"{item!r}: {value!r} is not a number of milliseconds", field="goodput") from err
        if not ms >= 0:
            raise InputError(f"{item!r}: the threshold must be >= 0 ms", field="goodput")
        values[name] = ms
    if not values:
        raise InputError("no goodput SLO given", field="goodput")
    return Goodput(values.get("ttft"), values.get("tpot"), values.get("e2el"))


_NUMBER = re.compile(r"(?<![A-Za-z_])\d+")  # each digit run: 10.0.0.1 -> N.N.N.N, 0.25 -> N.N
_QUOTED = re.compile(r"'input': (?:'[^']*'|\"[^\"]*\"|[^,}]*)")
_MESSAGE_CHARS = 200  # vLLM's context-length message in full; past that, request-specific detail


def error_group(error: str | None) -> tuple[str, str]:
    """(status, "status: normalised message") of a failed record's error: numbers become N and the
    echoed input of a validation error is elided, so "context length is 256 ... has 300 input tokens"
    and "... has 412 input tokens" are one group. The status is the HTTP status, or the client-side
    kind (timeout, malformed_stream, an aiohttp exception class) for errors without one."""
    if not error:
        return "unknown", "unknown"
    status, sep, message = error.partition(": ")
    if not sep:
        status, message = error, ""
    message = _QUOTED.sub("'input': ...", message)
    message = " ".join(_NUMBER.sub("N", message).split())[:_MESSAGE_CHARS]
    return status, f"{status}: {message}".rstrip(": ") if message else status


def percentile_key(p: float) -> str:
    return f"p{int(p) if int(p) == p else p}"


def _stats(values_ms: Sequence[float], percentiles: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(values_ms, dtype=float) if len(values_ms) else np.zeros(1)
    out = {"mean": float(np.mean(arr)), "median": float(np.median(arr)), "std": float(np.std(arr))}
    for p in percentiles:
        out[percentile_key(p)] = float(np.percentile(arr, p))
    return out


def _peak_output_tokens_per_s(records: Sequence[RequestRecord]) -> float:
    """Most output tokens received in any one wall-clock second (vLLM's per-second buckets)."""
    times: list[float] = []
    for r in records:
        if r.ttft_s is None:
            continue
        t = r.start_s + r.ttft_s
        times.append(t)
        for gap in r.itl_s:
            t += gap
            times.append(t)
    if not times:
        return 0.0
    t0 = min(times)
    counts = np.bincount(((np.asarray(times) - t0) // 1.0).astype(np.int64))
    return float(counts.max())


def _peak_concurrency(records: Sequence[RequestRecord]) -> int:
    edges: list[tuple[float, int]] = []
    for r in records:
        if r.e2e_s is not None:
            edges += [(r.start_s, 1), (r.start_s + r.e2e_s, -1)]
    edges.sort(key=lambda e: (e[0], e[1]))  # an end at the same instant as a start frees its slot first
    peak = cur = 0
    for _, step in edges:
        cur += step
        peak = max(peak, cur)
    return peak


def summarize(
    records: Sequence[RequestRecord],
    duration_s: float,
    *,
    goodput: Goodput | None = None,
    percentiles: Sequence[float] = (99.0,),
    meta: Mapping[str, Any] | None = None,
    queue_times_s: Sequence[float] = (),
    now: float | None = None,
) -> dict[str, Any]:
    """Records of one run -> a dict with ``vllm bench serve --save-result``'s keys.

    ``meta`` supplies the run description keys (``model_id``, ``num_prompts``, ``request_rate``,
    ``burstiness``, ``max_concurrency``, ``slice``, ...); ``now`` (epoch seconds) dates the run.
    """
    ok = [r for r in records if r.success and r.ttft_s is not None and r.e2e_s is not None]
    dur = duration_s if duration_s > 0 else math.inf
    total_in = sum(r.prompt_tokens for r in ok)
    total_out = sum(r.output_tokens for r in ok)
    ttfts = [r.ttft_s * 1000.0 for r in ok if r.ttft_s is not None]
    tpots = [t * 1000.0 for r in ok if (t := r.tpot_s) is not None]
    itls = [gap * 1000.0 for r in ok for gap in r.itl_s]
    e2els = [r.e2e_s * 1000.0 for r in ok if r.e2e_s is not None]
    m = dict(meta or {})
    out: dict[str, Any] = {
        "date": time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time())),
        "endpoint_type": "openai",
        "backend": m.pop("backend", "openai-chat"),
        "label": m.pop("label", None),
        "model_id": m.pop("model_id", ok[0].model if ok else (records[0].model if records else "")),
        "tokenizer_id": m.pop("tokenizer_id", None),
        "num_prompts": m.pop("num_prompts", len(records)),
        "request_rate": m.pop("request_rate", "inf"),
        "burstiness": float(m.pop("burstiness", 1.0)),
        "max_concurrency": m.pop("max_concurrency", None),
        "duration": float(duration_s),
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / dur,
        "request_goodput": (sum(goodput.is_good(r) for r in ok) / dur) if goodput is not None else None,
        "output_throughput": total_out / dur,
        "total_token_throughput": (total_in + total_out) / dur,
        "latencies": [r.e2e_s for r in ok],
        "queue_times": [float(q) for q in queue_times_s],
        "max_output_tokens_per_s": _peak_output_tokens_per_s(ok),
        "max_concurrent_requests": _peak_concurrency(records),
        "rtfx": 0.0,  # audio real-time factor in vLLM; always 0 for text
    }
    if out["tokenizer_id"] is None:
        out["tokenizer_id"] = out["model_id"]
    for key, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        for stat, value in _stats(values, percentiles).items():
            out[f"{stat}_{key}_ms"] = value
    if goodput is not None:
        out["goodput_config"] = goodput.as_dict()
    errors: dict[str, int] = {}
    statuses: dict[str, int] = {}
    for r in records:
        if not r.success:
            status, key = error_group(r.error)
            errors[key] = errors.get(key, 0) + 1
            statuses[status] = statuses.get(status, 0) + 1
    out["errors_by_type"] = dict(sorted(errors.items(), key=lambda kv: (-kv[1], kv[0])))
    out["errors_by_status"] = dict(sorted(statuses.items(), key=lambda kv: (-kv[1], kv[0])))
    out.update(m)  # remaining caller keys (slice, endpoint, ...) go last and win
    return out


def _percentiles_in(summary: Mapping[str, Any], metric: str) -> list[str]:
    suffix = f"_{metric}_ms"
    keys = [k[: -len(suffix)] for k in summary if k.startswith("p") and k.endswith(suffix)]
    return sorted(keys, key=lambda k: float(k[1:]))


def format_report(summary: Mapping[str, Any]) -> str:
    """The ``vllm bench serve`` stdout block for a summary dict (ours or a saved vLLM result)."""
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]

    def row(label: str, value: Any, fmt: str = "") -> None:
        lines.append(("{:<40} {:<10" + fmt + "}").format(label, value))

    row("Successful requests:", summary["completed"])
    row("Failed requests:", summary["failed"])
    if summary.get("max_concurrency") is not None:
        row("Maximum request concurrency:", summary["max_concurrency"])
    rate = summary.get("request_rate", "inf")
    if rate not in ("inf", None) and float(rate) != math.inf:
        row("Request rate configured (RPS):", float(rate), ".2f")
    row("Benchmark duration (s):", summary["duration"], ".2f")
    row("Total input tokens:", summary["total_input_tokens"])
    row("Total generated tokens:", summary["total_output_tokens"])
    row("Request throughput (req/s):", summary["request_throughput"], ".2f")
    if summary.get("request_goodput") is not None:
        row("Request goodput (req/s):", summary["request_goodput"], ".2f")
    row("Output token throughput (tok/s):", summary["output_throughput"], ".2f")
    if "max_output_tokens_per_s" in summary:
        row("Peak output token throughput (tok/s):", float(summary["max_output_tokens_per_s"]), ".2f")
    if "max_concurrent_requests" in summary:
        row("Peak concurrent requests:", float(summary["max_concurrent_requests"]), ".2f")
    row("Total token throughput (tok/s):", summary["total_token_throughput"], ".2f")
    for key, name, header in LATENCY_METRICS:
        if f"mean_{key}_ms" not in summary:
            continue
        lines.append("{s:{c}^{n}}".format(s=header, n=50, c="-"))
        row(f"Mean {name} (ms):", summary[f"mean_{key}_ms"], ".2f")
        row(f"Median {name} (ms):", summary[f"median_{key}_ms"], ".2f")
        for p in _percentiles_in(summary, key):
            row(f"P{p[1:]} {name} (ms):", summary[f"{p}_{key}_ms"], ".2f")
    lines.append("=" * 50)
    return "\n".join(lines)
