# inferops.vllm_dr — every gate CI runs is `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

ROOT := $(CURDIR)
# the ansible-core matrix: every core of tests/cores/matrix.txt unless narrowed on purpose
CORES ?=
CORE_JOBS ?= 2
# `make cores`: every sanity test under every core, the whole drill file on the oldest and the newest
FULL_SANITY ?= all
# `make cores-quick` (the quick matrix, in make test): on each core only the sanity tests whose outcome
# depends on the core; 2.19's full sanity is `make sanity`; the end-to-end recovery and its --check run as the drill
QUICK_SANITY_TESTS ?= compile ansible-doc validate-modules
QUICK_SKIP_CORES ?= 2.19
QUICK_DRILL ?= recovers_the_lab_and_writes_a_well_formed_report or check_mode_touches_nothing
VENV ?= $(ROOT)/.venv
BIN := $(VENV)/bin
COLLECTIONS := $(ROOT)/build/collections
REPORTS := $(ROOT)/reports
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider
# The slowest tests of a suite, printed at its end: where a long run spends its time.
DURATIONS := --durations=25 --durations-min=20

export VLLM_DR_VENV := $(VENV)
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export PATH := $(BIN):$(PATH)

.PHONY: help deps test integration-host integration-k8s integration-k8s-part1 integration-k8s-part2 observability cores cores-quick floors aap ci-lint docs-venv docs-lint docs docs-site test-k8s k8s-build k8s-up k8s-down demo sanity lint unit integration molecule build release bench-cache bench-sweep bench-lab bench-k8s lab clean

help:
	@echo "make test         every gate: sanity, ansible-lint, unit, integration, molecule, observability, CI recipes, docs, aap,"
	@echo "                  the quick core matrix and the dependency floors, in two lanes side by side"
	@echo "make demo         the lab drill: incident reproduced, runbook run, validation shown"
	@echo "make sanity|lint|unit|integration|molecule|observability|ci-lint|docs-lint|docs-site   one gate"
	@echo "make docs         the documentation site, for a reader: build/docs/html/index.html"
	@echo "make cores        every ansible-test sanity test under each ansible-core of tests/cores/matrix.txt, the drill on the oldest and newest"
	@echo "                  (CORES=\"2.16 2.21\" narrows the matrix on purpose; CORE_JOBS=N runs N cores at a time)"
	@echo "make cores-quick  the quick matrix: compile, ansible-doc and validate-modules per core (2.19: make sanity),"
	@echo "                  compile and import on every target Python of 2.16, the end-to-end drill on 2.16 and 2.21"
	@echo "make floors       the session-store, probe and token-cache tests on requirements.txt's lower bounds;"
	@echo "                  the tarball install and the Kubernetes runbook on the oldest ansible (kubernetes.core's floor)"
	@echo "make aap          the execution environment context, the AWX assets, the AWX-style jobs, the assets in the real AWX"
	@echo "make test-k8s     only the Kubernetes suite (its own control plane, or the cluster KUBECONFIG names)"
	@echo "make integration-k8s-part1|integration-k8s-part2   the Kubernetes suite in the two parts make test runs, one per lane"
	@echo "                  (part 2: the files K8S_PART2_FILES names; each part on a control plane of its own)"
	@echo "make k8s-up|k8s-down   the suite's control plane by hand (kubeconfig path printed by k8s-up)"
	@echo "make build        the Galaxy tarball of a commit (COMMIT=HEAD), reproducible: same commit, same bytes"
	@echo "make release      the changelog's release section from changelogs/fragments (again after a merge)"
	@echo "make bench-cache  token cache benchmark (1,000,000 rows)"
	@echo "make bench-sweep  session sweep against redis-cli (1,000,000 sessions)"
	@echo "make bench-k8s    the runbook at 2, 20 and 100 replicas on kwok against the manual procedure (BENCH_K8S_ARGS=...)"

deps:
	@bash tools/bootstrap.sh
	@mkdir -p $(COLLECTIONS)/ansible_collections/inferops $(REPORTS)
	@ln -sfn $(ROOT) $(COLLECTIONS)/ansible_collections/inferops/vllm_dr

