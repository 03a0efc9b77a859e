"""A hand-built, deterministic ``RunResult`` that exercises every branch of the report writers.

No grading happens: the result is written out by hand so the report tests run in
milliseconds and their golden files never depend on JAX or timing.  It covers passed,
failed, error and not-run checks; public and hidden checks; a check with a file and line;
an exercise the grader failed on (with an instructor-only traceback); an exercise graded
with public checks only; and messages full of characters that need escaping somewhere
(``%``, newlines, ``,``, ``:``, ``<``, ``&``, quotes, backticks, ``|``, an ANSI escape).

Markers that must never reach a learner-facing report:

* ``SECRET`` is in every ``private`` field (instructor only; ``to_dict()`` drops it too);
* ``HIDDEN_DETAIL`` is in a hidden check's measured/expected/detail fields -- the runner
  never fills those for hidden checks, but the writers must not show them even if it did
  (``render.to_json`` does show them: it prints the fields as they are);
* ``STDOUT`` is in what the learner's code printed (it can echo hidden inputs).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from grader.results import (
    ERROR,
    FAILED,
    NOT_RUN,
    PASSED,
    CheckResult,
    ExerciseResult,
    RunResult,
)

SECRET = "SECRET-PRIVATE-MARKER-7f3a"
HIDDEN_DETAIL = "HIDDEN-DETAIL-MARKER-c41d"
STDOUT = "STDOUT-MARKER-90be"

#: The learner's checkout, as the GitHub writer sees it (never touched on disk).
ROOT = PurePosixPath("/checkout/learner-repo")
EX1_FILE = str(ROOT / "exercises/01_recompile_counting/recompile.py")
EX3_FILE = str(ROOT / "exercises/03_per_example_grad_norms/grad_norms.py")
OUTSIDE_FILE = "/tmp/elsewhere/retrace.py"

TRICKY_MESSAGE = ('50% of rows differ, e.g. row 3: got <nan> & expected "1.0", not \'2.0\'\n'
                  "second line | with a pipe\r\nthird: `code` and ``` fences")

NOT_IMPLEMENTED = "not implemented yet: your function still raises NotImplementedError"


def _exercise1() -> ExerciseResult:
    checks = (
        CheckResult("predicts_public_sequences", "public", "predict_compiles matches live JAX on six sequences",
                    PASSED, 0, 0, duration_s=0.25),
        CheckResult("serves_small_workload", "public", "score is right and compiles at most once per shape",
                    FAILED, 0, 0, message=TRICKY_MESSAGE, measured="6 compilations: (f32[3], f32[]), ...",
                    expected="at most 2", hint="keep `mode` static, 100% of the time",
                    detail='Traceback (most recent call last):\n  File "recompile.py", line 42\n'
                           "\x1b[31mValueError: bad <shape>\x1b[0m",
                    duration_s=1.5, file=EX1_FILE, line=42),
        CheckResult("predicts_random_sequences", "hidden", "predict_compiles matches live JAX on random sequences",
                    FAILED, 0, 3, message="at least one predicted compile count differs from live JAX",
                    measured=HIDDEN_DETAIL, expected=HIDDEN_DETAIL, detail=f"Traceback: {HIDDEN_DETAIL}",
                    duration_s=0.75, file=EX1_FILE, line=17,
                    private=f"measured: 7 compiles\nexpected: 3 compiles ({SECRET})"),
        CheckResult("workload_outputs_correct", "hidden", "score matches a NumPy reference",
                    PASSED, 2, 2, duration_s=0.5),
        CheckResult("workload_within_compile_budget", "hidden", "the workload compiles at most once per pair",
                    ERROR, 0, 3, message="grader error in this hidden check (reported to your instructor)",
                    duration_s=0.125, private=f"Traceback (most recent call last):\nKeyError: {SECRET}"),
    )
    return ExerciseResult(1, "recompile-counting", "Counting recompilations", (EX1_FILE,), 1111, checks,
                          hidden_run=True, duration_s=3.5, output=f"learner printed {STDOUT}\n")


def _exercise2() -> ExerciseResult:
    msg = "not graded: the grader failed on this exercise (reported to your instructor)"
    checks = (
        CheckResult("finds_retraces", "public", "names every retrace", ERROR, 0, 0, message=msg),
        CheckResult("explains_retraces", "hidden", "explains why each retrace happened", ERROR, 0, 4, message=msg),
    )
    return ExerciseResult(2, "retrace-diagnosis", "Diagnosing retraces", (OUTSIDE_FILE,), 2222, checks,
                          hidden_run=True, duration_s=0.0,
                          error="grader error: this exercise could not be graded (not your code's fault; "
                                "your instructor has the details)",
                          private=f"Traceback (most recent call last):\n  File \"runner.py\"\nOSError: {SECRET}")


def _exercise3() -> ExerciseResult:
    checks = (
        CheckResult("matches_one_at_a_time", "public", "equals a per-example loop", FAILED, 0, 0,
                    message=NOT_IMPLEMENTED, detail="Traceback:\nNotImplementedError", duration_s=0.5),
        CheckResult("compiles_once", "public", "one compilation for any batch size", FAILED, 0, 0,
                    message=NOT_IMPLEMENTED, detail="Traceback:\nNotImplementedError", duration_s=0.25),
        CheckResult("matches_on_random_batches", "hidden", "equals a per-example loop on random batches",
                    NOT_RUN, 0, 0, message="hidden check: runs when your course grades your work"),
    )
    return ExerciseResult(3, "per-example-grad-norms", "Per-example <grad> norms | vmap & *jit*", (EX3_FILE,), 3333,
                          checks, hidden_run=False, duration_s=2.25)


def _exercise4() -> ExerciseResult:
    checks = (
        CheckResult("jaxpr_walk", "hidden", "walks every equation", NOT_RUN, 0, 0,
                    message="not graded: the grader failed on this exercise (reported to your instructor)"),
    )
    return ExerciseResult(4, "reading-a-jaxpr", "Reading a jaxpr", (str(ROOT / "exercises/06/jaxpr_reading.py"),),
                          4444, checks, hidden_run=False,
                          error="grader error: this exercise could not be graded (not your code's fault; "
                                "your instructor has the details)",
                          private=f"RuntimeError: {SECRET}")


def sample_run() -> RunResult:
    """The sample: 4 exercises, 2 of 12 points."""
    return RunResult(
        exercises=(_exercise1(), _exercise2(), _exercise3(), _exercise4()),
        grader_version="0.1.0", jax_version="0.10.2", seed_option=None, duration_s=12.3456,
        started_at="2026-01-02T03:04:05Z", submission="learner/jax-exercises@0123abc",
    )


RUN_ERROR = "the grader could not run (not your code's fault; your instructor has been told)"


def nothing_graded_run() -> RunResult:
    """Grading could not run at all (``grade ci`` with a broken course): no exercises, ``error`` set."""
    return RunResult(exercises=(), grader_version="0.1.0", jax_version="0.10.2", seed_option=7,
                     started_at="2026-01-02T03:04:05Z", submission="learner/jax-exercises@0123abc", error=RUN_ERROR)
