"""The only values that cross the sandbox boundary: plain data, as JSON.

Allowed: ``None``, ``bool``, ``int``, ``float``, ``str``, lists/tuples (a namedtuple travels
as the plain tuple of its items), dicts with ``str`` keys, and arrays (numpy, or anything JAX hands back) of a known dtype, which travel as
``{"__array__": [dtype, shape, base64 bytes]}``.  ``encode`` runs in the sandbox and
checks the *exact* type of every value, so an object whose ``__eq__`` always says
``True`` is refused before it leaves.  ``decode`` runs in the trusted process and
builds fresh numpy arrays and Python scalars from bytes: the trusted side never holds
an object the submission made.

What an answer may cost is bounded in bytes (the protocol's line cap) and in *elements*
(``MAX_ANSWER_ELEMENTS``): rebuilding millions of small values costs the trusted side time
and memory whatever their bytes (``grader.boundedjson``).  ``to_plain(value,
max_elements=...)`` counts what it encodes in boundedjson's unit as it goes and stops at the
limit (``TooManyValues``), so the sandbox refuses such an answer itself; an array of any size
counts as a handful of elements, since it travels as one string.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import numpy as np

ARRAY_KEY = "__array__"
TUPLE_KEY = "__tuple__"
FLOAT_KEY = "__float__"  # nan / inf, which JSON cannot spell
DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64", "complex64", "complex128", "bfloat16"]
)
MAX_DEPTH = 32
MAX_INT = 2**63  # no answer needs a larger integer; one that large breaks float() and isfinite()
#: Elements (``grader.boundedjson``'s unit) one answer of the sandbox may hold.  Grading every
#: reference solution with its hidden checks, the largest answer held 887 (exercise 2's) and
#: 77 kB: a hundredfold margin, and still a few milliseconds of decoding.
MAX_ANSWER_ELEMENTS = 100_000


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (which JSON can carry but no file encoding can write)
    replaced by U+FFFD.  Applied where the sandbox's answers are decoded, so every string
    that reaches a report is writable."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class NotPlainData(TypeError):
    """A value that may not cross the sandbox boundary; the message names where it sits."""


def _jax_array_types() -> tuple:
    try:
        import jax

        array = getattr(jax, "Array", None)
    except Exception:  # pragma: no cover - jax is always installed here
        return ()
    return (array,) if isinstance(array, type) else ()  # a worker without JAX has a stand-in (sandbox.nojax)


def describe_type(value: Any) -> str:
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


class TooManyValues(NotPlainData):
    """An answer with more elements than it may have (``to_plain(..., max_elements=N)``)."""


class _Budget:
    """Elements still allowed, spent as ``to_plain`` encodes (``boundedjson``'s unit)."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self.left = limit if limit is not None else -1

    def spend(self, n: int, where: str) -> None:
        if self.limit is None:
            return
        self.left -= n
        if self.left < 0:
            raise TooManyValues(
                f"{where}: the answer holds more than {self.limit} values (list items, dict keys and values, "
                f"numbers, strings): return a NumPy/JAX array instead of long lists or big dicts -- an array "
                f"of any size counts as a few")


def plain_sequence(value: Any) -> list | tuple | None:
    """``value`` when it is a list or a tuple; any other tuple (a ``namedtuple``, a
    ``typing.NamedTuple``: what a learner may well return for "returns ``(a, b, c)``") as a
    plain tuple of its items, read from the tuple's own storage (no method of the subclass
    runs); anything else ``None``."""
    t = type(value)
    if t is list or t is tuple:
        return value
    if issubclass(t, tuple):
        return tuple(tuple.__getitem__(value, i) for i in range(tuple.__len__(value)))
    return None


def as_plain_sequence(value: Any) -> Any:
    """``value`` with a tuple subclass (a namedtuple) replaced by the plain tuple of its items
    (``plain_sequence``); anything else unchanged: what a probe checks a returned tuple on."""
    seq = plain_sequence(value)
    return value if seq is None else seq


def to_plain(value: Any, where: str = "result", _depth: int = 0, *, max_elements: int | None = None,
             _budget: _Budget | None = None) -> Any:
    """Convert ``value`` to JSON-ready plain data, refusing anything unexpected, and (with
    ``max_elements``) anything that would hold more elements than that in JSON."""
    budget = _budget if _budget is not None else _Budget(max_elements)
    if _depth > MAX_DEPTH:
        raise NotPlainData(f"{where}: nested more than {MAX_DEPTH} levels deep")
    t = type(value)
    if value is None or t is bool or t is str:
        budget.spend(1, where)
        return value
    if t is int:
        if not -MAX_INT <= value < MAX_INT:
            raise NotPlainData(f"{where}: an integer outside the 64-bit range")
        budget.spend(1, where)
        return value
    if t is float:
        if math.isfinite(value):
            budget.spend(1, where)
            return value
        budget.spend(3, where)  # {"__float__": "nan"}
        return {FLOAT_KEY: repr(value)}
    if t is not tuple and issubclass(t, tuple):  # a namedtuple, a typing.NamedTuple: a tuple of its items
        value, t = plain_sequence(value), tuple
    if t in (list, tuple):
        # [a, b]: the list and its items; (a, b) travels as {"__tuple__": [a, b]}: two more
        budget.spend((1 if t is list else 3) + (not value), where)
        items = [to_plain(v, f"{where}[{i}]", _depth + 1, _budget=budget) for i, v in enumerate(value)]
        return items if t is list else {TUPLE_KEY: items}
    if t is dict:
        budget.spend(1 + len(value) + (not value), where)  # the dict and its keys, before any value is looked at
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise NotPlainData(f"{where}: dict key {k!r} is a {describe_type(k)}; only str keys are allowed")
            if k in (ARRAY_KEY, TUPLE_KEY, FLOAT_KEY):
                raise NotPlainData(f"{where}: dict key {k!r} is reserved")
            out[k] = to_plain(v, f"{where}[{k!r}]", _depth + 1, _budget=budget)
        return out
    if t is np.ndarray or isinstance(value, _jax_array_types()) or isinstance(value, np.generic):
        if t is not np.ndarray and not isinstance(value, np.generic) and type(value).__module__.split(".")[0] not in ("jax", "jaxlib"):
            raise NotPlainData(f"{where}: {describe_type(value)} pretends to be a JAX array")
        arr = np.asarray(value)
        if type(arr) is not np.ndarray:
            raise NotPlainData(f"{where}: could not turn {describe_type(value)} into a plain array")
        dtype = str(arr.dtype)
        if dtype not in DTYPES:
            raise NotPlainData(f"{where}: arrays of dtype {dtype} are not supported")
        # {"__array__": [dtype, [d0, d1, ...], data]}
        budget.spend(6 + arr.ndim + (arr.ndim == 0), where)
        data = np.ascontiguousarray(arr).tobytes()
        return {ARRAY_KEY: [dtype, list(arr.shape), base64.b64encode(data).decode("ascii")]}
    raise NotPlainData(
        f"{where} is a {describe_type(value)}; expected an array, a number, a string, "
        f"or a list/tuple/dict of those"
    )


def from_plain(value: Any, _depth: int = 0) -> Any:
    """Rebuild trusted Python/numpy values from decoded JSON (trusted side)."""
    if _depth > MAX_DEPTH + 2:
        raise ValueError("plain data nested too deeply")
    t = type(value)
    if t is str:
        return clean_text(value)
    if t is int and not -MAX_INT <= value < MAX_INT:
        raise NotPlainData("an integer outside the 64-bit range")
    if value is None or t in (bool, int, float):
        return value
    if t is list:
        return [from_plain(v, _depth + 1) for v in value]
    if t is dict:
        if set(value) == {ARRAY_KEY}:
            dtype, shape, b64 = value[ARRAY_KEY]
            if dtype not in DTYPES:
                raise ValueError(f"unsupported dtype {dtype!r}")
            if dtype == "bfloat16":
                import ml_dtypes

                np_dtype = np.dtype(ml_dtypes.bfloat16)
            else:
                np_dtype = np.dtype(dtype)
            shape = tuple(int(s) for s in shape)
            arr = np.frombuffer(base64.b64decode(b64), dtype=np_dtype).copy()
            return arr.reshape(shape)
        if set(value) == {TUPLE_KEY}:
            return tuple(from_plain(v, _depth + 1) for v in value[TUPLE_KEY])
        if set(value) == {FLOAT_KEY}:
            return float(value[FLOAT_KEY])
        return {clean_text(str(k)): from_plain(v, _depth + 1) for k, v in value.items()}
    raise ValueError(f"unexpected {type(value).__name__} in plain data")


def dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=False, separators=(",", ":"))


def loads(text: str) -> Any:
    return json.loads(text)
