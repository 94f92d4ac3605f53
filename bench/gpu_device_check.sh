#!/usr/bin/env bash
# GPU device check (one call, <= 10 min), for a machine with an NVIDIA GPU; see bench/gpu_device_check.py.
#   bench/gpu_device_check.sh [OUTDIR]     (OUTDIR defaults to $OUT/gpu-check, else /tmp/gpu-device-check)
# Uses the first python that imports vllm (a CUDA vLLM brings torch, aiohttp, numpy, pydantic,
# prometheus_client and nvidia-ml-py: everything inferslice's GPU and load paths import), else one that
# imports torch, else python3; $PYTHON overrides. Nothing is installed: the device machine has no registry.
# NVML comes from nvidia-ml-py or, failing that, vLLM's vendored copy (vllm/third_party/pynvml.py).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUTDIR=${1:-${OUT:+$OUT/gpu-check}}
OUTDIR=${OUTDIR:-/tmp/gpu-device-check}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3 /usr/bin/python3 /opt/conda/bin/python "$ROOT/.venv/bin/python"; do
    command -v "$cand" >/dev/null 2>&1 || continue
    if "$cand" -c 'import vllm' 2>/dev/null; then PY=$cand; break; fi
    if [ -z "$PY" ] && "$cand" -c 'import torch' 2>/dev/null; then PY=$cand; fi
  done
  PY=${PY:-python3}
fi
case "$PY" in */*) PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY") ;; esac  # absolute: the check runs from its tree
# inferslice without installing it: the symlink tree .ci/lint.sh builds (folders mapped as inferslice.<folder>).
TREE=$(mktemp -d /tmp/isdev-XXXX)
mkdir -p "$TREE/inferslice"
for f in "$ROOT"/inferslice/*; do ln -s "$f" "$TREE/inferslice/$(basename "$f")"; done
for d in common exporters collectors dashboards bottleneck control deploy testbed service cli bench; do
  [ -f "$ROOT/$d/__init__.py" ] && ln -s "$ROOT/$d" "$TREE/inferslice/$d"
done
echo "python: $PY; out: $OUTDIR"
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi --query-gpu=index,name,memory.total,power.draw,enforced.power.limit --format=csv | tee "$OUTDIR/gpus.csv"
else
  echo "nvidia-smi: not on PATH (the NVML path below still tries libnvidia-ml)"
fi
# What inferslice's GPU source and the check import; without them nothing below can start.
missing=$("$PY" - <<'PY'
import importlib.util
need = ("prometheus_client", "pydantic", "yaml")
print(" ".join(m for m in need if importlib.util.find_spec(m) is None))
PY
)
if [ -n "$missing" ]; then
  msg="$PY lacks $missing (a CUDA vLLM install brings them; or PYTHON=... a venv that has them)"
  echo "$msg" >&2
  printf '{"skipped": "%s", "python": "%s"}\n' "$msg" "$PY" > "$OUTDIR/report.json"
  rm -rf "$TREE"
  exit 2
fi
# The check keeps to its own budget (540 s); timeout is the backstop: TERM lets it stop its engines.
# Run from the tree: from the repository root, `-m` would find ./inferslice (no bench/ in it) first.
(cd "$TREE" && PYTHONPATH="$TREE" timeout -k 15 570 "$PY" -m inferslice.bench.gpu_device_check --out "$OUTDIR")
rc=$?
rm -rf "$TREE"
echo "exit $rc (0 all checks held, 1 a check failed or NVML errored, 2 skipped: something missing); report: $OUTDIR/report.json"
exit $rc
