# Node Maintenance Operator — developer entry points.
# `make demo` runs the main job; `make test` runs every test (unit, upstream validators, end to end).

PYTHON     ?= python3
VENV       := .venv
PY         := $(VENV)/bin/python
PYTEST     := $(VENV)/bin/pytest
export PYTHONPATH := $(CURDIR)/hack
# Everything the tests need from the OS, installed only when missing.
SYSTEM_PACKAGES := buildah skopeo umoci docker-registry iproute2 mmdebstrap containerd runc containernetworking-plugins iptables conntrack busybox-static

.PHONY: help venv system-deps tools image-cache lock render check lint test unit demo demo-transcript bench bench-smoke soak simulate simulate-reverts clean

help:
	@echo "make demo   - OLM installs the operator from our images on a local cluster, which drains a node and hands it back"
	@echo "             (KEEP=1 leaves the cluster running; transcript in build/demo-transcript.md)"
	@echo "make demo-transcript - run the demo and rewrite docs/demo-transcript.md"
	@echo "make test   - unit tests, upstream validators and end-to-end tests on a local control plane"
	@echo "             (each test's duration in build/test-report.xml)"
	@echo "make bench  - the drain measured against kubectl drain (one node, twenty at once), where its time goes, API cost,"
	@echo "             scale, fleets of 1000 and of 5000 queued under a policy (Kubernetes' limit), conversion"
	@echo "             (report in bench/results: report.json, report.txt, PNG charts)"
	@echo "make soak   - NodeMaintenances at random for 30 min (SOAK_MINUTES) while the operator is killed and its"
	@echo "             link to the API server faulted; report in build/soak (report.json, report.txt)"
	@echo "make simulate - the deterministic simulation searches for histories that break a promise, for 60 min"
	@echo "             (SIMULATE_MINUTES); report in build/simulation (report.json, report.txt)"
	@echo "make simulate-reverts - each known break's fix undone in turn, the search given REVERT_MINUTES (10) to find it;"
	@echo "             table in build/simulation/reverts.txt"
	@echo "make render - re-render CRD, bundle, catalog, OLM deploy manifests, API docs and monitoring files; make check verifies them"
	@echo "make lint   - import layers, types and style (also the first step of make test)"

# uv resolves and installs the test environment from its cache in seconds (pip took a minute); pip stays in
# the venv, because hack/install-app.sh builds the operator image's wheels with it.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv
	$(VENV)/bin/uv pip install --quiet --python $(PY) --upgrade pip -e '.[test]'
	touch $@

venv: $(VENV)/.installed

system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

tools: venv
	$(PY) -m devcluster build

# The Python bases and every release's operator image, built into the image cache (outside the work tree, keyed by
# their inputs) before any test or the demo pushes them: a cold build never counts against a test's time limit.
image-cache: venv system-deps
	$(PY) -m devcluster images

# The operator image's dependencies, and the build backend its wheel is built with, pinned with their hashes for
# every platform the image is built for (hack/install-app.sh installs exactly these); run after changing
# pyproject.toml's dependencies or build-system.
lock: venv
	$(VENV)/bin/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes --no-header --quiet -o hack/operator-image.lock
	$(PY) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))' | \
	  $(VENV)/bin/uv pip compile - --universal --python-version 3.11 --generate-hashes --no-header --quiet -o hack/build-backend.lock

render: venv
	$(VENV)/bin/nmo-pack all

check: venv
	$(VENV)/bin/nmo-pack all --check

unit: venv
	$(PYTEST) -q tests/unit

# The layers (import-linter's contracts), the types (mypy, of the tests and the tools too) and the style (ruff),
# from pyproject.toml's configuration. mypy keeps its incremental cache beside the project's other caches, outside
# the work tree, so that a fresh clone does not type-check all over again (about 25 s of one core): it checks each
# cached module against its source's hash, and a cache of another mypy version or other options is not used.
lint: export MYPY_CACHE_DIR := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/node-maintenance-operator/mypy
lint: venv
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy operator/node_maintenance operator/node_maintenance_cli operator/node_maintenance_packaging tests hack bench soak simulation
	$(VENV)/bin/ruff check operator hack tests bench soak simulation setup.py

# The end-to-end tests mostly wait on controllers: they run in this many processes, each with a control
# plane of its own; tests/conftest.py keeps the tests of a shared setup (the real-node cluster) in one.
# Three, on two cores: more processes only made the cores busier. Measured on a warm machine, `make test` took
# 20.1 and 20.6 min with three (31 min of CPU), 21.1 with four (38) and 26.6 with five (48): while the cores are saturated,
# every wait polls longer and every controller retries more, so each added process costs more CPU than it overlaps.
# Each test's outcome and duration go to build/test-report.xml (JUnit), which says where the run's time goes.
TEST_WORKERS ?= 3
test: venv lint system-deps tools image-cache
	$(PYTEST) -q -ra -n $(TEST_WORKERS) --dist loadscope --junitxml=$(CURDIR)/build/test-report.xml

# The demo's transcript goes to build/ unless DEMO_TRANSCRIPT names another file; KEEP=1 leaves the cluster up.
DEMO_TRANSCRIPT ?= $(CURDIR)/build/demo-transcript.md
demo: venv system-deps tools image-cache
	$(PY) -m demo --transcript $(DEMO_TRANSCRIPT) $(if $(KEEP),--keep)

demo-transcript:
	$(MAKE) demo DEMO_TRANSCRIPT=$(CURDIR)/docs/demo-transcript.md KEEP=

# The bench runs control planes with KWOK nodes and nothing else: on a fresh machine it builds only their tools,
# not OLM's, operator-sdk's or Helm's, which it never runs.
bench: venv
	$(PY) -m devcluster build --control-plane
	$(PY) -m bench

# One round of 30 pods, the timeline of one such drain and a fleet of 200 queued maintenances ten at a time: checks the report is
# written and well formed (tests/e2e/test_bench_smoke.py runs it in `make test`).
bench-smoke: venv
	$(PY) -m devcluster build --control-plane
	$(PY) -m bench --smoke --out $(CURDIR)/build/bench-smoke

# NodeMaintenances created and deleted at random while the operator is SIGKILLed and its link to the API server
# meets latency, resets and blackouts; fails on any invariant violation or memory growth above 10%.
# tests/e2e/test_soak.py runs a one-minute soak in `make test`, on its own cluster.
SOAK_MINUTES ?= 30
soak: venv tools
	$(PY) -m soak --minutes $(SOAK_MINUTES) --out $(CURDIR)/build/soak

# The operator's own runtime against a simulated API server and cluster on simulated time, while hypothesis draws
# users' changes, faults, restarts and clock jumps; every promise is checked after every simulated second.
# tests/simulation runs a bounded search from fixed and fresh seeds in `make test`. simulate-reverts asks whether the
# search finds by itself each break a review found, with its fix undone in a copy of the code.
SIMULATE_MINUTES ?= 60
REVERT_MINUTES ?= 10
# SIMULATE_ARGS: more arguments for both, such as --machine=windowed (python -m simulation --help).
SIMULATE_ARGS ?=
simulate: venv
	$(PY) -m simulation --minutes $(SIMULATE_MINUTES) --report $(CURDIR)/build/simulation $(SIMULATE_ARGS)

simulate-reverts: venv
	$(PY) -m simulation.reverts --minutes $(REVERT_MINUTES) --report $(CURDIR)/build/simulation $(SIMULATE_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info
