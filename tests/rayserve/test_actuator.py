"""The Ray Serve actuator against Serve's REST API, with the captured ServeInstanceDetails."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from inferslice.actions import Action, ActionKind
from inferslice.control.actuators.base import Actuator, ApplyStatus, PermanentActuatorError, RetryableActuatorError
from inferslice.control.actuators.rayserve import RayServeActuator, config_from_details

RAY = Path(__file__).resolve().parents[1] / "fixtures" / "ray-2.60.0"


class FakeServe:
    """GET answers the captured details; PUT records the config and applies it to deployed_app_config."""

    def __init__(self) -> None:
        self.details: dict[str, Any] = json.loads((RAY / "serve-applications.json").read_text())
        self.puts: list[dict[str, Any]] = []
        self.fail: Exception | None = None

    def __call__(self, url: str, method: str, body: dict[str, Any] | None) -> dict[str, Any]:
        if self.fail is not None:
            raise self.fail
        assert url == "http://127.0.0.1:8265/api/serve/applications/"
        if method == "PUT":
            assert body is not None
            self.puts.append(body)
            for app in body["applications"]:
                self.details["applications"][app["name"]]["deployed_app_config"] = copy.deepcopy(app)
            return {}
        return copy.deepcopy(self.details)


def test_set_replicas_turns_the_tiers_autoscaler_off_and_leaves_the_others() -> None:
    serve = FakeServe()
    act = RayServeActuator("http://127.0.0.1:8265", bounds={"premium": (1, 6)}, http=serve)
    assert isinstance(act, Actuator)
    assert act.observe()["premium"].externally_controlled is False  # captured: premium ran the queue policy
    r = act.apply(Action(ActionKind.SET_REPLICAS, "premium", 4, id="a1"))
    assert r.status is ApplyStatus.APPLIED
    sent = {a["name"]: a for a in serve.puts[-1]["applications"]}
    dep = sent["premium"]["deployments"][0]
    assert dep["num_replicas"] == 4 and "autoscaling_config" not in dep
    original = {a["name"]: a for a in config_from_details(FakeServe().details)["applications"]}
    assert sent["free"] == original["free"] and sent["standard"] == original["standard"]  # sent back as deployed
    assert serve.puts[-1]["http_options"]["host"] == "127.0.0.1"
    again = act.apply(Action(ActionKind.SET_REPLICAS, "premium", 4, id="a1"))
    assert again.status is ApplyStatus.ALREADY_APPLIED and len(serve.puts) == 1
    assert act.observe()["premium"].externally_controlled is True


def test_refusals_are_permanent_and_outages_retryable() -> None:
    serve = FakeServe()
    act = RayServeActuator("http://127.0.0.1:8265", bounds={"premium": (1, 6)}, http=serve)
    for bad in (Action(ActionKind.SET_REPLICAS, "premium", 7, id="b"), Action(ActionKind.SET_REPLICAS, "gold", 1, id="c"),
                Action(ActionKind.SET_REPLICAS, "premium", 1.5, id="d"), Action(ActionKind.SET_CAP, "premium", 1e6, id="e"),
                Action(ActionKind.SET_REPLICAS, "premium", 2)):
        with pytest.raises(PermanentActuatorError):
            act.apply(bad)
    serve.fail = RetryableActuatorError("connection refused")
    with pytest.raises(RetryableActuatorError):
        act.observe()
    assert serve.puts == []
