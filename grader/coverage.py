"""Coverage of hidden draws: every case a check claims, at every seed.

A hidden check draws its inputs at grading time.  A check that claims to cover "every
kind of change" must draw every kind, whatever the seed -- otherwise a submission that
gets one kind wrong passes at the seeds that happen not to draw it.  So each hidden check
module declares, for each check whose draw is random, the *categories* it must cover and
how to list the categories a draw holds::

    COVERAGE = {
        "predicts_weak_types": Coverage(
            required={"python_float<->jax_0d", "python_int<->numpy_0d"},
            labels=lambda rng: labels_of(draw_weak_sequences(rng)),
            test="test_predicts_weak_types"),
    }

``labels(rng)`` gets the very generator the check's test gets at a given seed
(``check_rng``), so ``tests/test_coverage.py`` can replay a check's draw at hundreds of
seeds and prove that ``required`` is always covered.  At grading time the test itself
calls ``ensure(...)`` on what it drew: a draw that misses a category is a grader bug and
fails loudly (a grader error for the instructor), never a silent pass.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Iterable

import numpy as np


class CoverageError(AssertionError):
    """A draw missed a category its check promises to cover (a bug in the check)."""


@dataclasses.dataclass(frozen=True)
class Coverage:
    required: frozenset[str] | set[str]
    labels: Callable[[np.random.Generator], Iterable[str]]
    test: str  # the pytest item name whose `rng` the draw uses (parametrized ids included)


def check_rng(seed: int, node_name: str) -> np.random.Generator:
    """The generator a check's test receives as its ``rng`` fixture at ``seed``: seeded from
    the exercise's seed and the test's name (parametrize ids included), so each case draws
    its own inputs and any one of them can be replayed."""
    return np.random.default_rng([int(seed), zlib.crc32(node_name.encode())])


def ensure(check: str, required: Iterable[str], drawn: Iterable[str]) -> None:
    """Raise ``CoverageError`` when ``drawn`` lacks a category of ``required``."""
    missing = sorted(set(required) - set(drawn))
    if missing:
        raise CoverageError(f"the draw of `{check}` does not cover {missing}; fix the draw, not the check")


def missing_at(cov: Coverage, seed: int) -> list[str]:
    """The required categories the draw of ``cov`` misses at ``seed`` (empty: all covered)."""
    return sorted(set(cov.required) - set(cov.labels(check_rng(seed, cov.test))))
