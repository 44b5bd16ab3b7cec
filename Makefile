# make run: set everything up and serve the webhook on https://127.0.0.1:8443.
# make test: set everything up and run the whole suite.
# make help: every target, one line each (from the "## " note after its name).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.requirements-installed
BIND ?= 127.0.0.1:8443
POLICY_DIR ?= policies
# A terminal reads gunicorn's text layout better; the server's own default is JSON lines.
LOG_FORMAT ?= text
CERT_DIR := certs
SUDO := $(shell test "$$(id -u)" -eq 0 || echo sudo)

.PHONY: run test lint format certs venv clean deploy-check bench soak help

venv: $(STAMP) ## the virtualenv .venv: pinned requirements, and gpu-admission installed editable

$(STAMP): requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
	@# The project itself, editable, for the gpu-admission command (its pins are installed above).
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

certs: $(STAMP) ## development CA and serving certificate in certs/, kept while valid
	@$(BIN)/python -m webhook.certs dev --dir $(CERT_DIR)

run: certs ## serve the webhook on https://127.0.0.1:8443 (BIND=, POLICY_DIR= override)
	@echo "Serving the GPU admission webhook on https://$(BIND) with the policies in $(POLICY_DIR)/"
	@echo "CA certificate: $(CURDIR)/$(CERT_DIR)/ca.crt"
	@echo "Try it:  curl --cacert $(CERT_DIR)/ca.crt -H 'Content-Type: application/json' \\"
	@echo "           --data @examples/review-fractional-pod.json https://$(BIND)/mutate"
	BIND=$(BIND) POLICY_DIR=$(POLICY_DIR) LOG_FORMAT=$(LOG_FORMAT) exec $(BIN)/gunicorn -c python:webhook.server.gunicorn_conf

test: $(STAMP) ## lint, then the whole suite (about 8 minutes on 2 cores)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

# The benchmark (bench/README.md): the server as `make run` starts it, against the same stack
# answering a fixed review, under Debian's wrk. BENCH_ARGS="--check" fails on a missed target;
# "--quick" shortens every run; "--readme" copies the figures into bench/README.md.
bench: certs ## the benchmark, bench/README.md (about 25 minutes; BENCH_ARGS=--quick, --check)
	@command -v wrk >/dev/null || command -v apt-get >/dev/null || { \
		echo "bench: the load generator wrk is not installed: install it from your system's packages"; \
		exit 1; }
	@command -v wrk >/dev/null || { \
		echo "bench: installing wrk, the load generator (Debian package)"; \
		$(SUDO) apt-get install -y -q wrk || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q wrk; }; }
	$(BIN)/python -m bench $(BENCH_ARGS)

# checkov, the security lint of deploy/, in a virtualenv of its own: its pinned dependencies
# clash with constraints.txt. tests/test_deploy.py asks for this target, so `make test` runs
# the lint too.
CHECKOV_VENV := $(VENV)/checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.requirements-installed
.PHONY: checkov
checkov: $(CHECKOV_STAMP) ## checkov in a virtualenv of its own, .venv/checkov

$(CHECKOV_STAMP): deploy/checkov/requirements.txt
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r deploy/checkov/requirements.txt
	@touch $@

# The long runs of the reliability suites (README, Reliability), each printing its figures:
# 100,000 fuzzed reviews in-process, the hostile-clients suite at full size, the adversarial
# matrix, a hundred policy edits under load, and a million distinct pods against the workers'
# memory bound. About 45 minutes on 2 cores.
soak: $(STAMP) ## the long reliability runs, each printing its figures (about 45 minutes)
	$(BIN)/python -m tests.fuzz.soak --cases 100000
	HOSTILE_IDLE=500 HOSTILE_SLOW_HEADS=100 HOSTILE_HALF_BODIES=50 HOSTILE_RATE=200 \
		HOSTILE_REVIEWS=1000 HOSTILE_REQUEST_SECONDS=10 \
		$(BIN)/python -m pytest -q -s tests/test_hostile_clients.py
	$(BIN)/python -m tests.soak.adversarial
	RELOAD_EDITS=100 $(BIN)/python -m pytest -q -s tests/test_reload_under_load.py
	$(BIN)/python -m tests.soak.distinct_pods --reviews 1000000

# Builds deploy/ with kubectl kustomize and checks it: schemas, rules, settings, matchConditions,
# NetworkPolicies, and checkov's Kubernetes checks on every overlay (offline; any finding fails).
deploy-check: $(STAMP) $(CHECKOV_STAMP) ## build and check every deploy/ overlay, offline
	$(BIN)/python -m pytest tests/test_deploy.py -q

lint: $(STAMP) ## ruff (lint and format check) and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP) ## fix the style: ruff format, then ruff check --fix
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis

# The "## " note after each target's name, as `make help` prints it; the default goal stays the
# first target above.
help: ## this list
	@awk 'BEGIN { FS = ":[^#]*## " } /^[a-z-]+:[^=]*## / { printf "  make %-13s %s\n", $$1, $$2 }' \
		$(firstword $(MAKEFILE_LIST))
