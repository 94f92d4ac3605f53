"""One exporter per node: ``all_tiers: false`` keeps other nodes' tiers out of this node's exposition."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.engine import EngineSettings, EngineSource, StaticDiscovery, engine_config_from_dict
from inferslice.exporters.text import render_registry
from inferslice.topology import load_topology


def _slices(settings: EngineSettings) -> set[str]:
    registry = CollectorRegistry()
    registry.register(GuardedCollector([EngineSource([StaticDiscovery(())], load_topology(), settings)]))
    text = render_registry(registry).decode()
    return {line.split('slice="', 1)[1].split('"', 1)[0] for line in text.splitlines() if 'slice="' in line and not line.startswith("#")}


def test_every_tier_by_default_and_none_without_targets_when_scoped() -> None:
    assert _slices(EngineSettings()) == {"free", "standard", "premium"}
    assert _slices(EngineSettings(all_tiers=False)) == set()


def test_the_config_key_is_validated() -> None:
    static = [{"url": "http://127.0.0.1:1/metrics", "slice": "free"}]
    assert engine_config_from_dict({"all_tiers": False, "static": static}, None).settings.all_tiers is False
    import pytest

    from inferslice.errors import ConfigError

    with pytest.raises(ConfigError, match=r"engine\.all_tiers"):
        engine_config_from_dict({"all_tiers": "no", "static": static}, None)
