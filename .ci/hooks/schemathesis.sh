#!/usr/bin/env bash
# CI hook: schemathesis (all checks, every phase incl. stateful) against a live `inferslice api`
# on 127.0.0.1 with a bearer token; 0 failures required. The work is tests/api/run_schemathesis.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec tests/api/run_schemathesis.sh "${SCHEMATHESIS_MAX_EXAMPLES:-100}" --no-color
