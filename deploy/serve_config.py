"""A tier's Ray Serve config (the RayService ``serveConfigV2`` YAML), and the check of what Ray Serve
accepts.

Each tier serves vLLM through Ray Serve LLM (``ray.serve.llm:build_openai_app``): one application,
one ``LLMConfig`` whose ``deployment_config`` carries the tier's admission limit
(``max_ongoing_requests``) and autoscaling bounds (replicas_min..replicas_max, the tier's target),
and whose ``engine_kwargs`` stream weights with ``load_format: runai_streamer``. A controller that
takes a tier over sets ``num_replicas`` and removes ``autoscaling_config`` (Ray Serve rejects both
at once): the deployment config inside ``args`` is the one place replicas live, so no deployment
name has to be guessed.

``check_serve_config`` mirrors the rules of Ray Serve's ``ServeDeploySchema`` /
``DeploymentSchema`` / ``AutoscalingConfig`` and Ray Serve LLM's ``LLMConfig`` that a generated or
patched config can break (field names, types and bounds, the ``num_replicas``/``autoscaling_config``
exclusion, min <= initial <= max, unique names and route prefixes), so a bad patch fails here, not
at KubeRay's reconcile.
"""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from inferslice.errors import PermanentError
from inferslice.topology import Tier, Topology

SERVE_PORT = 8000
# The tiers file's timing is the testbed's, compressed ~1/10 from Ray's defaults (Timing's field notes):
# a real cluster gets it back at full length, the testbed-like overlay keeps it compressed.
TESTBED_TIME_COMPRESSION = 10.0
LLM_IMPORT_PATH = "ray.serve.llm:build_openai_app"


class ServeConfigError(PermanentError):
    """The serve config is not one Ray Serve would accept."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AutoscalingConfig(_Strict):
    min_replicas: int = Field(default=1, ge=0)
    initial_replicas: int | None = Field(default=None, ge=0)
    max_replicas: int = Field(default=1, ge=1)
    target_ongoing_requests: float = Field(default=2.0, gt=0)
    metrics_interval_s: float = Field(default=10.0, gt=0)
    look_back_period_s: float = Field(default=30.0, gt=0)
    smoothing_factor: float = Field(default=1.0, gt=0)
    upscale_smoothing_factor: float | None = Field(default=None, gt=0)
    downscale_smoothing_factor: float | None = Field(default=None, gt=0)
    upscaling_factor: float | None = Field(default=None, gt=0)
    downscaling_factor: float | None = Field(default=None, gt=0)
    downscale_delay_s: float = Field(default=600.0, ge=0)
    upscale_delay_s: float = Field(default=30.0, ge=0)
    aggregation_function: Literal["mean", "max", "min"] = "mean"

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingConfig:
        if self.min_replicas > self.max_replicas:
            raise ValueError("min_replicas exceeds max_replicas")
        if self.initial_replicas is not None and not self.min_replicas <= self.initial_replicas <= self.max_replicas:
            raise ValueError("initial_replicas is outside [min_replicas, max_replicas]")
        return self


class RayActorOptions(_Strict):
    runtime_env: dict[str, Any] | None = None
    num_cpus: float | None = Field(default=None, ge=0)
    num_gpus: float | None = Field(default=None, ge=0)
    memory: float | None = Field(default=None, ge=0)
    resources: dict[str, float] | None = None
    accelerator_type: str | None = None


class _DeploymentOptions(_Strict):
    num_replicas: int | Literal["auto"] | None = None
    max_ongoing_requests: int | None = Field(default=None, gt=0)
    max_queued_requests: int | None = Field(default=None, ge=-1)
    user_config: dict[str, Any] | None = None
    autoscaling_config: AutoscalingConfig | None = None
    graceful_shutdown_wait_loop_s: float | None = Field(default=None, ge=0)
    graceful_shutdown_timeout_s: float | None = Field(default=None, ge=0)
    health_check_period_s: float | None = Field(default=None, gt=0)
    health_check_timeout_s: float | None = Field(default=None, gt=0)
    ray_actor_options: RayActorOptions | None = None

    @model_validator(mode="after")
    def _exclusive(self) -> _DeploymentOptions:
        if isinstance(self.num_replicas, int) and self.autoscaling_config is not None:
            raise ValueError("num_replicas and autoscaling_config cannot both be set")
        if isinstance(self.num_replicas, int) and self.num_replicas < 0:
            raise ValueError("num_replicas must be >= 0")
        return self


class DeploymentSchema(_DeploymentOptions):
    name: str = Field(min_length=1)


class ModelLoadingConfig(_Strict):
    model_id: str = Field(min_length=1)
    model_source: str | None = None


class LLMConfigArgs(_Strict):
    """The subset of Ray Serve LLM's ``LLMConfig`` we generate (extra fields rejected on purpose)."""

    model_loading_config: ModelLoadingConfig
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    deployment_config: _DeploymentOptions = Field(default_factory=_DeploymentOptions)
    accelerator_type: str | None = None
    runtime_env: dict[str, Any] | None = None


