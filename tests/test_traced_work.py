"""The count floor (grader/probes/traced.py measures, grader/traced_work.py judges): a function
that computes in NumPy beside a do-nothing jit compiles like an honest one, and only its traced
program tells them apart."""

import jax
import jax.numpy as jnp
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


def test_a_missing_choice_is_said_to_be_made_another_way_not_outside_jax():
    def with_where(x, temperature, shift):  # both sides computed, one selected: JAX, but no cond
        return jnp.where(x.sum() > 0, jnp.exp(x), jnp.exp(-x))

    found = traced.work(Ctx(f=with_where), "f", ARGS, None, [0])
    with pytest.raises(CheckFailed) as info:
        expect_jax_work(found, what="f", needs={"lax.cond's cond": ("cond",), **NEEDS}, advice="use lax.cond")
    assert "not made by JAX's control flow" in info.value.diagnosis and "outside JAX" not in info.value.diagnosis


def test_a_stub_is_reported_as_not_implemented():
    def stub(x, temperature, shift):
        raise NotImplementedError("write me")
    with pytest.raises(NotImplementedError):
        traced.work(Ctx(f=stub), "f", ARGS, None, [0])


def test_an_answer_that_is_not_a_record_fails():
    with pytest.raises(CheckFailed):
        expect_jax_work(None, what="f", needs=NEEDS, advice="x")


# --- the floor on the counted request itself (grader.compiles reads, expect_compiled_work judges) ------

from grader.compiles import CompileRecorder  # noqa: E402
from grader.testing import compiles_of  # noqa: E402
from grader.traced_work import expect_compiled_work  # noqa: E402


class Meter:
    """What ``compiles_of`` asks of a sandbox: the meter of the last request (here: the recorder's
    own total, which the worker's trusted thread would read from JAX's caches)."""

    def __init__(self, total):
        self.last_meter = {"compiles": total}


def counted(fn, calls):
    """``fn`` called on each argument list under a recorder, as ``generic:count_compiles`` does;
    returns the request's ``Compiles``."""
    prepared = [[jax.device_put(a) if isinstance(a, np.ndarray) else a for a in args] for args in calls]
    with CompileRecorder() as rec:
        for args in prepared:
            jax.block_until_ready(fn(*args))
    plain = rec.to_plain()
    return compiles_of(Meter(rec.total), plain, None)


def fresh_shape(n):
    """Logits of a shape no other test compiles (each test's counted calls must compile)."""
    return [np.linspace(-1, 1, 2 * n, dtype=np.float32).reshape(2, n), 1.5, 0.25]


@jax.jit
def _switch_kernel(x, shift):
    return jax.nn.softmax(x + shift, axis=-1)


_switch_noop = jax.jit(lambda x: x)


def tracer_switch(x, temperature, shift):
    """Shows a tracer the real program; on concrete arrays, NumPy beside a do-nothing jit."""
    if isinstance(x, jax.core.Tracer):
        return _switch_kernel(x / temperature, shift)
    _switch_noop(x)
    z = np.asarray(x) / temperature + shift
    return np.exp(z) / np.exp(z).sum(-1, keepdims=True)


def test_a_tracer_switch_passes_the_separate_trace_but_not_the_counted_programs():
    judge(tracer_switch)  # the hole: make_jaxpr in a call of its own sees the real program
    compiles = counted(tracer_switch, [fresh_shape(11), fresh_shape(11)])
    assert compiles.total == 1 and compiles.programs_read == 1 and "exp" not in compiles.primitives
    with pytest.raises(CheckFailed) as info:
        expect_compiled_work(compiles, what="f", needs=NEEDS, advice="do the work in JAX")
    exc = info.value
    assert "the programs f compiled while it was measured hold no exp" in exc.message
    assert "the work must be inside the jitted program, not computed on the host beside it" in exc.diagnosis
    assert "[2, 11]" not in exc.diagnosis + exc.advice and "11" not in exc.diagnosis  # no input named


