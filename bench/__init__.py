"""All benchmarks (``inferslice.bench``); committed results stay in ``bench/results/``. Imported by nothing below it."""
