"""The only values that cross the sandbox boundary: plain data, as JSON.

Allowed: ``None``, ``bool``, ``int``, ``float``, ``str``, lists/tuples, dicts with ``str``
keys, and arrays (numpy, or anything JAX hands back) of a known dtype, which travel as
``{"__array__": [dtype, shape, base64 bytes]}``.  ``encode`` runs in the sandbox and
checks the *exact* type of every value, so an object whose ``__eq__`` always says
``True`` is refused before it leaves.  ``decode`` runs in the trusted process and
builds fresh numpy arrays and Python scalars from bytes: the trusted side never holds
an object the submission made.
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

        return (jax.Array,)
    except Exception:  # pragma: no cover - jax is always installed here
        return ()


def describe_type(value: Any) -> str:
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def to_plain(value: Any, where: str = "result", _depth: int = 0) -> Any:
    """Convert ``value`` to JSON-ready plain data, refusing anything unexpected."""
    if _depth > MAX_DEPTH:
        raise NotPlainData(f"{where}: nested more than {MAX_DEPTH} levels deep")
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        if not -MAX_INT <= value < MAX_INT:
            raise NotPlainData(f"{where}: an integer outside the 64-bit range")
        return value
    if t is float:
        return value if math.isfinite(value) else {FLOAT_KEY: repr(value)}
    if t in (list, tuple):
        items = [to_plain(v, f"{where}[{i}]", _depth + 1) for i, v in enumerate(value)]
        return items if t is list else {TUPLE_KEY: items}
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise NotPlainData(f"{where}: dict key {k!r} is a {describe_type(k)}; only str keys are allowed")
            if k in (ARRAY_KEY, TUPLE_KEY, FLOAT_KEY):
                raise NotPlainData(f"{where}: dict key {k!r} is reserved")
            out[k] = to_plain(v, f"{where}[{k!r}]", _depth + 1)
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
