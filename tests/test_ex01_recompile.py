"""Exercise 1's hidden draw classifies every change between calls; the workload's causes.

``analyse`` is what proves each Part A sequence is about the one kind of change its check
names (and what ``COVERAGE`` replays), so it is tested on hand-written pairs of calls here;
``recompile_causes`` is what the compile-budget check tells the learner.
"""

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hidden():
    spec = importlib.util.spec_from_file_location("ex01_hidden", REPO / "solutions/01_recompile_counting/test_hidden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def A(dtype="float32", *shape, numpy=False):
    return {"array": dtype, "shape": list(shape), **({"numpy": True} if numpy else {})}


def call(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@pytest.mark.parametrize("first,second,kind", [
    (call(A("float32", 3), 0.5), call(A("float32", 4), 0.5), "shape"),
    (call(A("float32", 3), 0.5), call(A("int32", 3), 0.5), "array_dtype_jax"),
    (call(A("float32", 3, numpy=True), 0.5), call(A("float16", 3, numpy=True), 0.5), "array_dtype_numpy"),
    (call(A("float32", 3), 2), call(A("float32", 3), 2.0), "scalar_type"),
    (call(A("float32", 3), 0.5), call(A("float32", 3), A("float32")), "py_vs_jax0d"),
    (call(A("float32", 3), 7), call(A("float32", 3), A("int32", numpy=True)), "py_vs_numpy0d"),
    (call(A("float32", 3), A("int32")), call(A("float32", 3), A("int32", numpy=True)), "jax0d_vs_numpy0d"),
    (call(A("float32", 3), 0.5, mode="sum"), call(A("float32", 3), 0.5, mode="max"), "static_value"),
    (call(A("float32", 3), 0.5, "max"), call(A("float32", 3), 0.5, mode="max"), "static_how"),
    (call(A("float32", 3), 0.5), call(A("float32", 3), 0.5, mode="sum"), "static_default_kw"),
    (call(A("float32", 3), 0.5), call(A("float32", 3), 0.5, "sum"), "static_default_pos"),
    (call({"tuple": [A("float32", 3)]}, 0.5), call({"dict": {"a": A("float32", 3)}}, 0.5), "pytree_kind tuple_vs_dict"),
    (call(A("float32", 3), 0.5), call({"tuple": [A("float32", 3), 2]}, 0.5), "pytree_kind"),
    (call({"tuple": [A("float32", 3)]}, 0.5), call({"tuple": [A("float32", 3), A("int32")]}, 0.5), "pytree_count"),
    (call({"dict": {"a": A(), "b": A()}}, 0.5), call({"dict": {"a": A()}}, 0.5), "pytree_count"),
    (call({"dict": {"a": A(), "b": A()}}, 0.5), call({"dict": {"a": A(), "c": A()}}, 0.5), "pytree_keys"),
    (call({"tuple": [{"dict": {"a": A()}}]}, 0.5), call({"tuple": [{"dict": {"w": A()}}]}, 0.5), "pytree_keys"),
    (call(A("float32", 3), 0.5), call(A("float32", 3), scale=0.5), "arg_how"),
    (call({"dict": {"a": A(), "b": A()}}, 0.5), call({"dict": {"b": A(), "a": A()}}, 0.5), "dict_order"),
    (call(A("float32", 3), scale=0.5, mode="sum"), call(A("float32", 3), mode="sum", scale=0.5), "kw_order"),
    (call(A("float32", 3), 0.5), call(A("float32", 3), 1.5), "float_values"),
    (call(A("float32", 3), 2), call(A("float32", 3), 5), "int_values"),
    (call(A("float32", 3), 0.5), call(A("float32", 3, numpy=True), 0.5), "numpy_vs_jax"),
])
def test_each_kind_of_change_is_recognised_alone(hidden, first, second, kind):
    assert hidden.changes(first, second) == set(kind.split())
    assert hidden.analyse([first, first, second]) == set(kind.split())


def test_a_repeat_is_no_change_and_going_back_is_a_revisit(hidden):
    a, b = call(A("float32", 3), 0.5), call(A("float32", 4), 0.5)
    assert hidden.analyse([a, a, a]) == set()
    assert hidden.analyse([a, b, a]) == {"shape", "revisit"}


def test_every_drawn_sequence_is_about_its_category_only(hidden):
    from grader.coverage import check_rng

    for seed in range(20):
        for check, plan in hidden.PLANS.items():
            for category, calls in hidden.draw_check_sequences(check_rng(seed, f"test_{check}"), check):
                found = hidden.analyse(calls)
                assert category in found and found <= hidden.allowed_kinds(category), (seed, check, category, calls)


def test_recompile_causes_name_what_the_compiling_requests_share(hidden):
    shape, mode = (4, 3), "probs"

    def causes(forms, compiled):
        return hidden.recompile_causes([(shape, mode, a, k) for a, k in forms], compiled)

    F, T, POS, KW = False, True, False, True
    assert causes([(F, POS), (T, POS), (T, KW)], [1, 0, 0]) == set()
    assert causes([(F, POS), (T, POS), (T, KW)], [1, 1, 0]) == {"shift"}  # differs from the first in shift only
    assert causes([(F, POS), (F, KW), (T, KW)], [1, 1, 0]) == {"mode"}  # differs from the first in mode only
    assert causes([(F, POS), (T, KW)], [1, 1]) == set()  # differs in both: nothing can be told
    assert causes([(F, POS), (T, POS), (T, KW), (F, KW)], [1, 0, 0, 1]) == {"shift", "mode"}  # neither alone
    assert causes([(F, POS), (T, POS), (F, POS)], [1, 1, 1]) == {"value"}  # the same form compiled again
    other = [((5, 3), mode, F, POS)]  # another pair's first request always compiles
    assert hidden.recompile_causes(other + [(shape, mode, F, POS)], [1, 1]) == set()
