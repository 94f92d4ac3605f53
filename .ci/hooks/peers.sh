#!/usr/bin/env bash
# CI hook: the diagnosis peers that need environments of their own. `make rcaeval-venv` (BARO, NSigma,
# CIRCA: RCAEval 1.8.1 on a current causal-learn) and `make rcd-venv` (RCD: causal-learn 0.1.2.3 with
# RCAEval's patch, bench/rcaeval-rcd/) build them in the clone, then tests/bench/test_rca_peers_real.py
# runs CIRCA and RCD for real. Those tests skip in `make test` for want of exactly these installs, so a
# failed install fails the hook. About a minute warm (pip cache), a few cold, on this 2-core machine.
set -uo pipefail
VENV_BIN=${VENV_BIN:-.venv/bin}
WORK=${CI_WORK:-$(mktemp -d)}
JUNIT_DIR=${CI_JUNIT_DIR:-$WORK/junit}
mkdir -p "$JUNIT_DIR"
SECONDS=0
for target in rcaeval-venv rcd-venv; do
  echo "peers: make $target"
  if ! make --no-print-directory "$target" >"$WORK/$target.log" 2>&1; then
    echo "peers: FAILED: make $target:" >&2; grep -v "^WARNING: Location" "$WORK/$target.log" | tail -8 >&2
    exit 1
  fi
  echo "peers: $target ready after ${SECONDS}s"
done
INFERSLICE_RCAEVAL_PYTHON="$PWD/.venv-rcaeval/bin/python" INFERSLICE_RCD_PYTHON="$PWD/.venv-rcd/bin/python" \
  "$VENV_BIN/pytest" -q -p no:cacheprovider tests/bench/test_rca_peers_real.py -rA \
  --junitxml="$JUNIT_DIR/peers.xml"
rc=$?
echo "peers: ${SECONDS}s in all"
exit $rc
