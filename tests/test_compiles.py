"""The compile recorder: whose compilations they are is decided by where the traced code
comes from -- never by names -- and JAX's own incidental compilations are told apart."""

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


def test_counts_shape_changes_and_cache_hits_with_signatures():
    f = fresh("shape_target")
    with CompileRecorder() as rec:
        f(jnp.zeros(3)); f(jnp.zeros(3)); f(jnp.zeros(4))
    assert rec.own("shape_target") == 2
    sigs = [e["signature"] for e in rec.events()]
    assert len(sigs) == 2 and "float32[3]" in sigs[0] and "float32[4]" in sigs[1]


def test_incidental_compiles_are_told_apart_by_where_their_code_comes_from():
    f = fresh("main_fn")
    with CompileRecorder() as rec:
        x = jnp.ones((5, 7)).astype(jnp.int32)  # broadcast_in_dim + convert_element_type: JAX's own code
        f(x)
    assert rec.own() == 1 and rec.by_name() == {"main_fn": 1}
    assert rec.incidental >= 1
    assert {c["name"] for c in rec.compilations if not c["own"]} <= {"broadcast_in_dim", "convert_element_type"}


def test_renamed_exec_made_and_partial_functions_are_still_own():
    def scaled(x, k):
        return x * k

    made = {}
    exec("import jax.numpy as jnp\ndef hidden_name(x):\n    return jnp.cos(x) + 1\n", made)
    renamed = fresh("looks_like_broadcast_in_dim")
    with CompileRecorder() as rec:
        jax.jit(functools.partial(scaled, k=3.0))(jnp.zeros(2))
        jax.jit(made["hidden_name"])(jnp.zeros(2))
        renamed(jnp.zeros(5))
        jax.jit(lambda v: v)(jnp.zeros(6))  # no equation at all: judged by where it is defined
    # partial and lambda are made and dropped at once: their cache entries are gone before the block
    # ends, so they are counted (as own) from JAX's compilation counter, not classified
    assert rec.learner == 4 and {c["name"] for c in rec.compilations if not c["own"]} <= {"broadcast_in_dim"}


def test_a_dropped_lowering_cannot_borrow_a_library_lowering_of_the_same_name():
    """A compile whose traced program was dropped (its lowering leaves JAX's cache, its
    compiled entry stays) beside a genuine library lowering of the same name: one library
    lowering accounts for one compilation, so the other is the learner's."""
    kept = []
    with CompileRecorder() as rec:
        for n in range(3):
            def root(s):
                return jnp.sqrt(s) * 2.0
            root.__name__ = "broadcast_in_dim"
            low = jax.jit(root).lower(jnp.float32(4.0))
            kept.append(low)
            del root
            low.compile()
            jnp.zeros((1000 + n,))  # JAX's own jit(broadcast_in_dim), a new lowering each time
    assert rec.learner >= 3 and rec.total - rec.incidental >= 3


def test_library_function_jitted_directly_counts_as_library_code():
    with CompileRecorder() as rec:
        jax.jit(jnp.sin)(jnp.zeros(3))
    assert rec.learner == 0 and rec.incidental == 1


def test_programs_with_no_traceback_to_judge_are_own_whoever_built_them():
    # a deserialized jax.export module and a host callback run code that no equation's
    # traceback describes: wrapped in library code, they would otherwise look like JAX's own
    from jax import export

    def work(x):
        return jnp.tanh(x) * 2

    spec = jax.ShapeDtypeStruct((4,), jnp.float32)
    with CompileRecorder() as rec:
        export.deserialize(export.export(jax.jit(work))(spec).serialize()).call(jnp.zeros(4))
        jax.jit(functools.partial(jax.pure_callback, np.tanh, spec))(jnp.zeros(4))
    assert rec.total >= 2 and rec.incidental == 0 and rec.learner == rec.total


def test_static_argument_values_each_compile():
    f = fresh("static_fn", static_argnames=("mode",))
    with CompileRecorder() as rec:
        f(jnp.zeros(3), mode="sum"); f(jnp.zeros(3), mode="max"); f(jnp.zeros(3), mode="sum")
    assert rec.own("static_fn") == 2


def test_nested_jit_compiles_only_the_outer_function():
    @jax.jit
    def inner_fn(x):
        return x * 2

    @jax.jit
    def outer_fn(x):
        return inner_fn(x) + 1

    with CompileRecorder() as rec:
        outer_fn(jnp.zeros(2))
    assert rec.by_name() == {"outer_fn": 1}


def test_a_silenced_log_hides_nothing():
    f = fresh("silenced_fn")
    with CompileRecorder() as rec:
        logging.disable(logging.CRITICAL)
        jax.config.update("jax_log_compiles", False)
        f(jnp.zeros(6)); f(jnp.zeros(7))
    logging.disable(logging.NOTSET)
    assert not rec.events()  # the log saw nothing...
    assert rec.own("silenced_fn") == 2  # ...the caches did


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


def test_defined_function_names_include_nested_and_lambdas_and_decode_like_python():
    src = "def a():\n    def b():\n        return lambda: 1\n    return b\nclass C:\n    def m(self): pass\n"
    names = defined_function_names(src)
    assert {"a", "b", "<lambda>", "m"} <= names
    assert "<listcomp>" not in defined_function_names("x = [i for i in range(3)]")
    latin1 = "# -*- coding: latin-1 -*-\n# caf\xe9\ndef f():\n    return 1\n".encode("latin-1")
    assert defined_function_names(latin1) == {"f"}
    assert defined_function_names(b"\xef\xbb\xbfdef g():\n    return 2\n") == {"g"}


def test_to_plain_is_json_ready():
    import json

    f = fresh("plain_fn")
    with CompileRecorder() as rec:
        f(np.zeros(2, np.float32))
    plain = rec.to_plain()
    assert plain["own_by_name"] == {"plain_fn": 1} and plain["events"][0]["name"] == "plain_fn"
    json.dumps(plain)
