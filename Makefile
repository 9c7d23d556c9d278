# Every target creates .venv and installs the project into it first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test dev bench lint format clean

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
	$(BIN)/pytest -q -n auto --dist loadgroup

# After `make demo`, the UI's partitions start at the demo's first day (unless
# SEER_START_DATE is set).
dev: $(STAMP)
	home=$${DAGSTER_HOME:-$(CURDIR)/.dagster_home}; \
	start=$${SEER_START_DATE:-$$(cat "$$home/seer_demo_start_date" 2>/dev/null)}; \
	DAGSTER_HOME=$$home SEER_START_DATE=$$start $(BIN)/dagster dev -w workspace.yaml

# Runs every benchmark even when one misses its target, then fails if any did.
bench: $(STAMP)
	missed=""; \
	for script in benchmarks/*.py; do \
		echo "== $$script"; $(BIN)/python $$script || missed="$$missed $$script"; \
	done; \
	if [ -n "$$missed" ]; then echo "targets missed in:$$missed"; exit 1; fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .dagster_home .pytest_cache
