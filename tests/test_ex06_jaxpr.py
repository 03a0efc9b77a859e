"""Exercise 6's hidden checks: the function writer puts every construct where it says, and
``diagnose`` recognises each known wrong walk from its counts (the walks of the fixtures)."""

import importlib.util
from pathlib import Path

import pytest

from grader import ir
from grader.coverage import check_rng
from grader.exercises.ex06_jaxpr.judges import trace

REPO = Path(__file__).resolve().parents[1]
DIR = "06_reading_a_jaxpr"


@pytest.fixture(scope="module")
def hidden():
    spec = importlib.util.spec_from_file_location("ex06_hidden", REPO / "solutions" / DIR / "test_hidden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fixture_walker(name):
    """The fixture's count_primitives, defined the way grade verify builds it (solution + mistake)."""
    namespace = {"__name__": f"fixture_{name}"}
    source = (REPO / "solutions" / DIR / "jaxpr_reading.py").read_text()
    source += "\n\n" + (REPO / "fixtures" / DIR / name / "jaxpr_reading.py").read_text()
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace["count_primitives"]


@pytest.fixture(scope="module")
def constructs(hidden):
    """Every construct's function at one seed, traced: {kind: ClosedJaxpr}."""
    return {kind: trace(source, "f", specs)
            for kind, (source, specs, _) in hidden.draw_constructs(check_rng(7, "test_counts_inside_every_construct")).items()}


def test_the_switch_function_holds_a_cond_with_three_branches(constructs):
    conds = [e for e in ir.walk_equations(constructs["switch"]) if e.primitive.name == "cond"]
    assert any(len(e.params["branches"]) == 3 for e in conds)


def test_the_checkpoint_function_holds_remat2_with_a_bare_jaxpr(constructs):
    remats = [e for e in ir.walk_equations(constructs["checkpoint"]) if e.primitive.name == "remat2"]
    assert remats and not hasattr(remats[0].params["jaxpr"], "consts")


def test_the_reference_walk_has_no_problem(hidden, constructs):
    for kind, closed in constructs.items():
        assert hidden.count_problem(ir.primitive_counts(closed), closed) is None, kind


@pytest.mark.parametrize("fixture,mistake", [
    ("top_level_only", "only the top-level equations"),
    ("forgets_the_holder", "not the equation holding them"),
    ("skips_seen_subjaxprs", "skip sub-jaxprs you have seen before"),
    ("only_jaxpr_param", "only look inside a param named 'jaxpr'"),
    ("closed_jaxprs_only", "only descend into ClosedJaxpr values"),
    ("two_branches_only", "only the first two jaxprs of a tuple"),
])
def test_each_known_mistake_is_recognised(hidden, constructs, fixture, mistake):
    walk = fixture_walker(fixture)
    problems = [hidden.count_problem(walk(closed), closed) for closed in constructs.values()]
    problems = [p for p in problems if p]
    assert problems, f"{fixture} counts every construct right"
    assert all(any(mistake in m for m in mistakes) for _, mistakes in problems if mistakes), problems
    assert any(mistakes for _, mistakes in problems)


def test_nested_draws_nest(hidden):
    for seed in range(5):
        for _, _, used in hidden.draw_nested(check_rng(seed, "test_counts_nested_primitives")):
            assert any(depth >= 1 for _, depth in used)


@pytest.fixture(scope="module")
def public_constructs():
    """The public check's fixed functions, traced: {name: ClosedJaxpr}."""
    spec = importlib.util.spec_from_file_location("ex06_public", REPO / "exercises" / DIR / "test_public.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: trace(source, "f", specs) for name, (_, source, specs) in module.CONSTRUCTS.items()}


@pytest.mark.parametrize("fixture", ["top_level_only", "forgets_the_holder", "skips_seen_subjaxprs", "only_jaxpr_param",
                                     "closed_jaxprs_only", "two_branches_only", "one_level_deep",
                                     "text_lines_miss_shared_jaxprs", "zero_entries_kept"])
def test_every_wrong_walk_fails_a_public_function(hidden, public_constructs, fixture):
    """The public functions hold every place a sub-jaxpr can hide, so no known wrong walk
    passes them all (a learner who makes the mistake hears it before the hidden checks run)."""
    walk = fixture_walker(fixture)
    assert any(hidden.count_problem(walk(closed), closed) for closed in public_constructs.values())


def test_the_reference_walk_is_right_on_the_public_functions(hidden, public_constructs):
    for name, closed in public_constructs.items():
        assert hidden.count_problem(ir.primitive_counts(closed), closed) is None, name
