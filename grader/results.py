"""Grading results: frozen data, no formatting and no policy.

Every report (terminal, JSON, Gradescope, JUnit, GitHub Actions, the gradebook) is a pure
function of a ``RunResult``.  ``RESULT_FORMAT_VERSION`` is bumped whenever ``to_dict``'s
shape changes; ``from_dict`` reads it back (``grade gradebook import``).

Two audiences read a result.  Everything is for the learner except the ``private`` fields:
what a hidden check measured and expected, the learner's traceback inside a hidden check,
and the grader's own traceback when grading crashed.  Those are for the instructor only:
``to_dict(private=False)`` (the default) leaves them out, and no learner-facing report
reads them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

RESULT_FORMAT_VERSION = 4
READABLE_FORMAT_VERSIONS = (2, 3, 4)  # 3 added: blocked/integrity statuses, integrity, incomplete; 4: timings

# Check status values.
PASSED, FAILED, ERROR, NOT_RUN = "passed", "failed", "error", "not_run"
#: It passed its own test but scores nothing because a check it ``requires`` did not pass.
BLOCKED = "blocked"
#: Its measurement cannot be trusted: the sandbox's integrity guard accused the learner's code.
INTEGRITY = "integrity"
#: Every status, in the order reports list them.
STATUSES = (PASSED, FAILED, BLOCKED, INTEGRITY, ERROR, NOT_RUN)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    name: str
    visibility: str  # "public" | "hidden"
    summary: str
    status: str  # passed | failed | blocked | integrity | error | not_run
    score: int
    max_score: int
    message: str = ""  # why it failed, in words the learner can act on
    measured: str = ""
    expected: str = ""
    hint: str = ""
    detail: str = ""  # the learner's own traceback, when their code raised
    duration_s: float = 0.0
    file: str = ""  # the learner's file and line the failure points at, when a check can tell
    line: int = 0
    private: str = ""  # instructor only: what a hidden check measured, a grader traceback

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def to_dict(self, private: bool = False) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["passed"] = self.passed
        d["duration_s"] = round(self.duration_s, 3)
        if not private:
            del d["private"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CheckResult":
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


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
    output: str = ""  # what the learner's code printed (capped); instructor only once hidden checks ran
    error: str = ""  # set when the exercise could not be graded at all (a grader error)
    private: str = ""  # instructor only: the grader's traceback when ``error`` is set
    integrity: tuple[str, ...] = ()  # the guard's accusations, each with its evidence (file, line, code)
    content_digest: str = ""  # the digest of the files graded (grader.submission.Snapshot.digest)
    #: where the time went: {worker: {"cpu_s", "wall_s"}} (instructor only once hidden checks ran: a
    #: hidden worker's time depends on its inputs)
    timings: dict = dataclasses.field(default_factory=dict, compare=False, hash=False)
    #: the checks that ran and draw their inputs from ``seed`` (``grader.session.ExerciseRun.seeded``):
    #: the others grade the same at every seed -- for ``grade verify``, not in the results file
    seeded: tuple[str, ...] = dataclasses.field(default=(), compare=False, hash=False)

    @property
    def score(self) -> int:
        return sum(c.score for c in self.checks)

    @property
    def max_score(self) -> int:
        return sum(c.max_score for c in self.checks)

    @property
    def all_passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def to_dict(self, private: bool = False) -> dict[str, Any]:
        d = {
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
            "integrity": list(self.integrity),
            "content_digest": self.content_digest,
            "checks": [c.to_dict(private) for c in self.checks],
        }
        if private or not self.hidden_run:  # printed during hidden checks, it may quote their inputs
            d["output"] = self.output
        if private or not self.hidden_run:
            d["timings"] = self.timings
        if private:
            d["private"] = self.private
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ExerciseResult":
        return cls(
            number=d["number"], slug=d["slug"], title=d["title"], files=tuple(d["files"]), seed=d["seed"],
            checks=tuple(CheckResult.from_dict(c) for c in d["checks"]), hidden_run=d["hidden_run"],
            duration_s=d.get("duration_s", 0.0), output=d.get("output", ""), error=d.get("error", ""),
            private=d.get("private", ""), integrity=tuple(d.get("integrity", ())),
            content_digest=str(d.get("content_digest", "")),
            timings=d.get("timings") if isinstance(d.get("timings"), dict) else {},
        )


@dataclasses.dataclass(frozen=True)
class RunResult:
    exercises: tuple[ExerciseResult, ...]
    grader_version: str
    jax_version: str
    seed_option: int | None  # the --seed given, or None when seeds came from the files
    duration_s: float = 0.0
    started_at: str = ""  # UTC, ISO 8601, when grading began
    submission: str = ""  # what was graded: a folder, or a repository and its commit
    error: str = ""  # set when grading could not run at all (e.g. the course's hidden checks are unusable)
    #: grading was interrupted (SIGINT/SIGTERM): what finished is kept for the record, but
    #: the run is not a grade -- its score is null in every report and imports refuse it
    incomplete: bool = False
    #: what the submission *is*, beyond its label: a hash of its repository URL and folder, so
    #: two forks cloned from one origin are never merged into one gradebook submission
    submission_id: str = ""

    @property
    def grader_errors(self) -> tuple[ExerciseResult, ...]:
        """Exercises the grader failed to grade (its own fault, never the submission's)."""
        return tuple(e for e in self.exercises if e.error)

    @property
    def score(self) -> int:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> int:
        return sum(e.max_score for e in self.exercises)

    def to_dict(self, private: bool = False) -> dict[str, Any]:
        return {
            "format_version": RESULT_FORMAT_VERSION,
            "grader_version": self.grader_version,
            "jax_version": self.jax_version,
            "submission": self.submission,
            "submission_id": self.submission_id,
            "started_at": self.started_at,
            "seed": self.seed_option,
            "incomplete": self.incomplete,
            "score": None if self.incomplete else self.score,
            "max_score": self.max_score,
            "duration_s": round(self.duration_s, 3),
            "error": self.error,
            "exercises": [e.to_dict(private) for e in self.exercises],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunResult":
        """Read back ``to_dict``'s output (any audience); raises ValueError on another format."""
        if not isinstance(d, dict) or d.get("format_version") not in READABLE_FORMAT_VERSIONS:
            found = d.get("format_version") if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"not a grader result of format_version {RESULT_FORMAT_VERSION} (found {found!r})")
        return cls(
            exercises=tuple(ExerciseResult.from_dict(e) for e in d["exercises"]),
            grader_version=d["grader_version"], jax_version=d["jax_version"], seed_option=d.get("seed"),
            duration_s=d.get("duration_s", 0.0), started_at=d.get("started_at", ""),
            submission=d.get("submission", ""), error=d.get("error", ""), incomplete=bool(d.get("incomplete", False)),
            submission_id=str(d.get("submission_id", "")),
        )
