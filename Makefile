# The README's two commands: `make demo` and `make test`. Each creates .venv if missing.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint typecheck contracts unit bench lab serve clean

$(BIN)/tahrix: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

demo: $(BIN)/tahrix
	$(BIN)/tahrix demo

test: $(BIN)/tahrix
	scripts/system-deps.sh
	$(MAKE) lint typecheck contracts unit

lint: $(BIN)/tahrix
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(BIN)/tahrix
	$(BIN)/mypy

contracts: $(BIN)/tahrix
	$(BIN)/lint-imports

unit: $(BIN)/tahrix
	$(BIN)/pytest

bench: $(BIN)/tahrix
	for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lab: $(BIN)/tahrix
	$(BIN)/tahrix lab

serve: $(BIN)/tahrix
	$(BIN)/tahrix serve

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
