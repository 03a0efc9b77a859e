"""How probes name an exception the learner's code raised: its type and its first line.

``first_line`` for any failure; ``first_line_or_unimplemented`` lets ``NotImplementedError``
through, so an untouched stub is reported as "not implemented" rather than as a failure."""

from __future__ import annotations


def first_line(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:limit] if text else ''}".rstrip(": ")


def first_line_or_unimplemented(exc: BaseException) -> str:
    if isinstance(exc, NotImplementedError):
        raise exc
    return first_line(exc)


def type_name(value) -> str:
    """A value's type as the learner knows it: ``int``, ``numpy.ndarray``, ``jax.Array``..."""
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
