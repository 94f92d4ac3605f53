"""The testbed's load generator: seeded ShareGPT-like streaming requests, timed like ``vllm bench serve``.

Public API (the scenario runner calls ``run_load`` in-process; ``inferslice load`` wraps it):
``LoadConfig``, ``run_load(config, observers=(), stop=None) -> LoadResult``, ``summarize``,
``format_report``, ``Goodput``/``parse_goodput``, ``Workload``/``WorkloadSpec``, ``enter_netns``.
Observers are ``inferslice.records.RecordObserver`` callables; this package never imports exporters.
"""

from inferslice.common.netns import enter_netns
from inferslice.common.sse import Chunk, ChunkKind, SseParser, parse_chunk

from .client import RequestSettings, send_request
from .runner import LoadConfig, LoadResult, arrival_offsets, run_load
from .summary import Goodput, format_report, parse_goodput, summarize
from .workload import SampledRequest, Workload, WorkloadSpec

__all__ = [
    "Chunk", "ChunkKind", "Goodput", "LoadConfig", "LoadResult", "RequestSettings", "SampledRequest", "SseParser",
    "Workload", "WorkloadSpec", "arrival_offsets", "enter_netns", "format_report", "parse_chunk", "parse_goodput",
    "run_load", "send_request", "summarize",
]
