"""Grading results: frozen data, no formatting and no policy.

Every report (terminal, JSON, and later Gradescope/JUnit) is a pure function of a
``RunResult``.  ``RESULT_FORMAT_VERSION`` is bumped whenever ``to_dict``'s shape changes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

RESULT_FORMAT_VERSION = 1

# Check status values.
PASSED, FAILED, ERROR, NOT_RUN = "passed", "failed", "error", "not_run"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    name: str
    visibility: str  # "public" | "hidden"
    summary: str
    status: str  # passed | failed | error | not_run
    score: int
    max_score: int
    message: str = ""  # why it failed, in words the learner can act on
    measured: str = ""
    expected: str = ""
    hint: str = ""
    detail: str = ""  # the learner's own traceback, when their code raised
    duration_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["passed"] = self.passed
        return d


@dataclasses.dataclass(frozen=True)
class ExerciseResult:
    number: int
    slug: str
    title: str
    files: tuple[str, ...]  # learner file paths as graded
    seed: int
    checks: tuple[CheckResult, ...]
    hidden_run: bool  # False when the hidden checks were not available (public checks only)
    duration_s: float = 0.0
    output: str = ""  # what the learner's code printed (capped)
    error: str = ""  # set when the exercise could not be graded at all

    @property
    def score(self) -> int:
        return sum(c.score for c in self.checks)

    @property
    def max_score(self) -> int:
        return sum(c.max_score for c in self.checks)

    @property
    def all_passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "slug": self.slug,
            "title": self.title,
            "files": list(self.files),
            "seed": self.seed,
            "score": self.score,
            "max_score": self.max_score,
            "hidden_run": self.hidden_run,
            "all_passed": self.all_passed,
            "duration_s": round(self.duration_s, 3),
            "error": self.error,
            "checks": [c.to_dict() for c in self.checks],
        }


@dataclasses.dataclass(frozen=True)
class RunResult:
    exercises: tuple[ExerciseResult, ...]
    grader_version: str
    jax_version: str
    seed_option: int | None  # the --seed given, or None when seeds came from the files
    duration_s: float = 0.0

    @property
    def score(self) -> int:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> int:
        return sum(e.max_score for e in self.exercises)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": RESULT_FORMAT_VERSION,
            "grader_version": self.grader_version,
            "jax_version": self.jax_version,
            "seed": self.seed_option,
            "score": self.score,
            "max_score": self.max_score,
            "duration_s": round(self.duration_s, 3),
            "exercises": [e.to_dict() for e in self.exercises],
        }