def test_an_honest_function_passes_the_counted_programs_nested_jits_included():
    inner = jax.jit(lambda z: jnp.exp(z - z.max(-1, keepdims=True)))

    @jax.jit
    def nested(x, shift):
        e = inner(x + shift)  # the exp lives in a nested jaxpr
        return e / e.sum(-1, keepdims=True)

    def honest_nested(x, temperature, shift):
        return nested(x / temperature, np.float32(shift))

    for fn, n in ((honest, 12), (honest_nested, 13)):
        compiles = counted(fn, [fresh_shape(n), fresh_shape(n)])
        assert compiles.primitives.get("exp", 0) >= 1 and compiles.programs_read >= 1, fn
        expect_compiled_work(compiles, what="f", needs=NEEDS, advice="x")


def test_a_host_callback_in_the_counted_programs_fails():
    compiles = counted(jax.jit(through_callback), [fresh_shape(14)])
    with pytest.raises(CheckFailed) as info:
        expect_compiled_work(compiles, what="f", needs=NEEDS, advice="x")
    assert "hand work to Python on the host" in info.value.message


def test_a_program_dropped_before_the_request_ends_shows_no_work():
    def fresh_jit_each_call(x, temperature, shift):
        return jax.jit(lambda v: jax.nn.softmax(v / temperature + shift, axis=-1))(x)

    compiles = counted(fresh_jit_each_call, [fresh_shape(15)])
    assert compiles.total >= 1 and compiles.programs_read == 0
    with pytest.raises(CheckFailed) as info:
        expect_compiled_work(compiles, what="f", needs=NEEDS, advice="x")
    assert "jit your function once" in info.value.diagnosis


def test_a_program_only_lowered_shows_nothing_and_eager_operations_count():
    """Decided (grader.traced_work): a lowering no compilation of the request used shows nothing;
    eager ``jnp`` operations compile one-primitive programs, and those count."""
    def lowered_only(x, temperature, shift):
        jax.jit(_switch_kernel.__wrapped__).lower(x, shift)  # the real program, lowered and never compiled
        _switch_noop(x)
        return np.asarray(x)

    compiles = counted(lowered_only, [fresh_shape(16)])
    assert "exp" not in compiles.primitives
    eager = counted(lambda x, t, s: (jnp.exp(x), np.asarray(x))[1], [fresh_shape(17)])
    assert eager.primitives.get("exp") == 1
    expect_compiled_work(eager, what="f", needs=NEEDS, advice="x")


def test_the_real_program_lowered_beside_a_trivial_one_of_its_name_is_not_read():
    """Lowerings and compilations are matched by name: the real program lowered (never compiled)
    and a do-nothing program of the same name compiled must not pass for the work."""
    def step(x, shift):
        return jax.nn.softmax(x + shift, axis=-1)

    def noop(x, shift):
        return x

    noop.__name__ = noop.__qualname__ = "step"
    real, trivial = jax.jit(step), jax.jit(noop)

    def same_name_decoy(x, temperature, shift):
        real.lower(x, shift)  # lowered, never compiled
        trivial(x, shift)  # compiled, under the same name
        return np.asarray(x)

    compiles = counted(same_name_decoy, [fresh_shape(18)])
    assert compiles.total == 1 and "exp" not in compiles.primitives and compiles.programs_unread == 2
    with pytest.raises(CheckFailed):
        expect_compiled_work(compiles, what="f", needs=NEEDS, advice="x")


def test_a_record_from_the_sandbox_is_read_within_bounds():
    record = {"primitives": {"exp": 2, "tanh": True, "sin": -1, "x" * 500: 1, 3: "a"},
              "programs": {"read": "1", "unread": 2}}
    compiles = compiles_of(Meter(3), record, None)
    assert compiles.primitives == {"exp": 2, "x" * 100: 1}
    assert (compiles.programs_read, compiles.programs_unread) == (0, 2)
    assert compiles_of(Meter(1), {"primitives": [1], "programs": 5}, None).primitives == {}
