# `make grade`  set up (.venv) and grade every exercise in exercises/
# `make test`   set up and run the grader's own tests, then `grade verify`
# `make bench`  measure grading speed against a bare JAX start-up (the floor)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup grade test verify bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# Exit status 1 means "graded, not everything passes yet" -- expected for fresh stubs.
grade: $(STAMP)
	$(BIN)/grade all || [ $$? -eq 1 ]

test: $(STAMP)
	$(BIN)/python -m pytest -q tests
	$(BIN)/grade verify

verify: $(STAMP)
	$(BIN)/grade verify

bench: $(STAMP)
	$(BIN)/python tests/bench.py
	$(BIN)/python tests/bench_compare.py

clean:
	rm -rf $(VENV) *.egg-info