class LLMServingArgs(_Strict):
    llm_configs: list[LLMConfigArgs] = Field(min_length=1)


class ApplicationSchema(_Strict):
    name: str = Field(min_length=1)
    route_prefix: str | None = "/"
    import_path: str = Field(pattern=r"^[\w.]+[:.][\w]+$")
    runtime_env: dict[str, Any] = Field(default_factory=dict)
    args: dict[str, Any] = Field(default_factory=dict)
    deployments: list[DeploymentSchema] = Field(default_factory=list)

    @model_validator(mode="after")
    def _llm_args(self) -> ApplicationSchema:
        if self.route_prefix is not None and not self.route_prefix.startswith("/"):
            raise ValueError("route_prefix must start with '/'")
        if self.import_path == LLM_IMPORT_PATH:
            LLMServingArgs.model_validate(self.args)
        return self


class HttpOptions(_Strict):
    host: str = "0.0.0.0"
    port: int = Field(default=SERVE_PORT, gt=0, lt=65536)
    request_timeout_s: float | None = None
    keep_alive_timeout_s: float = 5


class ServeDeploySchema(_Strict):
    proxy_location: Literal["Disabled", "HeadOnly", "EveryNode"] = "EveryNode"
    http_options: HttpOptions = Field(default_factory=HttpOptions)
    logging_config: dict[str, Any] | None = None
    applications: list[ApplicationSchema] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> ServeDeploySchema:
        names = [a.name for a in self.applications]
        if len(set(names)) != len(names):
            raise ValueError("application names must be unique")
        prefixes = [a.route_prefix for a in self.applications if a.route_prefix is not None]
        if len(set(prefixes)) != len(prefixes):
            raise ValueError("route prefixes must be unique")
        return self


def check_serve_config(text: str) -> ServeDeploySchema:
    """Parse a ``serveConfigV2`` YAML string and check it; ``ServeConfigError`` names the field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ServeConfigError(f"serveConfigV2 is not YAML: {err}") from None
    try:
        return ServeDeploySchema.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ServeConfigError(f"serveConfigV2 {where}: {first['msg']}") from None


def model_id(topology: Topology) -> str:
    """The served model id clients send (the last path part of the tiers file's model)."""
    return topology.model.rsplit("/", 1)[-1].lower()


def serve_config(topology: Topology, tier: Tier, compressed: bool = False) -> dict[str, Any]:
    t = topology.timing
    k = 1.0 if compressed else TESTBED_TIME_COMPRESSION
    autoscaling = {
        "min_replicas": tier.replicas_min,
        "initial_replicas": max(tier.replicas_min, 1) if tier.replicas_max >= 1 else 0,
        "max_replicas": tier.replicas_max,
        "target_ongoing_requests": tier.target_ongoing_requests,
        "upscale_delay_s": t.upscale_delay_s * k,
        "downscale_delay_s": t.downscale_delay_s * k,
        "look_back_period_s": t.look_back_period_s * k,
    }
    llm_config = {
        "model_loading_config": {"model_id": model_id(topology), "model_source": topology.model},
        "engine_kwargs": {
            # Weights stream from object storage into GPU memory (Run:ai Model Streamer).
            "load_format": "runai_streamer",
            # Half a GPU per replica: vLLM must not claim the other tenant's memory.
            "gpu_memory_utilization": round(0.9 * tier.gpu_per_replica, 3),
        },
        "deployment_config": {
            "max_ongoing_requests": tier.max_ongoing_requests,
            "autoscaling_config": autoscaling,
            # One replica per worker pod: Run:ai gives the pod a GPU fraction Ray counts as one GPU.
            "ray_actor_options": {"num_gpus": 1},
        },
    }
    return {
        # The head pod is the tier's client edge: its Kube-OVN rate annotations are the client caps.
        "proxy_location": "HeadOnly",
        "http_options": {"host": "0.0.0.0", "port": SERVE_PORT},
        "applications": [
            {
                "name": tier.name,
                "route_prefix": "/",
                "import_path": LLM_IMPORT_PATH,
                "args": {"llm_configs": [llm_config]},
            }
        ],
    }


def dump(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False)


def set_replicas(text: str, replicas: int) -> str:
    """The config with the tier's deployment pinned at ``replicas`` (autoscaling off)."""
    data = yaml.safe_load(text)
    for app in data["applications"]:
        for llm in app.get("args", {}).get("llm_configs", []):
            dc = llm.setdefault("deployment_config", {})
            dc.pop("autoscaling_config", None)
            dc["num_replicas"] = replicas
    return dump(data)


def replicas_of(text: str) -> int | None:
    """The pinned replica count of the first LLM deployment (None while autoscaling)."""
    data = yaml.safe_load(text)
    for app in data["applications"]:
        for llm in app.get("args", {}).get("llm_configs", []):
            n = llm.get("deployment_config", {}).get("num_replicas")
            if isinstance(n, int):
                return n
    return None
