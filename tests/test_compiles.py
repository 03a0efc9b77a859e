"""The compile counter: counts by name, ignores incidental compiles, survives a silenced log."""

import functools
import logging

import jax
import jax.numpy as jnp
import numpy as np

from grader.compiles import CompileRecorder, defined_function_names


def fresh(name="target", **jit_kwargs):
    def target(x, mode="sum"):
        return jnp.sum(x) if mode == "sum" else jnp.max(x)

    target.__name__ = target.__qualname__ = name
    return jax.jit(target, **jit_kwargs)


def test_counts_shape_changes_and_cache_hits():
    f = fresh("shape_target")
    with CompileRecorder() as rec:
        f(jnp.zeros(3)); f(jnp.zeros(3)); f(jnp.zeros(4))
    assert rec.count(["shape_target"]) == 2
    assert [e.name for e in rec.events if e.name == "shape_target"] == ["shape_target"] * 2
    mine = [e for e in rec.events if e.name == "shape_target"]
    assert "float32[3]" in mine[0].signature and "float32[4]" in mine[1].signature


def test_incidental_compiles_are_not_attributed():
    f = fresh("main_fn")
    with CompileRecorder() as rec:
        x = jnp.ones((5, 7)).astype(jnp.int32)  # broadcast_in_dim + convert_element_type
        f(x)
    by_name = rec.by_name()
    assert rec.count(["main_fn"]) == 1
    assert sum(by_name.values()) >= 1
    assert set(by_name) - {"main_fn"} <= {"broadcast_in_dim", "convert_element_type"}


def test_static_argument_values_each_compile():
    f = fresh("static_fn", static_argnames=("mode",))
    with CompileRecorder() as rec:
        f(jnp.zeros(3), mode="sum"); f(jnp.zeros(3), mode="max"); f(jnp.zeros(3), mode="sum")
    assert rec.count(["static_fn"]) == 2


def test_nested_jit_compiles_only_the_outer_function():
    @jax.jit
    def inner_fn(x):
        return x * 2

    @jax.jit
    def outer_fn(x):
        return inner_fn(x) + 1

    with CompileRecorder() as rec:
        outer_fn(jnp.zeros(2))
    assert rec.count(["outer_fn"]) == 1
    assert rec.count(["inner_fn"]) == 0


def test_partial_is_logged_under_the_wrapped_name():
    def scaled(x, k):
        return x * k

    with CompileRecorder() as rec:
        jax.jit(functools.partial(scaled, k=3.0))(jnp.zeros(2))
    assert rec.count(["scaled"]) == 1


def test_monitoring_still_counts_when_the_log_is_silenced():
    f = fresh("silenced_fn")
    with CompileRecorder() as rec:
        logging.disable(logging.CRITICAL)
        jax.config.update("jax_log_compiles", False)
        f(jnp.zeros(6)); f(jnp.zeros(7))
    logging.disable(logging.NOTSET)
    assert not [e for e in rec.events if e.name == "silenced_fn"]
    assert rec.count(["silenced_fn"]) == 2


def test_cache_miss_explanations_name_the_argument():
    f = fresh("explained_fn")
    with CompileRecorder(explain_cache_misses=True) as rec:
        f(jnp.zeros(3)); f(jnp.zeros(4))
    assert any("now f32[4] and before f32[3]" in m for m in rec.cache_misses)


def test_recorder_restores_config():
    before = (jax.config.jax_log_compiles, jax.config.jax_explain_cache_misses)
    with CompileRecorder(explain_cache_misses=True):
        pass
    assert (jax.config.jax_log_compiles, jax.config.jax_explain_cache_misses) == before


def test_defined_function_names_include_nested_and_lambdas():
    src = "def a():\n    def b():\n        return lambda: 1\n    return b\nclass C:\n    def m(self): pass\n"
    names = defined_function_names(src)
    assert {"a", "b", "<lambda>", "m"} <= names
    assert "<listcomp>" not in defined_function_names("x = [i for i in range(3)]")


def test_to_plain_is_json_ready():
    f = fresh("plain_fn")
    with CompileRecorder() as rec:
        f(np.zeros(2, np.float32))
    plain = rec.to_plain()
    assert plain["by_name"]["plain_fn"] == 1
    assert isinstance(plain["events"][0]["log_line"], str)
