"""``inferslice load``: streamed requests against one tier, reported like ``vllm bench serve``.

Wires the load generator (testbed.loadgen) to the client-perceived metrics exporter
(exporters.requests): the two never import each other and meet here through RequestRecord.

Exit status: 0 when at least one measured request succeeded, 1 when every request failed (an
unreachable or broken endpoint; the report is still printed, with the commonest errors), 2 for
bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

from inferslice.common.netns import enter_netns
from inferslice.errors import ConfigError, InputError
from inferslice.records import RecordObserver
from inferslice.testbed.loadgen import LoadConfig, format_report, parse_goodput, run_load
from inferslice.testbed.loadgen.workload import mix_spec

HELP = "load generator: fixed-concurrency or Poisson streaming requests against a tier"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_argument_group("target")
    where = target.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="serving front base URL, http://HOST:PORT")
    where.add_argument("--tier", help="tier name: the URL is the tier's front in the topology's address plan")
    target.add_argument("--topology", help="topology file (default: testbed/topology.yaml)")
    target.add_argument("--address-mode", choices=["netns", "loopback"], default="netns",
                        help="address plan used with --tier (default netns)")
    target.add_argument("--slice", help="slice label of the records (default: --tier, else 'default')")
    target.add_argument("--model", help="model id (default: the topology's model)")
    target.add_argument("--endpoint", choices=["chat", "completions"], default="chat")
    target.add_argument("--netns", help="run the client inside this network namespace (needs root)")
    mode = parser.add_argument_group("load").add_mutually_exclusive_group(required=True)
    mode.add_argument("--concurrency", type=int, help="closed loop with N requests in flight")
    mode.add_argument("--request-rate", type=float, help="open loop, mean requests/s (inf: all at once)")
    load = parser.add_argument_group("load options")
    load.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of arrival gaps (1 = Poisson)")
    load.add_argument("--max-concurrency", type=int, help="with --request-rate: cap on requests in flight")
    load.add_argument("--rate-schedule", default="", metavar="T:R,T:R,...",
                      help="with --request-rate (the peak): the rate over time, linear between points (s:req/s)")
    load.add_argument("--duration-s", type=float, help="stop starting requests after S seconds")
    load.add_argument("--num-prompts", type=int, help="stop after N requests")
    load.add_argument("--num-warmups", type=int, default=0, help="requests sent before the measured run")
    load.add_argument("--seed", type=int, default=0)
    load.add_argument("--request-timeout-s", type=float, default=300.0)
    load.add_argument("--drain-timeout-s", type=float,
                      help="after --duration-s, wait at most S for requests in flight, then cancel them (default: wait)")
    data = parser.add_argument_group("dataset (vllm bench serve's options)")
    data.add_argument("--dataset-name", choices=["sharegpt-like", "random"], default="sharegpt-like",
                      help="sharegpt-like: ShareGPT-shaped lengths (default); random: uniform lengths as below")
    data.add_argument("--mix", default="sharegpt-like", help="sharegpt-like lengths of a named mix: sharegpt-like (default), "
                      "short-chat, long-generation, long-prompt")
    data.add_argument("--random-input-len", type=int, default=1024, help="random: prompt tokens (default 1024)")
    data.add_argument("--random-output-len", type=int, default=128, help="random: output tokens (default 128)")
    data.add_argument("--random-range-ratio", type=float, default=0.0,
                      help="random: lengths uniform in [L*(1-r), L*(1+r)] (default 0: fixed)")
    data.add_argument("--no-server-probe", action="store_true",
                      help="do not read max_model_len and /tokenize before the run (requests may then overflow the context)")
    load.add_argument("--prompt-tokens-hint", action="store_true",
                      help="send X-Prompt-Tokens with each request (engine emulator: exact prompt length)")
    out = parser.add_argument_group("output")
    out.add_argument("--goodput", nargs="+", metavar="NAME:MS", help="SLOs for goodput, e.g. ttft:500 tpot:50")
    out.add_argument("--metric-percentiles", default="99", help="comma-separated percentiles (default 99)")
    out.add_argument("--save-result", type=Path, help="write the vllm-bench-style result JSON here")
    out.add_argument("--save-records", type=Path, help="write every request record here (JSON lines), for windowed analysis")
    out.add_argument("--otel-port", type=int, help="serve client-perceived metrics on :P/metrics while running")
    out.add_argument("--otlp-endpoint", help="also push OTLP metrics here (needs opentelemetry-exporter-otlp)")
    out.add_argument("--quiet", action="store_true", help="no report on stdout")


def _resolve_target(args: argparse.Namespace) -> tuple[str, str, str]:
    """(url, model, slice) from --url/--tier and the topology."""
    model = args.model
    if args.tier or model is None:
        from inferslice.topology import load_topology

        topology = load_topology(args.topology)
        model = model or topology.model
    if args.tier:
        from inferslice.testbed.addressing import AddressPlan

        if args.tier not in topology.tier_names:
            raise ConfigError(f"unknown tier {args.tier!r} (have {', '.join(topology.tier_names)})", field="tier")
        url = AddressPlan(topology, mode=args.address_mode).front(args.tier).url
    else:
        url = args.url
    return url, model, args.slice or args.tier or "default"


def parse_schedule(text: str) -> tuple[tuple[float, float], ...]:
    try:
        return tuple((float(t), float(r)) for t, r in (p.split(":") for p in text.split(",") if p.strip()))
    except ValueError:
        raise InputError(f"expected T:R,T:R,... (seconds:req/s), got {text!r}", field="rate-schedule") from None


def build_config(args: argparse.Namespace) -> LoadConfig:
    url, model, slice_name = _resolve_target(args)
    try:
        percentiles = tuple(float(p) for p in args.metric_percentiles.split(",") if p.strip())
    except ValueError as err:
        raise InputError(f"not a list of numbers: {args.metric_percentiles!r}", field="metric-percentiles") from err
    if args.max_concurrency is not None and args.concurrency is not None:
        raise InputError("--max-concurrency applies to --request-rate; --concurrency is already a cap", field="max-concurrency")
    return LoadConfig(
        url=url, model=model, slice=slice_name, endpoint=args.endpoint, concurrency=args.concurrency,
        request_rate_rps=args.request_rate, burstiness=args.burstiness, max_concurrency=args.max_concurrency,
        rate_schedule=parse_schedule(args.rate_schedule),
        duration_s=args.duration_s, num_prompts=args.num_prompts, num_warmups=args.num_warmups, seed=args.seed,
        request_timeout_s=args.request_timeout_s, goodput=parse_goodput(args.goodput) if args.goodput else None,
        percentiles=percentiles or (99.0,), drain_timeout_s=args.drain_timeout_s, prompt_tokens_hint=args.prompt_tokens_hint,
        workload=mix_spec(args.mix, dataset=args.dataset_name, random_input_len=args.random_input_len,
                          random_output_len=args.random_output_len, random_range_ratio=args.random_range_ratio),
        probe_server=not args.no_server_probe,
    )


def _json_safe(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in summary.items()}


def run(args: argparse.Namespace) -> int:
    config = build_config(args)
    observers: list[RecordObserver] = []
    recorder = server = None
    if args.otel_port is not None or args.otlp_endpoint:
        from prometheus_client import CollectorRegistry, start_http_server

        from inferslice.exporters.requests import ClientMetricsRecorder

        registry = CollectorRegistry()
        recorder = ClientMetricsRecorder(registry, operation_name="chat" if config.endpoint == "chat" else "text_completion",
                                         otlp_endpoint=args.otlp_endpoint)
        if args.otlp_endpoint and not recorder.otlp_enabled:
            print("inferslice load: OTLP export skipped (opentelemetry-exporter-otlp is not installed)", file=sys.stderr)
        observers.append(recorder)
        if args.otel_port is not None:
            # Started before entering --netns: the metrics socket stays in the current (scraper's) namespace.
            server, _thread = start_http_server(args.otel_port, registry=registry)
    try:
        if args.netns:
            enter_netns(args.netns)
        result = asyncio.run(run_load(config, observers))
    finally:
        if server is not None:
            server.shutdown()
        if recorder is not None:
            recorder.close()
    summary = _json_safe(result.summary)
    if args.save_result:
        args.save_result.write_text(json.dumps(summary) + "\n")
    if args.save_records:
        with args.save_records.open("w") as fh:
            for rec in result.records:
                fh.write(json.dumps(dataclasses.asdict(rec)) + "\n")
    if not args.quiet:
        print(format_report(summary))
    if result.records and result.succeeded == 0:
        top = next(iter(summary["errors_by_type"].items()), ("unknown", 0))
        print(f"inferslice load: all {len(result.records)} requests to {config.url} failed; commonest error "
              f"({top[1]}x): {top[0]}", file=sys.stderr)
        return 1
    if summary["failed"]:
        print(f"inferslice load: {summary['failed']} of {len(result.records)} requests failed", file=sys.stderr)
    return 0
