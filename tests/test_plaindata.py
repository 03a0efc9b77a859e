"""Plain data: round trips, refusal of anything that could fake a verdict, and what an answer may cost."""

import dataclasses
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


def test_a_namedtuple_travels_as_the_plain_tuple_of_its_items_without_running_its_methods():
    """What a learner returns for "returns (params, key, masks)" may be a NamedTuple: it is a
    tuple, and arrives as one; its items are read from the tuple's storage, so a subclass's
    own __iter__ or __getitem__ never runs (and cannot show other items)."""
    import collections
    from typing import NamedTuple

    class Result(NamedTuple):
        params: list
        loss: float

    class Liar(tuple):
        def __iter__(self):
            raise AssertionError("a subclass method ran")

        def __getitem__(self, i):
            raise AssertionError("a subclass method ran")

    Pair = collections.namedtuple("Pair", "a b")
    assert roundtrip(Result([1, 2], 0.5)) == ([1, 2], 0.5) and type(roundtrip(Result([1], 1.0))) is tuple
    assert roundtrip(Pair(1, (2, 3))) == (1, (2, 3))
    assert roundtrip(Liar((1, 2))) == (1, 2)
    assert plaindata.plain_sequence(Liar((4,))) == (4,) and plaindata.plain_sequence([1]) == [1]
    assert plaindata.plain_sequence({"a": 1}) is None and plaindata.plain_sequence("ab") is None
    assert type(plaindata.as_plain_sequence(Pair(1, 2))) is tuple and plaindata.as_plain_sequence("ab") == "ab"


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


# --- what an answer may cost (grader.boundedjson) ----------------------------------------------

def _assorted(seed: int):
    """A nested value of every kind plain data carries, with strings that look like JSON."""
    import random

    rng = random.Random(seed)

    def draw(depth=0):
        r = rng.random()
        if depth > 4 or r < 0.3:
            return rng.choice([None, True, 1, -5, 2.5, math.nan, math.inf, 'a,b:c[{"\\', "", '\\\\"', "]]]}",
                               np.float32(1), np.zeros((2, 3)), np.zeros(()), np.arange(3)])
        if r < 0.55:
            return [draw(depth + 1) for _ in range(rng.randint(0, 4))]
        if r < 0.75:
            return tuple(draw(depth + 1) for _ in range(rng.randint(0, 4)))
        return {f'k{i},:["\\': draw(depth + 1) for i in range(rng.randint(0, 4))}

    return draw()


def _json_depth(x) -> int:
    if isinstance(x, list):
        return 1 + max(map(_json_depth, x), default=0)
    if isinstance(x, dict):
        return 1 + max(map(_json_depth, x.values()), default=0)
    return 0


@pytest.mark.parametrize("chunk", [None, 7], ids=["one_chunk", "strings_across_chunks"])
def test_elements_and_depth_are_read_off_the_text_exactly(monkeypatch, chunk):
    """The sandbox counts what it encodes in the unit the trusted side reads off the text
    (so an honest worker refuses first), and the depth is json.loads' own, whatever the
    strings hold and wherever a chunk boundary falls."""
    import json

    from grader import boundedjson

    if chunk:
        monkeypatch.setattr(boundedjson, "_CHUNK", chunk)
    unlimited = boundedjson.Limits(max_bytes=1 << 30, max_elements=10**9, max_depth=10**6)
    for seed in range(300):
        value = _assorted(seed)
        exact = plaindata.to_plain(value)
        text = json.dumps(exact, indent=seed % 3 or None, ensure_ascii=seed % 2 == 0)
        shape = boundedjson.check(text, unlimited)
        n = shape.elements
        assert shape.depth == _json_depth(json.loads(text))
        plaindata.to_plain(value, max_elements=n)  # exactly at the limit: taken
        if n > 1:
            with pytest.raises(plaindata.TooManyValues):
                plaindata.to_plain(value, max_elements=n - 1)


def test_an_answer_of_too_many_values_is_refused_before_its_values_are_looked_at():
    with pytest.raises(plaindata.TooManyValues, match="more than 1000 values"):
        plaindata.to_plain({str(i): AlwaysEqual() for i in range(1001)}, max_elements=1000)
    with pytest.raises(plaindata.TooManyValues, match=r"result\[999\]"):  # the list is one of the 1000
        plaindata.to_plain(list(range(5000)), max_elements=1000)
    big = np.zeros(1 << 20, np.float32)  # an array of any size is a handful of elements
    assert plaindata.to_plain([big] * 10, max_elements=100)


def test_the_trusted_side_refuses_what_json_loads_would_choke_on():
    """Deep nesting (a RecursionError in json.loads), millions of values, too many bytes:
    each refused by a scan that builds nothing and does not recurse."""
    from grader import boundedjson

    limits = boundedjson.Limits(max_bytes=1 << 20, max_elements=1000, max_depth=8)
    with pytest.raises(boundedjson.TooCostly, match="nested more than 8 levels deep"):
        boundedjson.loads(b"[" * 100_000 + b"]" * 100_000, dataclasses.replace(limits, max_elements=10**6))
    for text, what in [(b"[" * 100_000 + b"]" * 100_000, "elements"), (b"[" + b"0," * 5000 + b"0]", "elements"),
                       (b'{"a":' * 9 + b"1" + b"}" * 9, "depth"), (b'"' + b"x" * (2 << 20) + b'"', "bytes")]:
        with pytest.raises(boundedjson.TooCostly) as err:
            boundedjson.loads(text, limits)
        assert err.value.what == what
    assert boundedjson.loads(b'["[[[[[[[[[[", "\\\\", "\\"[[[[[[[[[[[[", {"k,:": [1, 2]}]', limits)[3] == {"k,:": [1, 2]}
    with pytest.raises(ValueError, match="never opened"):
        boundedjson.loads(b"]" * 10 + b"[" * 10, limits)


def test_the_sandbox_client_reads_answers_within_the_workers_own_limits():
    """``client.ANSWER_LIMITS`` is written out (the client must not import numpy early):
    it must stay in step with what the worker's encoder allows."""
    from grader.sandbox import client

    assert client.ANSWER_LIMITS.max_elements >= plaindata.MAX_ANSWER_ELEMENTS + 2  # + {"ok": ...}
    assert client.ANSWER_LIMITS.max_elements <= plaindata.MAX_ANSWER_ELEMENTS + 64
    assert client.ANSWER_LIMITS.max_depth >= 2 * (plaindata.MAX_DEPTH + 1) + 4
    assert client.ANSWER_LIMITS.max_bytes == client.MAX_REPLY
    deepest = np.zeros((1,))
    for _ in range(plaindata.MAX_DEPTH):  # tuples nest two levels each, and an array three more
        deepest = (deepest,)
    import json

    from grader import boundedjson

    body = json.dumps({"ok": plaindata.to_plain(deepest)})
    assert boundedjson.check(body, client.ANSWER_LIMITS)
