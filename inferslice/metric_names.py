"""Names of every metric inferslice exports: the contract between exporters, collectors,
dashboards and alert rules. Prometheus conventions: ``inferslice_`` prefix, base units,
``_total`` counters. Labels: ``slice`` (tier), ``pop``, ``replica``; links add ``link`` and, for
tunnels and probes, ``peer_pop``; caps add ``direction`` (``receive``/``transmit``).

Direction is the viewpoint of the measured interface as mapped in the exporter config. On the
testbed's client edge, ``receive`` is what the tier's clients receive (the response stream).
"""

from __future__ import annotations

PREFIX = "inferslice_"

# -- network (exporters/network) --------------------------------------------------------------
LINK_RECEIVE_BYTES = "inferslice_link_receive_bytes_total"  # {slice,pop,link}
LINK_TRANSMIT_BYTES = "inferslice_link_transmit_bytes_total"
LINK_RECEIVE_PACKETS = "inferslice_link_receive_packets_total"
LINK_TRANSMIT_PACKETS = "inferslice_link_transmit_packets_total"
LINK_RECEIVE_DROPS = "inferslice_link_receive_drops_total"
LINK_TRANSMIT_DROPS = "inferslice_link_transmit_drops_total"
LINK_RECEIVE_ERRORS = "inferslice_link_receive_errors_total"
LINK_TRANSMIT_ERRORS = "inferslice_link_transmit_errors_total"
LINK_CAP_BPS = "inferslice_link_cap_bits_per_second"  # {slice,pop,link,direction}
# The interface's physical rate (a WAN link's provisioned capacity), where declared: what it carries at most with no cap binding.
LINK_CAPACITY_BPS = "inferslice_link_capacity_bits_per_second"  # {slice,pop,link}
HTB_OVERLIMITS = "inferslice_htb_overlimits_total"  # {slice,pop,link,direction}
HTB_BACKLOG_BYTES = "inferslice_htb_backlog_bytes"
HTB_BACKLOG_PACKETS = "inferslice_htb_backlog_packets"
TUNNEL_RECEIVE_BYTES = "inferslice_tunnel_receive_bytes_total"  # {slice,pop,peer_pop}
TUNNEL_TRANSMIT_BYTES = "inferslice_tunnel_transmit_bytes_total"
POP_RTT = "inferslice_pop_rtt_seconds"  # histogram {pop,peer_pop}
# One series per WAN link a slice's replicas reach the gateway over, valued at its declared RTT:
# pop/link name the link's counters at its gateway-side end, peer_pop the far end (joins the probes).
SLICE_WAN_PATH_RTT = "inferslice_slice_wan_path_rtt_seconds"  # {slice,pop,peer_pop,link}

# -- GPU (exporters/gpu) ----------------------------------------------------------------------
GPU_UTILIZATION = "inferslice_gpu_utilization_ratio"  # {pop,gpu}
GPU_MEMORY_USED = "inferslice_gpu_memory_used_bytes"  # {pop,gpu}
GPU_MEMORY_TOTAL = "inferslice_gpu_memory_total_bytes"
GPU_POWER = "inferslice_gpu_power_watts"
GPU_ENERGY = "inferslice_gpu_energy_joules_total"  # {slice}: NVML energy split over the slices' processes ("unattributed": none)
GPU_ALLOCATED_FRACTION = "inferslice_gpu_allocated_fraction"  # {slice,pop,replica,gpu}
SLICE_GPU_QUOTA = "inferslice_slice_gpu_quota"  # {slice} in GPUs
SLICE_GPU_MEMORY_USED = "inferslice_slice_gpu_memory_used_bytes"  # {slice}
REPLICA_GPU_SHARE = "inferslice_replica_gpu_share_ratio"  # {slice,pop,replica}: effective/allocated, 1 = unimpeded

