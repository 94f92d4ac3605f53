"""``inferslice load``'s dataset flags (vllm bench serve's names) reach the workload."""

from __future__ import annotations

import argparse

import pytest

from inferslice.cli.load import add_arguments, build_config
from inferslice.errors import ConfigError


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(["--url", "http://127.0.0.1:9", "--model", "tiny", "--concurrency", "2", "--num-prompts", "3", *argv])


def test_random_dataset_flags() -> None:
    cfg = build_config(parse("--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "16",
                             "--random-range-ratio", "0.25"))
    w = cfg.workload
    assert (w.dataset, w.random_input_len, w.random_output_len, w.random_range_ratio) == ("random", 32, 16, 0.25)
    assert cfg.probe_server


def test_defaults_are_sharegpt_like_and_probing() -> None:
    cfg = build_config(parse())
    assert cfg.workload.dataset == "sharegpt-like" and cfg.probe_server
    assert not build_config(parse("--no-server-probe")).probe_server


def test_bad_ratio_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        build_config(parse("--dataset-name", "random", "--random-range-ratio", "1.5"))
