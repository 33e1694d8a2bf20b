# Toolgate: `make run` serves the dashboard, API and websockets; `make test` runs the whole suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint format bench bench-scale-out bootstrap system-deps migrate clean-data deploy-check deploy-images

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

bootstrap: $(STAMP)

run: $(STAMP)
	bash scripts/jail-deps.sh
	$(BIN)/python -m config.supervisor

system-deps:
	bash scripts/system-deps.sh
	bash scripts/conformance-deps.sh
	bash scripts/axe-deps.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	TOOLGATE_EMBEDDED_DB_AUTOSTART=0 $(BIN)/mypy .
	$(BIN)/lint-imports --no-logo

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The suite runs in TEST_WORKERS processes (pytest-xdist), a test file per process at a time; each has
# its own test database on the one embedded server. TEST_WORKERS=0 runs it in this process alone.
TEST_WORKERS ?= 2

test: $(STAMP) system-deps lint
	TOOLGATE_TEST=1 $(BIN)/python -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m bench

# Scale-out, in one run: execute and the baseline with 1 and N web workers, then the test topology
# (PostgreSQL, PgBouncer, Redis, HAProxy) with one node and two. About six minutes; needs wrk.
bench-scale-out: $(STAMP)
	$(BIN)/python -m bench --only-web-workers --seconds 25
	$(BIN)/python -m bench.topology --seconds 20

migrate: $(STAMP)
	$(BIN)/python manage.py migrate

clean-data:
	-$(BIN)/python manage.py embedded_db stop
	rm -rf .data

# Builds Toolgate's images (no registry: the base is made with debootstrap) and runs deploy/compose.yaml:
# /readyz and one execute through the load balancer, then tears it down. Slow; not part of `make test`.
deploy-check: $(STAMP)
	PYTHON=$(BIN)/python bash scripts/deploy-check.sh check

deploy-images: $(STAMP)
	PYTHON=$(BIN)/python bash scripts/deploy-check.sh build
