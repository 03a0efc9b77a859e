"""Plain data: round trips, and refusal of anything that could fake a verdict."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from grader import plaindata
from grader.plaindata import NotPlainData, from_plain, to_plain


def roundtrip(value):
    return from_plain(plaindata.loads(plaindata.dumps(to_plain(value))))


def test_round_trip_of_nested_data():
    value = {"a": [1, 2.5, "s", None, True], "b": (np.arange(6, dtype=np.int32).reshape(2, 3),), "c": jnp.ones(2)}
    back = roundtrip(value)
    assert back["a"] == [1, 2.5, "s", None, True]
    assert isinstance(back["b"], tuple) and back["b"][0].dtype == np.int32 and back["b"][0].shape == (2, 3)
    assert type(back["c"]) is np.ndarray and back["c"].dtype == np.float32


def test_non_finite_floats_survive():
    back = roundtrip([math.nan, math.inf])
    assert math.isnan(back[0]) and back[1] == math.inf


def test_scalars_and_bfloat16():
    assert roundtrip(np.float32(1.5)).shape == ()
    assert str(roundtrip(jnp.ones(2, jnp.bfloat16)).dtype) == "bfloat16"


class AlwaysEqual:
    def __eq__(self, other):
        return True


class IntLike(int):
    def __eq__(self, other):
        return True


class ArrayLike(np.ndarray):
    pass


class DictLike(dict):
    pass


@pytest.mark.parametrize("value", [AlwaysEqual(), IntLike(3), np.zeros(2).view(ArrayLike), DictLike(), {1: 2},
                                   np.array(["a"]), lambda: 1, {"__array__": 1}])
def test_refuses_what_could_fake_equality(value):
    with pytest.raises(NotPlainData):
        to_plain(value)


def test_refusal_says_where_the_value_sits():
    with pytest.raises(NotPlainData, match=r"result\['k'\]\[1\]"):
        to_plain({"k": [1, AlwaysEqual()]})


def test_refuses_deep_nesting():
    value = []
    for _ in range(40):
        value = [value]
    with pytest.raises(NotPlainData):
        to_plain(value)


def test_decoder_refuses_unknown_dtypes():
    with pytest.raises(ValueError):
        from_plain({"__array__": ["object", [1], ""]})


def test_integers_beyond_64_bits_are_refused_on_both_sides():
    """No answer needs one, and one past 1e308 breaks float() and math.isfinite on the
    trusted side (a grader error instead of the learner's)."""
    import pytest

    from grader import plaindata

    assert plaindata.from_plain(plaindata.to_plain(2**62)) == 2**62
    for big in (2**63, -(2**63) - 1, 10**400):
        with pytest.raises(plaindata.NotPlainData):
            plaindata.to_plain([1, {"x": big}])
        with pytest.raises(plaindata.NotPlainData):
            plaindata.from_plain([1, {"x": big}])
