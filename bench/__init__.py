"""All benchmarks (``inferslice.bench``), behind ``inferslice bench``; committed results stay in ``bench/results/``.

Each reports ratios against a baseline run in the same process. Each module offers
``run(...) -> dict`` (a JSON-able result) and ``markdown(result) -> str``; ``nvml_probe`` is a
one-off check for a machine with an NVIDIA GPU (``python -m inferslice.bench.nvml_probe``).
Imported by nothing below the application layer.
"""
