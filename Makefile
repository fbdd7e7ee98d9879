# kraftlake: `make run` and `make test` on a fresh clone need nothing else; both run `setup` first.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON_BOOT ?= python3.11
VENV        := .venv
PY          := $(VENV)/bin/python
CACHE       := .cache
M2          := $(CACHE)/m2
JARS        := $(CACHE)/jars
WEB         := $(CACHE)/web
MVN         := mvn -q -B -Dmaven.repo.local=$(abspath $(M2))
export PYSPARK_PYTHON := $(abspath $(PY))
export KRAFTLAKE_JARS := $(abspath $(JARS))
export KRAFTLAKE_WEB  := $(abspath $(WEB))

.PHONY: help setup browser run test test-fleet test-fast test-slow fuzz lint fmt bench dist clean schemas stubs compat compat-jars

# The compatibility matrix (tests/compat): the newest patch of each Kafka minor with KRaft in production,
# one jar directory per release under $(JARS)/kafka-releases; `make compat` runs all of them (or the releases
# given: `make compat COMPAT_RELEASES="3.3.2 4.4.0"`), `make test` none. `make setup` fetches COMPAT_SUBSET (one
# release per wire generation): what pytest runs of tests/compat without COMPAT_RELEASES, and the releases
# `make bench` follows.
COMPAT_RELEASES ?= 3.3.2 3.4.1 3.5.2 3.6.2 3.7.2 3.8.1 3.9.1 4.0.2 4.1.2 4.2.2 4.3.1 4.4.0
COMPAT_SUBSET   := 3.3.2 3.7.2 3.9.1 4.4.0
SHELL_WITNESS   := 4.3.1# the newest kafka-metadata-shell on Maven Central: reads every release's files in the matrix
RELEASE_JARS    := $(JARS)/kafka-releases
NO_SHELL        := 4.2.2 4.4.0# kafka-shell of these releases is not on Maven Central

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

setup: $(VENV)/.installed $(JARS)/delta/.done $(JARS)/kafka/.done $(JARS)/kafka-shell/.done $(foreach v,$(COMPAT_SUBSET) $(SHELL_WITNESS),$(RELEASE_JARS)/$(v)/.done) $(WEB)/.done browser ## virtualenv, pip install -e .[dev], Delta and Kafka jars (4.4.0 peer, 4.3.1 metadata shell, the compat subset), the JVM's class archive, Data Docs' libraries, Chromium (idempotent)
	@$(PY) -m jobs.class_archive --if-missing

# the libraries Great Expectations' Data Docs load from CDNs (kraftlake.spark.data_docs copies them into each
# site); without npm the Data Docs keep loading them from the network and their browser test skips
$(WEB)/.done: conf/web/package.json conf/web/package-lock.json conf/web/.npmrc
	@if command -v npm >/dev/null 2>&1; then \
		rm -rf $(WEB) && mkdir -p $(WEB) && cp conf/web/package.json conf/web/package-lock.json conf/web/.npmrc $(WEB)/ \
		&& (cd $(WEB) && npm ci --silent --ignore-scripts --no-audit --no-fund) && touch $@; \
	else echo "setup: no npm here: Data Docs will load their libraries from CDNs, and their browser test skips"; fi

browser: ## Chromium from Debian's packages for the browser tests, when missing and apt-get runs as root
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
			|| echo "setup: apt-get could not install chromium: the browser tests skip"; \
		else echo "setup: no chromium, and no apt-get as root to install it: the browser tests skip"; fi; }

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

$(JARS)/%/.done: conf/jars/%.pom.xml
	rm -rf $(JARS)/$* && mkdir -p $(JARS)/$*
	$(MVN) -f $< dependency:copy-dependencies -DoutputDirectory=$(abspath $(JARS)/$*) -Dmdep.includeScope=runtime
	touch $@

# one Kafka release's jars (conf/jars/kafka-release.pom.xml at that version), fetched once
$(RELEASE_JARS)/%/.done: conf/jars/kafka-release.pom.xml
	rm -rf $(RELEASE_JARS)/$* && mkdir -p $(RELEASE_JARS)/$*
	$(MVN) -f $< dependency:copy-dependencies -Dkafka.version=$* -Dkafka.major=$(firstword $(subst ., ,$*)) \
		$(if $(filter $*,$(NO_SHELL)),-Dkafka.shell=false) \
		-DoutputDirectory=$(abspath $(RELEASE_JARS)/$*) -Dmdep.includeScope=runtime
	touch $@

compat-jars: $(foreach v,$(COMPAT_RELEASES),$(RELEASE_JARS)/$(v)/.done) ## fetch every release of the compatibility matrix (once)

