"""Feedback helpers used by check tests: counting against the meter, explanations that say
which way a compile check failed, linear-time parsing of learner-influenced text."""

import time

import jax
import jax.numpy as jnp
import pytest

from grader.compiles import CompileRecorder
from grader.feedback import CheckFailed, expect_array, expect_close
from grader.testing import Compiles, changed_arguments, compiles_of, expect_compiles, explain, short_signature


class FakeSandbox:
    def __init__(self, compiles):
        self.last_meter = {"compiles": compiles, "traces": 0}
        self.violations = []

    def note_violation(self, reason):
        self.violations.append(reason)


def record_of(calls, static=()):
    def step(x, lr):
        return x * lr

    f = jax.jit(step, static_argnames=static)
    from jax._src.interpreters import pxla

    before = pxla._cached_compilation.cache_info().misses
    with CompileRecorder(explain_cache_misses=True) as rec:
        jnp.ones(3) + 1  # incidental
        for args, kwargs in calls:
            f(*args, **kwargs)
    total = pxla._cached_compilation.cache_info().misses - before
    return rec.to_plain(), total


def test_attribution_subtracts_only_proven_incidental_compilations():
    record, total = record_of([((jnp.zeros(3),), {"lr": 0.1}), ((jnp.zeros(3),), {"lr": 0.2})], static=("lr",))
    c = compiles_of(FakeSandbox(total), record)
    assert c.attributed == 2 and c.total == total and c.incidental == total - 2
    assert c.reference is None and c.counted == c.attributed  # no reference: the attribution decides
    text = explain(c)
    assert "compile 1: jit(step) with (f32[3])" in text
    assert "lr (static value" in text and "https://" not in text
    # compilations the recorder never saw (it was silenced) count as the learner's
    assert compiles_of(FakeSandbox(total + 3), record).attributed == 5
    # with a reference, the total is what counts, whatever the recorder attributed
    with_ref = compiles_of(FakeSandbox(total), record, reference_total=2)
    assert with_ref.counted == total and "the reference solution makes 2" in explain(with_ref)


def test_a_record_claiming_more_compilations_than_happened_counts_every_one_as_the_learners():
    # the strictest count, and no accusation: which code made the record wrong is not known
    box = FakeSandbox(1)
    c = compiles_of(box, {"incidental": 2, "events": [], "cache_misses": []})
    assert not box.violations and c.attributed == 1 and c.incidental == 0


def test_expect_compiles_says_which_way_it_failed():
    none = Compiles(total=2, reference=None, attributed=0, incidental=2)
    with pytest.raises(CheckFailed) as info:
        expect_compiles(none, at_least=1, what="`step`")
    assert "0 compilations" in info.value.diagnosis and "jitted" in info.value.diagnosis
    many = Compiles(total=3, reference=None, attributed=3)
    assert expect_compiles(many, at_most=3) == 3
    with pytest.raises(CheckFailed) as info:
        expect_compiles(many, at_most=1, what="`step`")
    err = info.value
    assert err.message == "3 compilations of `step`; expected at most 1" == err.diagnosis
    assert "no reference solution here" in err.measured
    assert err.expected == "at most 1 compilation(s)" and "jitted" not in err.diagnosis


def test_changed_arguments_reads_positional_paths():
    msg = "TRACING CACHE MISS ...\n  * at [0][1], now f32[4] and before f32[3]"
    assert changed_arguments([msg]) == ["positional argument 1 (shape or dtype)"]


def test_parsing_learner_logged_text_is_linear_and_capped():
    evil = "TRACING CACHE MISS\n" + "  * at " + "x, now " * 200_000  # quadratic for a naive regex
    t0 = time.monotonic()
    changed_arguments([evil] * 100)
    explain(Compiles(total=1, reference=1, attributed=1, cache_misses=(evil,) * 100))
    assert time.monotonic() - t0 < 2.0


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
    with pytest.raises(CheckFailed) as info:  # numbers as a learner reads them, not np.float32(...)
        expect_close(np.array([[0.5, 5.3333335]], np.float32), np.array([[0.5, 4.25]], np.float32), reveal=True)
    assert info.value.measured.endswith("at index (0, 1) got 5.33333") and info.value.expected.endswith("there: 4.25")
    with pytest.raises(CheckFailed) as info:
        expect_close(np.int32(3), np.int32(4), reveal=True)
    assert info.value.measured.endswith("; got 3") and info.value.expected.endswith("expected: 4")
    with pytest.raises(CheckFailed, match="NaN"):
        expect_close(np.array([np.nan]), np.array([1.0]))
