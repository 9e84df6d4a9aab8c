# inferops.vllm_dr — every gate CI runs is `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

ROOT := $(CURDIR)
VENV ?= $(ROOT)/.venv
BIN := $(VENV)/bin
COLLECTIONS := $(ROOT)/build/collections
REPORTS := $(ROOT)/reports
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider

export VLLM_DR_VENV := $(VENV)
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export PATH := $(BIN):$(PATH)

.PHONY: help deps test observability ci-lint docs-venv docs-lint docs docs-site test-k8s k8s-build k8s-up k8s-down demo sanity lint unit integration molecule build bench-cache bench-sweep bench-lab lab clean

help:
	@echo "make test         every gate: sanity, ansible-lint, unit, integration"
	@echo "make demo         the lab drill: incident reproduced, runbook run, validation shown"
	@echo "make sanity|lint|unit|integration|molecule|observability|ci-lint|docs-lint|docs-site   one gate"
	@echo "make docs         the documentation site, for a reader: build/docs/html/index.html"
	@echo "make test-k8s     only the Kubernetes suite (its own control plane, or the cluster KUBECONFIG names)"
	@echo "make k8s-up|k8s-down   the suite's control plane by hand (kubeconfig path printed by k8s-up)"
	@echo "make build        the Galaxy tarball"
	@echo "make bench-cache  token cache benchmark (1,000,000 rows)"
	@echo "make bench-sweep  session sweep against redis-cli (1,000,000 sessions)"

deps:
	@bash tools/bootstrap.sh
	@mkdir -p $(COLLECTIONS)/ansible_collections/inferops $(REPORTS)
	@ln -sfn $(ROOT) $(COLLECTIONS)/ansible_collections/inferops/vllm_dr

# -k: every gate runs even when an earlier one is red; make still exits non-zero.
test: deps
	@$(MAKE) --no-print-directory -k sanity lint unit integration molecule observability ci-lint docs-lint docs-site

sanity: deps
	bash tools/ansible-test.sh sanity --python 3.11 --color no

lint: deps
	$(BIN)/ansible-lint --profile production

unit: deps
	$(PYTEST) tests/unit --junitxml=$(REPORTS)/unit.xml

# The Kubernetes suite (tests/integration/k8s) runs here too; its control plane is built once and cached
# (first, outside pytest's per-test time limit), unless KUBECONFIG names a cluster to use instead.
K8S_BUILD := $(if $(KUBECONFIG),@true,bash tools/k8s/build.sh >/dev/null)

integration: deps
	$(K8S_BUILD)
	$(PYTEST) tests/integration --junitxml=$(REPORTS)/integration.xml
	bash tools/ansible-test.sh integration --local --python 3.11 --color no

# One Molecule scenario per role (extensions/molecule/<role>), on the incident lab, verified with testinfra.
molecule: deps
	$(BIN)/molecule test --all

# The alerting rules and the runbook's metrics (extensions/observability/), with promtool (built from the Go module
# proxy once, cached in ~/.cache/inferops-vllm-dr): the PrometheusRule manifest agrees with the rules file, the rules
# check, their unit tests pass (each alert fires on the incident's series, quiet after the repair), and the textfile
# that drills on the lab write passes `promtool check metrics` (tests/observability).
PROMTOOL := bash tools/observability/promtool.sh
observability: deps
	$(BIN)/python tools/observability/render_rules.py --check
	$(PROMTOOL) check rules extensions/observability/prometheus/vllm-dr.rules.yml
	$(PROMTOOL) test rules extensions/observability/prometheus/tests/vllm-dr.rules.test.yml
	$(PYTEST) tests/observability --junitxml=$(REPORTS)/observability.xml

# The CI recipes (extensions/ci/), offline: actionlint (built from the Go module proxy once, cached in
# ~/.cache/inferops-vllm-dr; shellcheck checks the run: scripts) and check-jsonschema's bundled schemas.
# tests/integration/test_ci_recipes.py runs their commands against the lab.
# check-jsonschema comes from tests/requirements.txt
CHECK_JSONSCHEMA ?= $(BIN)/check-jsonschema
ci-lint: deps
	bash tools/ci/actionlint.sh -no-color extensions/ci/github/*.yml
	$(CHECK_JSONSCHEMA) --builtin-schema vendor.github-workflows extensions/ci/github/*.yml
	$(CHECK_JSONSCHEMA) --builtin-schema vendor.gitlab-ci extensions/ci/gitlab/*.yml

# The documentation site: antsibull-docs and Sphinx in a venv of their own (build/docs-venv, from
# docs/sphinx/requirements.txt), no network while building (intersphinx off), every Sphinx warning an error.
DOCS_VENV := $(ROOT)/build/docs-venv
DOCS_PYTHON ?= python3
docs-venv:
	@want=$$(sha256sum docs/sphinx/requirements.txt | cut -d' ' -f1); \
	if [ "$$(cat $(DOCS_VENV)/.requirements.sha256 2>/dev/null)" != "$$want" ]; then \
	  echo "docs: creating $(DOCS_VENV)"; \
	  rm -rf $(DOCS_VENV) && $(DOCS_PYTHON) -m venv $(DOCS_VENV) && \
	  $(DOCS_VENV)/bin/python -m pip install -q --disable-pip-version-check -r docs/sphinx/requirements.txt && \
	  echo "$$want" > $(DOCS_VENV)/.requirements.sha256; \
	fi

docs-lint: deps docs-venv
	cd $(COLLECTIONS)/ansible_collections/inferops/vllm_dr && \
	  PATH=$(DOCS_VENV)/bin:$$PATH $(DOCS_VENV)/bin/antsibull-docs lint-collection-docs --plugin-docs .

# The site, built as CI builds it (warnings are errors)
docs-site: deps docs-venv
	PATH=$(DOCS_VENV)/bin:$$PATH bash docs/sphinx/build.sh $(COLLECTIONS) $(ROOT)/build/docs

# The site for a reader
docs: docs-site
	@echo "open file://$(ROOT)/build/docs/html/index.html"

test-k8s: deps
	$(K8S_BUILD)
	$(PYTEST) tests/integration/k8s --junitxml=$(REPORTS)/k8s.xml

# kube-apiserver, controller-manager, scheduler, kubectl, etcd, kwok: built from the Go module proxy into
# ~/.cache/inferops-vllm-dr/k8s-<version>/bin on first use (see tools/k8s/versions.env).
k8s-build:
	bash tools/k8s/build.sh

k8s-up:
	bash tools/k8s/cluster.sh up

k8s-down:
	bash tools/k8s/cluster.sh down

build: deps
	$(BIN)/ansible-galaxy collection build --force --output-path build/

bench-cache: deps
	$(BIN)/python tests/bench/bench_cache.py --rows 1000000

clean:
	rm -rf build reports tests/output

# ROUNDS=5: baseline and sweeps five times in turn, targets judged on the median ratios
ROUNDS ?= 1
bench-sweep: deps
	$(BIN)/python tests/bench/bench_sweep.py --sessions 1000000 --rounds $(ROUNDS)

bench-lab: deps
	$(BIN)/python tests/bench/bench_lab.py

# The incident lab by hand: make lab CMD=up|snapshot|rotate|restore|status|refresh\ s0|down
lab: deps
	cd tests && $(BIN)/python -m lab.labctl $(CMD)

# README command one: the lab drill (incident reproduced, runbook run, validation shown).
demo: deps
	bash tools/demo.sh