compat: setup compat-jars ## the whole compatibility matrix (every release in COMPAT_RELEASES); writes the README's table
	KRAFTLAKE_COMPAT_RELEASES="$(COMPAT_RELEASES)" $(PY) -m pytest -q -n 0 -p no:randomly -m compat tests/compat \
		--junitxml=$(CACHE)/compat-junit.xml; status=$$?; \
		$(PY) tests/compat/table.py $(CACHE)/compat-junit.xml README.md; exit $$status

run: setup ## the main job on embedded defaults: local quorum, simulated cluster, Delta warehouse, queries by offset
	$(PY) -m kraftlake.cli demo --warehouse ./warehouse

test: setup ## the test suite (pure layers, Spark, the real Kafka peer, the browser, the standalone cluster), on two workers (a Spark session each); the heavy scenarios are make test-slow's
	$(PY) -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder -m "not compat and not heavy" --durations=25

test-fleet: setup ## the fleet at full size (minutes): two live Kafka clusters and a dead address streamed into one warehouse; four clusters replayed on a standalone Spark cluster's two workers
	KRAFTLAKE_FLEET=1 $(PY) -m pytest -q -n 0 -p no:cacheprovider --durations=5 tests/spark/test_stream_fleet.py \
		tests/spark/test_standalone_cluster.py

test-fast: $(VENV)/.installed ## the pure layers (no JVM, no browser), on two workers: needs only the virtualenv
	$(PY) -m pytest -q -n 2 -p no:cacheprovider -m "not spark and not kafka and not slow and not browser" --durations=10

test-slow: setup ## what make test leaves out or cuts: the heavy Spark and Kafka scenarios, and the pure layers with the randomized sweeps at full size (Hypothesis examples, simulation seeds)
	KRAFTLAKE_SWEEPS=full $(PY) -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder -p no:cacheprovider \
		-m "heavy or not (spark or kafka or browser or compat)" --durations=25

FUZZ_SECONDS ?= 300
fuzz: setup ## the fuzz targets (tests/fuzz), each for FUZZ_SECONDS (default 300) from a new seed (FUZZ_SEED=N replays one)
	KRAFTLAKE_FUZZ_SECONDS=$(FUZZ_SECONDS) $(if $(FUZZ_SEED),KRAFTLAKE_FUZZ_SEED=$(FUZZ_SEED)) \
		$(PY) -m pytest -q -s -p no:cacheprovider -o timeout=0 tests/fuzz

lint: $(VENV)/.installed ## ruff (lint and format), the stubs up to date, mypy, import-linter contracts
	$(VENV)/bin/ruff check kraftlake pipelines udfs jobs bench tests
	$(VENV)/bin/ruff format --check kraftlake pipelines udfs jobs bench tests
	$(PY) -m kraftlake.protocol.stubs --check
	$(VENV)/bin/mypy kraftlake pipelines udfs jobs bench
	$(VENV)/bin/lint-imports

fmt: setup ## format the code
	$(VENV)/bin/ruff format kraftlake pipelines udfs jobs bench tests
	$(VENV)/bin/ruff check --fix kraftlake pipelines udfs jobs bench tests

bench: setup ## benchmarks; writes bench/results.json
	# cold commands are timed as an installed package runs them: with its bytecode compiled (pip compiles a wheel's)
	$(PY) -m compileall -q kraftlake pipelines jobs udfs
	$(PY) -m bench --out bench/results.json

dist: setup ## dist/kraftlake.zip for spark-submit --py-files (the wheel, schemas/ packed in as kraftlake/_schemas)
	rm -rf build dist kraftlake/_schemas && cp -r schemas kraftlake/_schemas
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w dist . ; status=$$?; rm -rf kraftlake/_schemas build; exit $$status
	# executors put only .zip/.egg/.jar --py-files on sys.path: the same archive under a .zip name
	cp dist/kraftlake-*.whl dist/kraftlake.zip
	# a .pyc beside each module, or every executor's Python worker compiles what it imports from the zip
	$(PY) -m kraftlake.dist_bytecode dist/kraftlake.zip

schemas: setup ## regenerate schemas/*.avsc and schemas/rpc/*.avsc from the JSON specs in Kafka's jars, then the stubs
	$(PY) -m kraftlake.protocol.kafka_specs $(JARS)/kafka schemas
	$(PY) -m kraftlake.protocol.stubs

stubs: setup ## regenerate the record classes' type stubs (kraftlake/protocol/*.pyi) from schemas/
	$(PY) -m kraftlake.protocol.stubs

clean: ## remove build outputs (keeps the venv and the jar cache)
	rm -rf build dist bench/results.json warehouse
