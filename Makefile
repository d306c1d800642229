# The README's two commands: `make demo` and `make test`. Each creates .venv if missing.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-stages lint typecheck contracts unit bench lab serve clean constraints

# Each stage of `make test` prints its duration; the summary comes at the end.
export TAHRIX_STAGE_LOG ?= $(CURDIR)/.stage-times
TIMED := scripts/timed.sh

# constraints.txt: the versions the suite last passed with, so a fresh clone tests what was tested.
$(BIN)/tahrix: pyproject.toml constraints.txt
	$(TIMED) install sh -c "test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); \
	  $(BIN)/python -m pip install -q --upgrade pip && $(BIN)/python -m pip install -q -e '.[dev]' -c constraints.txt"
	touch $@

demo: $(BIN)/tahrix
	$(BIN)/tahrix demo

test:
	@rm -f $(TAHRIX_STAGE_LOG)
	@$(MAKE) --no-print-directory test-stages; rc=$$?; \
	  echo "== stage times"; cat $(TAHRIX_STAGE_LOG) 2>/dev/null; rm -f $(TAHRIX_STAGE_LOG); exit $$rc

test-stages: $(BIN)/tahrix
	$(TIMED) system-packages scripts/system-deps.sh
	$(MAKE) --no-print-directory lint typecheck contracts unit

lint: $(BIN)/tahrix
	$(TIMED) lint sh -c "$(BIN)/ruff check . && $(BIN)/ruff format --check ."

typecheck: $(BIN)/tahrix
	$(TIMED) types $(BIN)/mypy

contracts: $(BIN)/tahrix
	$(TIMED) contracts $(BIN)/lint-imports

unit: $(BIN)/tahrix
	$(TIMED) tests $(BIN)/pytest

bench: $(BIN)/tahrix
	for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lab: $(BIN)/tahrix
	$(BIN)/tahrix lab

serve: $(BIN)/tahrix
	$(BIN)/tahrix serve

# After a full `make test` passes on upgraded packages: pin what it passed with.
constraints: $(BIN)/tahrix
	{ grep '^#' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable; } > constraints.new
	mv constraints.new constraints.txt

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
