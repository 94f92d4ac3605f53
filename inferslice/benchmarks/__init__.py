"""Benchmarks behind ``inferslice bench``; each reports ratios against a baseline run in the same process.

``bench/*.py`` are thin wrappers around these modules. Each module offers ``run(...) -> dict`` (a
JSON-able result) and ``markdown(result) -> str``.
"""
