"""Feedback helpers used by check tests: attribution, explanations, CheckFailed contents."""

import jax
import jax.numpy as jnp
import pytest

from grader.compiles import CompileRecorder
from grader.feedback import CheckFailed, expect_array, expect_close
from grader.testing import attributed, changed_arguments, expect_compiles, explain, short_signature


def record_of(calls, static=()):
    def step(x, lr):
        return x * lr

    f = jax.jit(step, static_argnames=static)
    with CompileRecorder(explain_cache_misses=True) as rec:
        jnp.ones(3)  # incidental
        for args, kwargs in calls:
            f(*args, **kwargs)
    return rec.to_plain()


def test_explain_names_the_changed_argument_and_signatures():
    record = record_of([((jnp.zeros(3),), {"lr": 0.1}), ((jnp.zeros(3),), {"lr": 0.2})], static=("lr",))
    count, events, incidental = attributed(record, {"step"})
    assert count == 2 and len(events) == 2
    text = explain(record, {"step"})
    assert "compile 1: jit(step) with (f32[3])" in text
    assert "lr (static value" in text
    assert "https://" not in text


def test_expect_compiles_reports_measured_and_expected():
    record = record_of([((jnp.zeros(3),), {"lr": 0.1}), ((jnp.zeros(4),), {"lr": 0.1})])
    assert expect_compiles(record, {"step"}, at_most=2) == 2
    with pytest.raises(CheckFailed) as info:
        expect_compiles(record, {"step"}, at_most=1, what="`step`")
    err = info.value
    assert err.message == "2 compilations of `step`; expected at most 1"
    assert "now f32[4] and before f32[3]" in err.measured and err.expected == "at most 1 compilation(s)"
    with pytest.raises(CheckFailed, match="no compilation"):
        expect_compiles(record, {"other"}, at_least=1)


def test_changed_arguments_reads_positional_paths():
    msg = "TRACING CACHE MISS ...\n  * at [0][1], now f32[4] and before f32[3]"
    assert changed_arguments([msg]) == ["positional argument 1 (shape or dtype)"]


def test_short_signature():
    assert short_signature("(ShapedArray(float32[2,3]), ShapedArray(float32[], weak_type=True))") == "f32[2,3], f32[]{weak}"


def test_expect_array_and_close_messages():
    import numpy as np

    with pytest.raises(CheckFailed, match="wrong shape"):
        expect_array(np.zeros(3, np.float32), shape=(4,))
    with pytest.raises(CheckFailed, match="should be an array"):
        expect_array([1.0], shape=(1,))
    with pytest.raises(CheckFailed) as info:
        expect_close(np.array([1.0, 2.0]), np.array([1.0, 3.0]), reveal=True)
    assert "1 of 2 values off" in info.value.measured and "index (1,)" in info.value.measured
    with pytest.raises(CheckFailed, match="NaN"):
        expect_close(np.array([np.nan]), np.array([1.0]))
