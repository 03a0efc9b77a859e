# `make grade`        set up (.venv) and grade every exercise in exercises/ (`make grade N=3`: one)
# `make test`         set up and run the grader's own tests, then `grade verify`
# `make bench`        measure grading speed against a bare JAX start-up (the floor)
# `make hint N=3`     the next hint for exercise 3      `make list`   the exercises and your progress
# `make watch`        re-grade on every save            `make reset N=3`  exercise 3's stub back (yours kept)
# `make clean`        remove .venv and the compile cache
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# JAX 0.10.2 ships wheels for Python 3.11 to 3.14
PY_OK  := import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 14) else 1)

.PHONY: setup grade test verify bench hint list watch reset clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c '$(PY_OK)' 2>/dev/null || { \
	  echo "error: '$(PYTHON)' is not Python 3.11 to 3.14 (found: $$($(PYTHON) --version 2>&1 || echo nothing)); JAX 0.10.2 needs one of those. Try: make $(MAKECMDGOALS) PYTHON=python3.11" >&2; exit 2; }
	@if [ -e $(VENV) ] && ! $(BIN)/python -c '$(PY_OK)' 2>/dev/null; then \
	  echo "$(VENV) is broken or was made with another Python: making it again"; rm -rf $(VENV); fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# Exit status 1 means "graded, not everything passes yet" -- expected for fresh stubs.
grade: $(STAMP)
	$(BIN)/grade $(if $(N),exercise $(N),all) || [ $$? -eq 1 ]

# the grader's tests on every core (pytest-xdist), then every fixture proven caught at two seeds
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto tests
	$(BIN)/grade verify --seeds 2

verify: $(STAMP)
	$(BIN)/grade verify $(N)

bench: $(STAMP)
	$(BIN)/python tests/bench.py
	$(BIN)/python tests/bench_compare.py

hint: $(STAMP)
	@test -n "$(N)" || { echo "usage: make hint N=<exercise number>" >&2; exit 2; }
	$(BIN)/grade hint $(N)

list: $(STAMP)
	$(BIN)/grade list

watch: $(STAMP)
	$(BIN)/grade watch $(N)

reset: $(STAMP)
	@test -n "$(N)" || { echo "usage: make reset N=<exercise number>" >&2; exit 2; }
	$(BIN)/grade reset $(N)

clean:
	-[ -x $(BIN)/grade ] && $(BIN)/grade cache clear
	rm -rf $(VENV) *.egg-info