# Every gate, in two lanes side by side (tools/lanes.sh): most of the Kubernetes suite, then the Molecule scenarios and
# the quick read-only gates (unit, ansible-lint, the CI recipes' and the docs' checks), in one; every other gate in the
# other, then the dependency floors and the rest of the Kubernetes suite (K8S_PART2_FILES, on a control plane of its
# own), so that both lanes end together (balanced by the gate times the run's table prints, warm and cold: the
# Kubernetes suite is the longest gate, and the CPU of both cores is what a run waits for). No cluster is created while a suite has its API
# server stopped (tools/k8s/cluster.sh's creation lock): a new cluster could otherwise take that port. Every gate runs
# even when an earlier one is red; the run still exits non-zero, after a table of each gate's time and result.
# VLLM_DR_LANES=1: in turn. `make cores` (every sanity test under every core) stays a gate of its own.
K8S_PART2_FILES := test_kubernetes_rbac_per_playbook.py
LANE_K8S := integration-k8s-part1 molecule unit lint ci-lint docs-lint docs-site
LANE_HOST := sanity integration-host observability cores-quick aap floors integration-k8s-part2
test: deps
	@MAKE="$(MAKE)" bash tools/lanes.sh "k8s: $(LANE_K8S)" "host: $(LANE_HOST)"

sanity: deps
	bash tools/ansible-test.sh sanity --python 3.11 --color no

# One driver for the whole matrix: a virtualenv per core on a Python that core supports (found, not assumed).
cores: deps
	VLLM_DR_CORES="$(CORES)" VLLM_DR_CORE_JOBS=$(CORE_JOBS) VLLM_DR_FULL_SANITY="$(FULL_SANITY)" bash tools/core-matrix.sh

cores-quick: deps
	VLLM_DR_CORES="$(CORES)" VLLM_DR_CORE_JOBS=$(CORE_JOBS) VLLM_DR_FULL_SANITY=none \
	  VLLM_DR_SANITY_TESTS="$(QUICK_SANITY_TESTS)" VLLM_DR_SKIP_CORES="$(QUICK_SKIP_CORES)" \
	  VLLM_DR_DRILL_SELECT="$(QUICK_DRILL)" bash tools/core-matrix.sh

floors: deps
	bash tools/floors.sh

aap: deps
	bash tools/aap.sh all

lint: deps
	$(BIN)/ansible-lint --profile production

unit: deps
	$(PYTEST) tests/unit --junitxml=$(REPORTS)/unit.xml

# The Kubernetes suite (tests/functional/k8s) runs here too; its control plane and the LeaderWorkerSet controller
# are built once and cached (first, outside pytest's per-test time limit), unless KUBECONFIG names a cluster to use
# instead.
K8S_BUILD := $(if $(KUBECONFIG),@true,bash tools/k8s/build.sh >/dev/null && bash tools/lws/build.sh >/dev/null)

# The host suite and the Kubernetes suite side by side (tools/lanes.sh; VLLM_DR_LANES=1: one after the other).
integration: deps
	$(K8S_BUILD)
	@MAKE="$(MAKE)" bash tools/lanes.sh "k8s: integration-k8s" "host: integration-host"

# HOST_WORKERS=N: N suites side by side (pytest-xdist), a test file at a time; the session's Keycloak starts only in the
# worker that takes its tests' one file (test_keycloak_provider.py). 0 (the default): one suite, in this process. Two
# workers do not shorten make test on two cores, where both lanes already keep the CPU busy.
HOST_WORKERS ?= 0
# tests/functional without the Kubernetes suite and the observability tests (make observability runs those), then
# ansible-test's integration targets (tests/integration/targets). Keycloak is installed first (once, cached), outside
# pytest's per-test time limit; the tests start it once per session.
integration-host: deps
	bash tools/keycloak/install.sh >/dev/null
	$(PYTEST) $(DURATIONS) -n $(HOST_WORKERS) --dist loadfile tests/functional --ignore=tests/functional/k8s \
	  --ignore=tests/functional/observability --junitxml=$(REPORTS)/integration.xml
	bash tools/ansible-test.sh integration --local --python 3.11 --color no