# -- engine (exporters/engine), per slice, merged over replicas ------------------------------
ENGINE_TTFT = "inferslice_engine_time_to_first_token_seconds"  # histogram {slice}
ENGINE_ITL = "inferslice_engine_inter_token_latency_seconds"
ENGINE_TPOT = "inferslice_engine_time_per_output_token_seconds"
ENGINE_E2E = "inferslice_engine_e2e_request_latency_seconds"
ENGINE_QUEUE_TIME = "inferslice_engine_request_queue_time_seconds"
ENGINE_RUNNING = "inferslice_engine_requests_running"  # {slice}
ENGINE_WAITING = "inferslice_engine_requests_waiting"
ENGINE_KV_CACHE_USAGE = "inferslice_engine_kv_cache_usage_ratio"  # {slice,stat=max|mean}
ENGINE_PREFIX_CACHE_HIT = "inferslice_engine_prefix_cache_hit_ratio"
ENGINE_PREEMPTIONS = "inferslice_engine_preemptions_total"
ENGINE_PROMPT_TOKENS = "inferslice_engine_prompt_tokens_total"
ENGINE_GENERATION_TOKENS = "inferslice_engine_generation_tokens_total"
ENGINE_REQUEST_SUCCESS = "inferslice_engine_request_success_total"  # {slice,finished_reason}
SLICE_REPLICAS = "inferslice_slice_replicas"  # {slice} replicas serving
SLICE_REPLICAS_MAX = "inferslice_slice_replicas_max"  # {slice} the tier's ceiling
SERVE_ONGOING = "inferslice_serve_ongoing_requests"  # {slice} at the router (running + queued)
SERVE_QUEUED = "inferslice_serve_queued_requests"  # {slice} held back by the router
SERVE_TARGET_REPLICAS = "inferslice_serve_target_replicas"  # {slice}
SLO_TTFT_THRESHOLD = "inferslice_slo_ttft_seconds"  # {slice}
SLO_TTFT_GOOD = "inferslice_slo_ttft_good_requests_total"  # {slice} requests whose TTFT met the SLO
SLO_TTFT_REQUESTS = "inferslice_slo_ttft_requests_total"  # {slice}
SLO_TTFT_ATTAINMENT = "inferslice_slo_ttft_attainment_ratio"  # {slice} good/requests since start
TARGET_UP = "inferslice_target_up"  # {slice,pop,replica,target}

# -- every exporter ---------------------------------------------------------------------------
SOURCE_UP = "inferslice_source_up"  # {source}
SOURCE_SCRAPE_DURATION = "inferslice_source_scrape_duration_seconds"  # {source}

# -- client-perceived (exporters/requests): OpenTelemetry GenAI names, as Prometheus writes them
CLIENT_TTFT = "gen_ai_client_operation_time_to_first_chunk_seconds"  # histogram {slice,...}
CLIENT_TPOT = "gen_ai_client_operation_time_per_output_chunk_seconds"
CLIENT_DURATION = "gen_ai_client_operation_duration_seconds"
CLIENT_TOKENS = "gen_ai_client_token_usage"  # histogram {gen_ai_token_type}

# -- diagnosis API and control ----------------------------------------------------------------
DIAGNOSIS_REGIME = "inferslice_diagnosis_regime"  # {slice,regime} 1 for the current regime
DIAGNOSIS_CONFIDENCE = "inferslice_diagnosis_confidence"  # {slice}
DIAGNOSIS_REQUESTS = "inferslice_diagnosis_window_requests"  # {slice} requests the latest window's TTFT quantiles rest on
DIAGNOSIS_EPISODES = "inferslice_diagnosis_episodes_total"  # {slice,regime}
# {slice,resource,stat}: seconds of the current window's statistic (ttft_p50, ttft_p99, tpot_p50, tpot_p99)
# attributed to resource (queue, network, compute, base); the four resources sum to the observed statistic.
LATENCY_ATTRIBUTION = "inferslice_latency_attribution_seconds"
CONTROL_ACTIONS = "inferslice_control_actions_total"  # {slice,kind,outcome}
CONTROL_DESIRED = "inferslice_control_desired"  # {slice,kind} latest decided target (replicas, cap bit/s)
CONTROL_APPLIED = "inferslice_control_applied"  # {slice,kind} latest applied target
CONTROL_FORECAST = "inferslice_control_forecast_requests_per_second"  # {slice,bound=mean|upper} one cold start ahead
CONTROL_ARRIVALS = "inferslice_control_arrivals_requests_per_second"  # {slice} measured in the latest window
CONTROL_AT_CEILING = "inferslice_control_at_ceiling"  # {slice} 1 while binding at the replica ceiling / quota
CONTROL_LAST_TICK = "inferslice_control_last_tick_timestamp_seconds"
API_REQUESTS = "inferslice_api_requests_total"  # {method,route,status} requests served by the diagnosis API
API_REQUEST_DURATION = "inferslice_api_request_duration_seconds"  # histogram {method,route}
