# The two README commands are `make demo` and `make test`; both set up whatever is missing first.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
APT_PACKAGES := prometheus prometheus-alertmanager prometheus-node-exporter victoria-metrics openvswitch-switch iperf3 iproute2 python3-venv chromium fonts-dejavu-core
OUT ?= demo-out
# DEMO_PHASE_S=N: every phase of the demo story lasts N seconds (a short story, same code path; default: the full story)
DEMO_PHASE_S ?=

.PHONY: setup apt venv test lint demo bench clean rcaeval-venv

setup: apt venv

apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

lint: venv
	VENV_BIN=$(abspath $(VENV))/bin .ci/lint.sh

test: setup lint
	$(VENV)/bin/pytest -q

demo:
	@if [ "$$(id -u)" != 0 ]; then echo "make demo: the testbed needs root (network namespaces, HTB qdiscs, TUN devices); run it as root. Nothing was built." >&2; exit 1; fi
	@$(MAKE) --no-print-directory setup
	$(VENV)/bin/inferslice demo --out $(OUT)$(if $(DEMO_PHASE_S), --phase-s $(DEMO_PHASE_S))

bench: setup
	$(PY) -m pip install -q -e '.[ray]'  # the control bench's ray_serve_default runs Ray Serve's own policy code
	$(VENV)/bin/inferslice bench all --out bench/results

# RCAEval (the peers of `inferslice bench diagnosis --corpus`) in its own environment: its dependencies
# stay out of the project's venv; the benchmark runs it as a subprocess.
rcaeval-venv: venv
	@test -x .venv-rcaeval/bin/python || $(PY) -m venv .venv-rcaeval
	.venv-rcaeval/bin/pip install -q rcaeval==1.8.1 numpy pandas scikit-learn requests tqdm matplotlib networkx causal-learn

clean:
	-$(VENV)/bin/inferslice testbed down
	rm -rf .typecheck .pytest_cache .mypy_cache .ruff_cache