# K8S_WORKERS=N: N suites side by side (pytest-xdist), each on a control plane and with an LWS controller of its own.
# 0 (the default): one suite, in this process. On two cores two workers made make test slower (a second control plane
# to run, and every wait of a test on its controllers starved of CPU); on more cores they share the work.
K8S_WORKERS ?= 0
K8S_SUITE := tests/functional/k8s
integration-k8s: deps
	$(K8S_BUILD)
	$(PYTEST) $(DURATIONS) -n $(K8S_WORKERS) --dist worksteal $(K8S_SUITE) \
	  --junitxml=$(REPORTS)/integration-k8s.xml

# make test runs the Kubernetes suite in two parts, one in each lane, each on a control plane of its own: the files
# of K8S_PART2 at the end of the host lane, once its own gates are done, every other file (a new one too) in the
# Kubernetes lane. K8S_PART2 is chosen by the times of a run's table (the gates, and each suite's --durations) so
# that both lanes end together; a file named here that no longer exists fails the part. Together the two parts are
# integration-k8s, the whole suite.
K8S_PART2 := $(addprefix $(K8S_SUITE)/,$(K8S_PART2_FILES))
integration-k8s-part1: deps
	$(K8S_BUILD)
	$(PYTEST) $(DURATIONS) $(K8S_SUITE) $(addprefix --ignore=,$(K8S_PART2)) --junitxml=$(REPORTS)/integration-k8s-part1.xml

integration-k8s-part2: deps
	$(K8S_BUILD)
	$(PYTEST) $(DURATIONS) $(K8S_PART2) --junitxml=$(REPORTS)/integration-k8s-part2.xml

# One Molecule scenario per role that runs on the incident lab host (extensions/molecule/<role>), verified with
# testinfra; k8s_target needs a Kubernetes API, tests/functional/k8s covers it.
molecule: deps
	$(BIN)/molecule test --all

# The alerting rules and the runbook's metrics (extensions/observability/), with promtool (built from the Go module
# proxy once, cached in ~/.cache/inferops-vllm-dr): the PrometheusRule manifest agrees with the rules file, the rules
# check, their unit tests pass (each alert fires on the incident's series, quiet after the repair), and the textfile
# that drills on the lab write passes `promtool check metrics` (tests/functional/observability). The log-to-alert
# path runs end to end there too, on the OpenTelemetry Collector and Prometheus, built and cached the same way first.
PROMTOOL := bash tools/observability/promtool.sh
observability: deps
	bash tools/observability/otelcol.sh components >/dev/null
	bash tools/observability/prometheus.sh --version
	$(BIN)/python tools/observability/render_rules.py --check
	$(PROMTOOL) check rules extensions/observability/prometheus/vllm-dr.rules.yml
	$(PROMTOOL) test rules extensions/observability/prometheus/tests/vllm-dr.rules.test.yml
	$(PYTEST) tests/functional/observability --junitxml=$(REPORTS)/observability.xml

# The CI recipes (extensions/ci/), offline: actionlint (built from the Go module proxy once, cached in
# ~/.cache/inferops-vllm-dr; shellcheck checks the run: scripts) and check-jsonschema's bundled schemas.
# tests/functional/test_ci_recipes.py runs their commands against the lab.
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

