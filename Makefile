# One command runner for people and CI alike. `make dev` and `make test` each create .venv and
# install what they need on a fresh machine.
PYTHON ?= python3
# the suite starts hundreds of Python processes: each must find the bytecode of the modules it
# imports instead of compiling them again (a fresh clone has none; pytest's own cache of
# rewritten test modules obeys the same variable)
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml clients/python/pyproject.toml release/constraints.txt | cksum | cut -d' ' -f1)

.PHONY: dev test lint typecheck imports unit integration system install system-deps release-deps bench soak clean dist release-check docs docs-gen

# make dist's own environment: the build frontend and the SBOM tool (release/requirements.txt),
# none of the test, Spark or documentation packages of .venv
RELEASE_VENV := build/release-venv
RELEASE_STAMP := $(RELEASE_VENV)/.installed-$(shell cat release/requirements.txt | cksum | cut -d' ' -f1)

$(STAMP): pyproject.toml clients/python/pyproject.toml release/constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# the server's distribution was named rms up to 0.1.0: a .venv made then still holds it
	@$(BIN)/python -m pip uninstall --quiet --yes rms 2>/dev/null || true
	@# the server's third-party dependencies at the versions a release ships as tested with
	$(BIN)/python -m pip install --quiet -c release/constraints.txt -e clients/python \
		-e '.[test,dev-stack,spark,release,docs]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

install: $(STAMP)

## Start everything (embedded PostgreSQL + Apache Kafka + API + workers + demo)
dev: $(STAMP)
	@bash scripts/system-deps.sh dev
	@$(BIN)/python -m rms.devstack.kafka_broker
	$(BIN)/rms dev

## System packages the tests need (Java + Maven for Kafka, JDBC driver for Spark, Chromium, shellcheck, promtool)
system-deps:
	@bash scripts/system-deps.sh

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy .

## The layers: each imports only the ones below it, and the services never import each other
imports: $(STAMP)
	$(BIN)/lint-imports

## The documentation site from docs/ into site/ (mkdocs.yml), in strict mode: a broken link, a
## missing page or an unknown anchor fails it. The generated pages must be current.
## (NO_MKDOCS_2_WARNING: Material for MkDocs' notice of its end of life in 2027, which prints on
## every build; its successor Zensical 0.1 cannot be installed from PyPI here yet)
docs: $(STAMP)
	$(BIN)/python -m docs_gen --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --clean --site-dir site

## Write the generated pages again (the HTTP API, the CLI, the configuration, the state machine)
docs-gen: $(STAMP)
	$(BIN)/python -m docs_gen

# pytest-xdist workers of `make test` (each starts one PostgreSQL and one Kafka broker)
TEST_WORKERS ?= 3
# a temporary folder of its own: pytest's default one is shared by every run on the machine and
# pruned by each, which would delete a running suite's servers under it
PARALLEL := -n $(TEST_WORKERS) --dist loadscope --basetemp=$(CURDIR)/build/pytest

## The pure-logic tests (no process, no socket): seconds
unit: $(STAMP)
	$(BIN)/pytest tests/unit -q

## The tests against one PostgreSQL and one Kafka per worker (tests/README.md)
integration: $(STAMP)
	@$(BIN)/python -m rms.devstack.kafka_broker
	$(BIN)/pytest tests/integration $(PARALLEL)

## The tests of several processes: faults, releases (after `make dist`), other languages
system: $(STAMP) system-deps
	@$(BIN)/python -m rms.devstack.kafka_broker
	$(BIN)/pytest tests/system $(PARALLEL)

## Lint, type-check, build the documentation site and the release artifacts and run every tier
## in parallel workers against real PostgreSQL and Kafka (tests/system/release installs the
## artifacts from dist/); ends with the 25 slowest tests and each tier's time
test: $(STAMP) system-deps lint typecheck imports docs dist
	@$(BIN)/python -m rms.devstack.kafka_broker
	$(BIN)/pytest $(PARALLEL) --durations 25

$(RELEASE_STAMP): release/requirements.txt
	@test -x $(RELEASE_VENV)/bin/python || $(PYTHON) -m venv $(RELEASE_VENV)
	$(RELEASE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(RELEASE_VENV)/bin/python -m pip install --quiet -r release/requirements.txt
	@rm -f $(RELEASE_VENV)/.installed-*
	@touch $(RELEASE_STAMP)

## The system packages of a release build and check alone (Java, Maven, buildah, mmdebstrap)
release-deps:
	@bash scripts/system-deps.sh release

## Every release artifact into dist/, each with its CycloneDX SBOM (release/dist.py)
dist: $(RELEASE_STAMP) release-deps
	$(RELEASE_VENV)/bin/python -m release.dist

## Install each artifact of dist/ in a clean environment and use it against a live RMS:
## `make release-check` builds dist/ first; `make release-check DIST=path` checks the
## artifacts already in path (a release a user holds) and builds nothing
DIST ?=
ifeq ($(DIST),)
release-check: dist
release-check: RELEASE_DIST := $(CURDIR)/dist
else
release-check: RELEASE_DIST := $(abspath $(DIST))
endif
release-check: $(STAMP) release-deps
	@$(BIN)/python -m rms.devstack.kafka_broker
	RMS_DIST=$(RELEASE_DIST) $(BIN)/pytest tests/system/release

## The fault suite's long soak: every fault mixed, for SOAK_SECONDS (default 1800); summary at the end
## (SOAK_ARGS="--failover sync": on a PostgreSQL that fails over, its primary killed too)
SOAK_SECONDS ?= 1800
SOAK_ARGS ?=
soak: $(STAMP)
	@RMS_FAILOVER_DEPS=1 bash scripts/system-deps.sh dev
	@$(BIN)/python -m rms.devstack.kafka_broker
	SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/python -m tests.system.faults.soak $(SOAK_ARGS)

bench: $(STAMP)
	@bash scripts/system-deps.sh dev
	@$(BIN)/python -m rms.devstack.kafka_broker
	$(BIN)/rms bench

clean:
	rm -rf $(VENV) dist build site .rms-dev .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
