"""The requirement map: every sentence of a statement that asks for something is graded.

The checker (``grader.course.requirements``) is tried on small made-up statements first, so each
rule is shown to fail, then run on every exercise of the course.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from grader.course import requirements as rq
from grader.manifest import load

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = load(ROOT / "exercises" / "manifest.toml")

STATEMENT = textwrap.dedent("""\
    # Exercise 99: made up

    ## The idea

    Every program here must be pure; this section explains and asks nothing.

    ## Your task

    `f(x)` returns the sum of `x`.
    It must be jitted, and each call compiles at most once.

    The docstring style is up to you (not graded).

    ```python
    # code blocks are left out: must, exactly, never
    ```

    ## What the grader checks

    Every check is listed here; nothing in this section is a requirement.
    """)
CHECKS = {"sums": "hidden", "sums_small": "public", "compiles_once": "hidden"}
FIXTURES = {"sums_squares": ("sums",), "jit_per_call": ("compiles_once",)}


def good_map(**changes) -> rq.RequirementMap:
    reqs = [
        rq.Requirement("sum", "`f(x)` returns the sum of `x`", ("sums",), ("sums_small",), "", ("sums_squares",)),
        rq.Requirement("jit", "It must be jitted, and each call compiles at most once", ("compiles_once",), (),
                       "public inputs are too few to count compilations", ("jit_per_call",)),
    ]
    ungraded = [rq.NotGraded("The docstring style is up to you", "style")]
    for key, value in changes.items():
        if key == "requirements":
            reqs = value
        elif key == "not_graded":
            ungraded = value
    return rq.RequirementMap(tuple(reqs), tuple(ungraded))


def test_task_sentences_skip_the_idea_the_checks_and_code():
    sentences = rq.task_sentences(STATEMENT)
    assert "`f(x)` returns the sum of `x`." in sentences
    assert not any("pure" in s or "listed here" in s or "code blocks" in s for s in sentences)


def test_a_complete_map_has_no_problems():
    assert rq.problems(99, STATEMENT, good_map(), CHECKS, FIXTURES) == []


@pytest.mark.parametrize("broken, expected", [
    (dict(requirements=[rq.Requirement("sum", "`f(x)` returns the sum of `x`", ("sums",), ("sums_small",), "",
                                       ("sums_squares",))]), "no requirement covers it"),
    (dict(requirements=[rq.Requirement("sum", "`f(x)` returns the product", ("sums",), ("sums_small",), "",
                                       ("sums_squares",))]), "not words of the statement"),
    (dict(requirements=[rq.Requirement("sum", "`f(x)` returns the sum of `x`", (), ("sums_small",), "",
                                       ("sums_squares",))]), "no hidden check"),
    (dict(requirements=[rq.Requirement("sum", "`f(x)` returns the sum of `x`", ("sums_small",), (), "x",
                                       ("sums_squares",))]), "is not a hidden check"),
    (dict(requirements=[rq.Requirement("sum", "`f(x)` returns the sum of `x`", ("sums",), (), "", ("sums_squares",))]),
     "public_gap does not say why"),
    (dict(requirements=[rq.Requirement("sum", "`f(x)` returns the sum of `x`", ("sums",), ("sums_small",), "", ())]),
     "no known-wrong fixture"),
    (dict(requirements=[rq.Requirement("sum", "`f(x)` returns the sum of `x`", ("sums",), ("sums_small",), "",
                                       ("jit_per_call",))]), "must_fail names none"),
    (dict(requirements=[rq.Requirement("sum", "`f(x)` returns the sum of `x`", ("sums",), ("sums_small",), "",
                                       ("no_such_fixture",))]), "is not a known-wrong fixture"),
    (dict(not_graded=[rq.NotGraded("each call compiles at most once", "because")]), "must say 'not graded'"),
])
def test_each_rule_fails_when_broken(broken, expected):
    found = rq.problems(99, STATEMENT, good_map(**broken), CHECKS, FIXTURES)
    assert any(expected in p for p in found), found


@pytest.mark.parametrize("ex", MANIFEST.exercises, ids=lambda ex: f"ex{ex.number:02d}")
def test_every_statement_requirement_has_a_check_and_a_fixture(ex):
    problems = rq.check_exercise(ex, ROOT)
    assert not problems, "\n".join(problems)
