"""/metrics of one emulated replica: vLLM 0.32's families, names, help texts, labels and buckets.

A prometheus_client custom collector that builds fresh families per scrape from the performance
model's live statistics (the model stays free of prometheus_client). Families a CPU-less emulator
cannot mean anything by (FLOPs estimates, multi-modal and external KV caches) are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from inferslice.testbed.engine.model import EngineModel
from inferslice.testbed.engine.stats import FINISHED_REASONS, Histogram

ENGINE = "0"
LABELS = ["engine", "model_name"]  # vLLM's exposition lists labels sorted

HELP = {
    "vllm:num_requests_running": "Number of requests in model execution batches.",
    "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
    "vllm:num_requests_waiting_by_reason": (
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred"
        " by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting."
    ),
    "vllm:engine_sleep_state": (
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means"
        " sleep level 1; discard_all = 1 means sleep level 2."
    ),
    "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
    "vllm:prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "vllm:prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
    "vllm:num_preemptions": "Cumulative number of preemption from the engine.",
    "vllm:prompt_tokens": "Number of prefill tokens processed.",
    "vllm:prompt_tokens_by_source": "Number of prompt tokens by source.",
    "vllm:prompt_tokens_cached": "Number of cached prompt tokens (local + external).",
    "vllm:generation_tokens": "Number of generation tokens processed.",
    "vllm:request_success": "Count of successfully processed requests.",
    "vllm:admission_rejections": "Number of admission attempts rejected by a queue limit, by reason.",
    "vllm:request_prompt_tokens": "Number of prefill tokens processed.",
    "vllm:request_generation_tokens": "Number of generation tokens processed.",
    "vllm:iteration_tokens_total": "Histogram of number of tokens per engine_step.",
    "vllm:request_max_num_generation_tokens": "Histogram of maximum number of requested generation tokens.",
    "vllm:request_params_n": "Histogram of the n request parameter.",
    "vllm:request_params_max_tokens": "Histogram of the max_tokens request parameter.",
    "vllm:time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "vllm:inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "vllm:request_time_per_output_token_seconds": "Histogram of time_per_output_token_seconds per request.",
    "vllm:e2e_request_latency_seconds": "Histogram of e2e request latency in seconds.",
    "vllm:request_queue_time_seconds": "Histogram of time spent in WAITING phase for request.",
    "vllm:request_inference_time_seconds": "Histogram of time spent in RUNNING phase for request.",
    "vllm:request_prefill_time_seconds": "Histogram of time spent in PREFILL phase for request.",
    "vllm:request_decode_time_seconds": "Histogram of time spent in DECODE phase for request.",
    "vllm:request_num_preemptions": "Histogram of the number of times a request was preempted.",
    "vllm:request_prefill_kv_computed_tokens": "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
    "vllm:cache_config_info": "Information of the LLMEngine CacheConfig",
}


class VllmCollector(Collector):
    def __init__(self, model: EngineModel, replica_id: str, model_name: str) -> None:
        self.model = model
        self.replica_id = replica_id
        self.model_name = model_name

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        m = self.model
        rid = self.replica_id
        if rid not in m.replica_ids():
            return
        st = m.stats(rid)
        cfg = m.config(rid)
        base = [ENGINE, self.model_name]
        created = st.created_s

        def gauge(name: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, HELP[name], labels=LABELS)
            g.add_metric(base, value)
            return g

        def counter(name: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, HELP[name], labels=LABELS)
            c.add_metric(base, value, created=created)
            return c

        def hist(name: str, h: Histogram) -> HistogramMetricFamily:
            fam = HistogramMetricFamily(name, HELP[name], labels=LABELS)
            fam.add_metric(base, h.cumulative(), h.total)
            fam.samples.append(Sample(name + "_created", dict(zip(LABELS, base, strict=True)), created))
            return fam

        waiting = m.num_waiting(rid)
        yield gauge("vllm:num_requests_running", m.num_running(rid))
        yield gauge("vllm:num_requests_waiting", waiting)
        by_reason = GaugeMetricFamily(
            "vllm:num_requests_waiting_by_reason", HELP["vllm:num_requests_waiting_by_reason"], labels=[*LABELS, "reason"]
        )
        by_reason.add_metric([*base, "capacity"], waiting)
        by_reason.add_metric([*base, "deferred"], 0.0)
        yield by_reason
        sleep = GaugeMetricFamily("vllm:engine_sleep_state", HELP["vllm:engine_sleep_state"], labels=[*LABELS, "sleep_state"])
        for state, value in (("awake", 1.0), ("weights_offloaded", 0.0), ("discard_all", 0.0)):
            sleep.add_metric([*base, state], value)
        yield sleep
        yield gauge("vllm:kv_cache_usage_perc", m.kv_usage(rid))
        yield counter("vllm:prefix_cache_queries", st.prefix_cache_queries)
        yield counter("vllm:prefix_cache_hits", st.prefix_cache_hits)
        yield counter("vllm:num_preemptions", st.preemptions)
        yield counter("vllm:prompt_tokens", st.prompt_tokens)
        cached = min(st.prefix_cache_hits, st.prompt_tokens)
        by_source = CounterMetricFamily("vllm:prompt_tokens_by_source", HELP["vllm:prompt_tokens_by_source"], labels=[*LABELS, "source"])
        for source, value in (("local_compute", st.prompt_tokens - cached), ("local_cache_hit", cached), ("external_kv_transfer", 0)):
            by_source.add_metric([*base, source], value, created=created)
        yield by_source
        yield counter("vllm:prompt_tokens_cached", cached)
        yield counter("vllm:generation_tokens", st.generation_tokens)
        success = CounterMetricFamily(
            "vllm:request_success", HELP["vllm:request_success"], labels=["engine", "finished_reason", "model_name"]
        )
        for reason in FINISHED_REASONS:
            success.add_metric([ENGINE, reason, self.model_name], st.success[reason], created=created)
        yield success
        rejections = CounterMetricFamily("vllm:admission_rejections", HELP["vllm:admission_rejections"], labels=["model_name", "reason"])
        for reason in ("max_num_queued_reqs", "max_num_queued_tokens"):
            rejections.add_metric([self.model_name, reason], 0.0, created=created)
        yield rejections
        yield hist("vllm:request_prompt_tokens", st.request_prompt_tokens)
        yield hist("vllm:request_generation_tokens", st.request_generation_tokens)
        yield hist("vllm:iteration_tokens_total", st.iteration_tokens)
        yield hist("vllm:request_max_num_generation_tokens", st.request_max_generation_tokens)
        yield hist("vllm:request_params_n", st.params_n)
        yield hist("vllm:request_params_max_tokens", st.params_max_tokens)
        yield hist("vllm:time_to_first_token_seconds", st.ttft)
        yield hist("vllm:inter_token_latency_seconds", st.itl)
        yield hist("vllm:request_time_per_output_token_seconds", st.tpot)
        yield hist("vllm:e2e_request_latency_seconds", st.e2e)
        yield hist("vllm:request_queue_time_seconds", st.queue)
        yield hist("vllm:request_inference_time_seconds", st.inference)
        yield hist("vllm:request_prefill_time_seconds", st.prefill)
        yield hist("vllm:request_decode_time_seconds", st.decode)
        yield hist("vllm:request_num_preemptions", st.request_preemptions)
        yield hist("vllm:request_prefill_kv_computed_tokens", st.prefill_kv_computed_tokens)
        info = cache_config_labels(cfg.block_size, cfg.num_gpu_blocks, cfg.enable_prefix_caching, cfg.max_model_len)
        # vLLM labels the info gauge with engine only (no model_name).
        cc = GaugeMetricFamily("vllm:cache_config_info", HELP["vllm:cache_config_info"], labels=[*info, "engine"])
        cc.add_metric([*info.values(), ENGINE], 1.0)
        yield cc


def cache_config_labels(block_size: int, num_gpu_blocks: int, prefix_caching: bool, max_model_len: int) -> dict[str, str]:
    """vLLM 0.32's CacheConfig fields as info labels (the fixture's label set, our values)."""
    kv_bytes = num_gpu_blocks * block_size * 131_072
    return {
        "_block_size_resolved": "True",
        "block_size": str(block_size),
        "cache_dtype": "auto",
        "cache_hit_alignment_tokens": "None",
        "effective_attention_block_size": str(block_size),
        "enable_mamba_shared_prefix_checkpoint": "False",
        "enable_prefix_caching": str(prefix_caching),
        "gpu_memory_utilization": "0.9",
        "hash_block_size": "None",
        "is_attention_free": "False",
        "kv_cache_dtype_skip_layers": "[]",
        "kv_cache_layout": "None",
        "kv_cache_max_concurrency": repr(float(num_gpu_blocks * block_size / max_model_len)),
        "kv_cache_memory_bytes": str(kv_bytes),
        "kv_cache_size_tokens": str(num_gpu_blocks * block_size),
        "kv_offloading_backend": "native",
        "kv_offloading_size": "None",
        "kv_sharing_fast_prefill": "False",
        "mamba_block_size": "None",
        "mamba_cache_dtype": "auto",
        "mamba_cache_mode": "none",
        "mamba_page_size_padded": "None",
        "mamba_ssm_cache_dtype": "auto",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_cache_retention_interval": "0",
        "prefix_caching_hash_algo": "sha256",
        "prefix_match_unit": "None",
        "replayssm_buffer_len": "16",
        "skip_page_size_padded": "None",
        "sliding_window": "None",
        "swa_bounded_replay": "True",
        "use_kda_recoverssm": "False",
        "use_replayssm": "False",
        "user_specified_block_size": "False",
    }
