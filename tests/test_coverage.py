"""Every hidden check covers every case it claims, at every seed.

Each hidden check module declares, in ``COVERAGE``, the categories a check's random draw
must hold (kinds of change, modes, constructs, ranges) and how to list what a draw holds;
this replays every declared draw at ``SEEDS`` seeds with the very generator the check's
test receives there (``grader.coverage.check_rng``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from grader.coverage import Coverage, missing_at
from grader.manifest import load

REPO = Path(__file__).resolve().parents[1]
MANIFEST = load(REPO / "exercises" / "manifest.toml")
SEEDS = 300


def hidden_module(ex):
    path = ex.hidden_checks(REPO / "solutions")
    spec = importlib.util.spec_from_file_location(f"hidden_checks_{ex.number:02d}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def declared():
    out = []
    for ex in MANIFEST.exercises:
        module = hidden_module(ex)
        for check, cov in getattr(module, "COVERAGE", {}).items():
            out.append(pytest.param(ex, check, cov, id=f"ex{ex.number}-{check}"))
    return out


DECLARED = declared()


def test_every_declared_check_exists_and_is_hidden():
    for param in DECLARED:
        ex, check, cov = param.values
        spec = {c.name: c for c in ex.checks}.get(check)
        assert spec is not None and spec.visibility == "hidden", f"exercise {ex.number}: COVERAGE names {check!r}"
        assert isinstance(cov, Coverage) and cov.required and cov.test.startswith(f"test_{check}")


@pytest.mark.parametrize("ex,check,cov", DECLARED)
def test_draw_covers_every_required_category_at_every_seed(ex, check, cov):
    failures = {}
    for seed in range(SEEDS):
        missing = missing_at(cov, seed)
        if missing:
            failures[seed] = missing
    assert not failures, (f"exercise {ex.number} `{check}` misses categories at {len(failures)} of {SEEDS} seeds, "
                          f"e.g. seed {next(iter(failures))}: {failures[next(iter(failures))]}")
