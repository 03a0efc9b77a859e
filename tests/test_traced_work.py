"""The count floor (grader/probes/traced.py measures, grader/traced_work.py judges): a function
that computes in NumPy beside a do-nothing jit compiles like an honest one, and only its traced
program tells them apart."""

import jax
import numpy as np
import pytest

from grader.feedback import CheckFailed
from grader.probes import traced
from grader.traced_work import expect_jax_work


class Ctx:
    """The one thing the probe asks of the sandbox's context: the learner's function by name."""

    def __init__(self, **functions):
        self.functions = functions

    def function(self, name):
        return self.functions[name]


@jax.jit
def _honest_kernel(x, shift):
    return jax.nn.softmax(x + shift, axis=-1)


def honest(x, temperature, shift):
    shift = np.float32(shift)  # host-side work on an argument left to the host is fine
    return _honest_kernel(x / temperature, shift)


_noop = jax.jit(lambda x: x)


def numpy_work(x, temperature, shift):
    _noop(x)
    z = np.asarray(x) / temperature + shift
    return np.exp(z) / np.exp(z).sum(-1, keepdims=True)


def through_callback(x, temperature, shift):
    def host(a):
        return np.exp(a) / np.exp(a).sum(-1, keepdims=True)
    return jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def precomputed(x, temperature, shift):  # the answer from somewhere else, plus x * 0
    return x * 0.0 + 1.0 / x.shape[-1]


NEEDS = {"the softmax's exp": ("exp",)}
ARGS = [np.ones((2, 3), np.float32), 1.5, 0.25]


def judge(fn):
    found = traced.work(Ctx(f=fn), "f", ARGS, None, [0])
    expect_jax_work(found, what="f", needs=NEEDS, advice="do the work in JAX")
    return found


def test_an_honest_function_passes_with_host_work_on_untraced_arguments():
    found = judge(honest)
    assert found["primitives"]["exp"] >= 1 and found["total_eqns"] > 0


@pytest.mark.parametrize("fn, words", [(numpy_work, "does not trace under JAX"),
                                       (through_callback, "hands its work to Python on the host"),
                                       (precomputed, "lacks the softmax's exp")])
def test_numpy_callbacks_and_precomputed_answers_fail(fn, words):
    with pytest.raises(CheckFailed) as info:
        judge(fn)
    assert words in info.value.message and info.value.diagnosis and info.value.advice


def test_a_stub_is_reported_as_not_implemented():
    def stub(x, temperature, shift):
        raise NotImplementedError("write me")
    with pytest.raises(NotImplementedError):
        traced.work(Ctx(f=stub), "f", ARGS, None, [0])


def test_an_answer_that_is_not_a_record_fails():
    with pytest.raises(CheckFailed):
        expect_jax_work(None, what="f", needs=NEEDS, advice="x")
