#!/usr/bin/env bash
# CI hook: the real engines. (1) a real vLLM (CPU build, tiny random-weight Llama) behind a tier front:
# tests/engine_real; (2) a real Ray Serve (one application per tier, in `unshare --net`) and the netns
# testbed with premium on Ray Serve (`testbed up --serving premium=ray`): tests/rayserve.
# Installs first: the vLLM venv by testbed/vllm/install_cpu.sh (its own venv, 3.4 GB), the `ray` extra
# into a venv of its own under CI_WORK (see below). An install that fails (registry down, package
# withdrawn) fails the hook, as a failing test does: these tests skip in `make test` for want of
# exactly these installs, and CI must not go green on a skip (.ci/run checks every test ran somewhere:
# CI_JUNIT_DIR). Figures on this 2-core
# machine: vLLM venv 254 s without the pip cache (85 s warm), ray 51 s without the cache (16 s warm),
# real-vLLM test 55-110 s, real-Ray test ~90 s, real-Ray testbed test ~40 s (testbed up 14-19 s) plus
# its wait for the testbed lock.
set -uo pipefail
VENV_BIN=${VENV_BIN:-.venv/bin}
WORK=${CI_WORK:-$(mktemp -d)}
JUNIT_DIR=${CI_JUNIT_DIR:-$WORK/junit}
mkdir -p "$JUNIT_DIR"
rc=0
SECONDS=0

echo "real-engine: installing the vLLM venv (testbed/vllm/install_cpu.sh)"
if testbed/vllm/install_cpu.sh "$WORK/venv-vllm" >"$WORK/vllm-install.log" 2>&1; then
  echo "real-engine: vLLM venv ready after ${SECONDS}s ($(du -sh "$WORK/venv-vllm" | cut -f1))"
  t=$SECONDS
  INFERSLICE_VLLM_VENV="$WORK/venv-vllm" "$VENV_BIN/pytest" -q -p no:cacheprovider tests/engine_real -rA \
    --junitxml="$JUNIT_DIR/real-engine-vllm.xml" || rc=1
  echo "real-engine: real-vLLM test took $((SECONDS - t))s"
else
  echo "real-engine: FAILED: the vLLM install failed, so the real-vLLM test cannot run:" >&2; tail -5 "$WORK/vllm-install.log" >&2
  rc=1
fi

t=$SECONDS
# Ray 2.60 cannot run from a path with a space: its LD_PRELOAD of the bundled jemalloc and the shell
# command that starts ray_client_server split the venv's path ('ray start' exits 1, exit 127 inside),
# and CI's clone has one. So the ray extra goes into a venv of its own under $WORK, with this clone
# installed editable; a user's clone with a space in its path meets the same Ray limitation.
RAY_VENV="$WORK/venv-ray"
case "$PWD" in *" "*) echo "real-engine: the clone's path has a space: Ray runs from $RAY_VENV" ;; esac
echo "real-engine: installing the ray extra (with the test extra) into $RAY_VENV"
if python3 -m venv "$RAY_VENV" && "$RAY_VENV/bin/pip" install -q -e '.[test,ray]' >"$WORK/ray-install.log" 2>&1; then
  echo "real-engine: ray installed in $((SECONDS - t))s"
  t=$SECONDS
  "$RAY_VENV/bin/pytest" -q -p no:cacheprovider tests/rayserve tests/bench/test_control_backend.py tests/bench/test_control_peers.py -rA \
    --junitxml="$JUNIT_DIR/real-engine-ray.xml" || rc=1
  echo "real-engine: Ray Serve tests took $((SECONDS - t))s"
else
  echo "real-engine: FAILED: the ray extra did not install, so the real-Ray tests cannot run:" >&2; tail -5 "$WORK/ray-install.log" >&2
  rc=1
fi
echo "real-engine: ${SECONDS}s in all"
exit $rc