# The collection galaxy.yml depends on (kubernetes.core) comes from the test venv's `ansible`
# bundle: antsibull-docs resolves the collection's dependencies through ansible-doc. The lint copies each dependency
# first, and a directory inside a git work tree by its tracked files only; the test venv is an ignored part of this
# work tree, so the ceiling keeps git from finding the work tree above it (the collection itself, whose path is the
# work tree's top, is still copied as git tracks it). A test venv linked from another work tree (.venv a symbolic
# link) gets a ceiling at that work tree's top too.
DOCS_COLLECTIONS = $(COLLECTIONS):$(shell $(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
docs-lint: deps docs-venv
	cd $(COLLECTIONS)/ansible_collections/inferops/vllm_dr && \
	  PATH=$(DOCS_VENV)/bin:$$PATH ANSIBLE_COLLECTIONS_PATH=$(DOCS_COLLECTIONS) GIT_CEILING_DIRECTORIES=$(ROOT):$(patsubst %/,%,$(dir $(realpath $(VENV)))) \
	  $(DOCS_VENV)/bin/antsibull-docs lint-collection-docs --plugin-docs .

# The site, built as CI builds it (warnings are errors), then read as a reader reads it (tests/docs): every internal
# link and anchor of the HTML resolves, no link leads to a repository the collection does not have, and in headless
# Chromium the search finds pages and a module page renders (screenshots in reports/docs-site/)
docs-site: deps docs-venv
	PATH=$(DOCS_VENV)/bin:$$PATH ANSIBLE_COLLECTIONS_PATH=$(DOCS_COLLECTIONS) \
	  bash docs/sphinx/build.sh $(COLLECTIONS) $(ROOT)/build/docs
	VLLM_DR_DOCS_HTML=$(ROOT)/build/docs/html VLLM_DR_REPORTS=$(REPORTS) \
	  $(PYTEST) tests/docs --junitxml=$(REPORTS)/docs-site.xml

# The site for a reader
docs: docs-site
	@echo "open file://$(ROOT)/build/docs/html/index.html"

test-k8s: integration-k8s

# kube-apiserver, controller-manager, scheduler, kubectl, etcd, kwok: built from the Go module proxy into
# ~/.cache/inferops-vllm-dr/k8s-<version>/bin on first use (see tools/k8s/versions.env); the LeaderWorkerSet
# controller from its release archive into ~/.cache/inferops-vllm-dr/lws-<version>-<hash> (tools/lws/versions.env).
k8s-build:
	bash tools/k8s/build.sh
	bash tools/lws/build.sh

k8s-up:
	bash tools/k8s/cluster.sh up

k8s-down:
	bash tools/k8s/cluster.sh down

# The Galaxy tarball of a commit (COMMIT=HEAD by default; uncommitted changes are not in it), byte for byte
# the same on every build of that commit: tools/build_collection.py says how. Prints its path and sha256.
COMMIT ?= HEAD
build: deps
	$(BIN)/python tools/build_collection.py --commit '$(COMMIT)' --output-dir build/

# The release section of CHANGELOG.rst and changelogs/changelog.yaml, for the version in galaxy.yml, from the
# fragments in changelogs/fragments (which it then removes). Run again after merging branches that add
# fragments: they join the same release, whose date stays the one of the first run.
release: deps
	$(BIN)/antsibull-changelog lint
	$(BIN)/antsibull-changelog release --reload-plugins
	$(BIN)/antsibull-changelog lint-changelog-yaml --strict changelogs/changelog.yaml

bench-cache: deps
	$(BIN)/python tests/bench/bench_cache.py --rows 1000000

clean:
	rm -rf build reports tests/output

# ROUNDS=N: the last N rounds (baseline and sweeps in turn, each on a fresh settled server) are judged once their
# ratios agree within 10% (up to 3 more rounds are run for that); targets judged on their medians
ROUNDS ?= 3
bench-sweep: deps
	$(BIN)/python tests/bench/bench_sweep.py --sessions 1000000 --rounds $(ROUNDS)

bench-lab: deps
	$(BIN)/python tests/bench/bench_lab.py

# dr_restore.yml at 2, 20 and 100 replicas on a kwok control plane of its own, against the write-up's manual
# procedure: wall time and API calls per phase (BENCH_K8S_ARGS="--replicas 2,20 --rounds 3 --volume pvc" narrows it;
# "--kind statefulset" measures a StatefulSet, a claim per pod)
BENCH_K8S_ARGS ?=
bench-k8s: deps
	bash tools/k8s/build.sh >/dev/null
	$(BIN)/python tests/bench/bench_k8s.py $(BENCH_K8S_ARGS)

# The incident lab by hand: make lab CMD=up|snapshot|rotate|restore|status|refresh\ s0|down
# IDP=keycloak: the provider is a realm with refresh-token rotation in a real Keycloak (tools/keycloak), not Authlib
IDP ?=
lab: deps
	cd tests && VLLM_DR_LAB_IDP="$(IDP)" $(BIN)/python -m lab.labctl $(CMD)

# README command one: the lab drill (incident reproduced, runbook run, validation shown).
demo: deps
	bash tools/demo.sh
