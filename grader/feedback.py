"""How a check says why it failed.

Tests raise ``CheckFailed`` with four parts a learner can act on: what went wrong
(``message``), what was measured, what was expected, and what to try next (``hint``).
A public check shows all four.  A hidden check may not: its measured and expected values
can quote inputs drawn at grading time, so they go to the instructor only.  What a hidden
check tells the learner is ``diagnosis`` (what is true of *this* failure, e.g. "0
compilations: is the function jitted?" or which kind of change was mispredicted) and
``advice`` (what to try), both written so that they name no hidden input value or shape;
without them it falls back to the manifest's ``feedback`` line.

The ``expect_*`` helpers validate values that came back from the sandbox (already
plain numpy/Python data) and raise ``CheckFailed`` with a useful message.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class CheckFailed(AssertionError):
    def __init__(self, message: str, *, measured: str = "", expected: str = "", hint: str = "",
                 diagnosis: str = "", advice: str = ""):
        super().__init__(message)
        self.message = message
        self.measured = measured
        self.expected = expected
        self.hint = hint
        self.diagnosis = diagnosis  # hidden checks: what is wrong, naming no hidden input
        self.advice = advice  # hidden checks: what to try, naming no hidden input

    def as_dict(self) -> dict:
        return {"message": self.message, "measured": self.measured, "expected": self.expected, "hint": self.hint,
                "diagnosis": self.diagnosis, "advice": self.advice}

    def __str__(self) -> str:  # what plain pytest shows (`pytest exercises/NN_topic`)
        lines = [self.message]
        for label, value in (("measured", self.measured), ("expected", self.expected), ("try", self.hint)):
            if value:
                lines.append(f"{label}: " + value.replace("\n", "\n    "))
        return "\n".join(lines)


class Unmeasured(CheckFailed):
    """A measurement the check needs could not be taken because of what the learner's code
    did (it cleared JAX's caches, so the worker's compile and trace counters restarted).
    Not an accusation: the check fails and says why (``grader.sandbox.outcomes.UNMEASURED``)."""

    def __init__(self, why: str):
        from grader.sandbox.outcomes import UNMEASURED, UNMEASURED_ADVICE

        text = UNMEASURED.get(why, "the grader could not count compilations and traces in your code's process")
        super().__init__(text, measured="nothing: the counters were reset by your code",
                         expected="counters that only your code's compilations and traces move",
                         hint=UNMEASURED_ADVICE, diagnosis=text, advice=UNMEASURED_ADVICE)


def describe(value: Any) -> str:
    """Short description of a plain value: ``f32[4,3]``, ``int``, ``dict with keys [...]``."""
    if isinstance(value, np.ndarray):
        short = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "bool",
                 "float16": "f16", "bfloat16": "bf16"}.get(str(value.dtype), str(value.dtype))
        return f"{short}[{','.join(map(str, value.shape))}]"
    if isinstance(value, dict):
        return f"dict with keys {sorted(value)[:8]}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of {len(value)}"
    return type(value).__name__


def expect_array(value: Any, *, shape: tuple | None = None, dtype: str | None = None, what: str = "the result") -> np.ndarray:
    """``value`` must be an array (a Python scalar is accepted for shape ``()``)."""
    __tracebackhide__ = True
    if isinstance(value, (int, float)) and not isinstance(value, bool) and shape == ():
        value = np.asarray(value, dtype=dtype or None)
    if not isinstance(value, np.ndarray):
        raise CheckFailed(
            f"{what} should be an array", measured=describe(value), expected=f"an array of shape {shape}",
            hint="return a jax.numpy array (not a list, a Python number or None)",
        )
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise CheckFailed(
            f"{what} has the wrong shape", measured=f"shape {tuple(value.shape)}", expected=f"shape {tuple(shape)}",
            hint="check which axis you reduce over, and that there is one value per example",
        )
    if dtype is not None and str(value.dtype) != dtype:
        raise CheckFailed(
            f"{what} has the wrong dtype", measured=str(value.dtype), expected=dtype,
            hint="keep float32 throughout; avoid float64 NumPy constants",
        )
    return value


def expect_close(actual: np.ndarray, expected: np.ndarray, *, rtol: float = 1e-4, atol: float = 1e-5,
                 what: str = "the result", hint: str = "", reveal: bool = False) -> None:
    """Numerically equal within tolerance; ``reveal`` shows the values (public checks only)."""
    __tracebackhide__ = True
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        raise CheckFailed(f"{what} has the wrong shape", measured=str(actual.shape), expected=str(expected.shape), hint=hint)
    if not np.all(np.isfinite(actual)):
        raise CheckFailed(f"{what} contains NaN or inf", measured=f"{int(np.sum(~np.isfinite(actual)))} non-finite values",
                          expected="finite values", hint=hint)
    bad = ~np.isclose(actual, expected, rtol=rtol, atol=atol)
    if bad.any():
        worst = float(np.max(np.abs(actual - expected)))
        measured = f"{int(bad.sum())} of {bad.size} values off; largest difference {worst:.3g}"
        exp = f"agreement within rtol={rtol:g}, atol={atol:g}"
        if reveal:
            i = np.unravel_index(int(np.argmax(np.abs(actual - expected) * bad)), bad.shape) if bad.ndim else ()
            where = f" at index {tuple(int(j) for j in i)}" if bad.ndim else ""
            measured += f";{where} got {_number(actual[i])}"
            exp += f"; {'there' if bad.ndim else 'expected'}: {_number(expected[i])}"
        raise CheckFailed(f"{what} does not match the reference", measured=measured, expected=exp, hint=hint)


def _number(value) -> str:
    """One array element as a learner reads it: ``-4.16019`` or ``3``, not ``np.float32(-4.16019)``."""
    item = np.asarray(value).item()
    return f"{item:.6g}" if isinstance(item, float) else str(item)


def fail(message: str, *, measured, expected, diagnosis: str, advice: str):
    """Raise ``CheckFailed`` whose hint is its advice: the shape of most judges' verdicts."""
    __tracebackhide__ = True
    raise CheckFailed(message, measured=measured, expected=expected, hint=advice, diagnosis=diagnosis, advice=advice)


# --- structure judged on the program that computes the values -------------------------------------
# A structural check reads the jaxpr of one trace of the learner's function under the grader's
# jit and runs exactly that program (``grader.probes.generic.traced_run``); the jaxpr is judged
# only once that program's outputs are right, so code that shows tracers one program and
# concrete arrays another is judged by what it computes when traced.

def traced_advice(function: str, how: str = "") -> str:
    """What to try when the program the grader traced is not the one that computes the values."""
    return (f"write one program for every input: the grader traces {function} under jax.jit{how} and runs that "
            f"very program, so code that behaves differently when its inputs are tracers (isinstance(x, "
            f"jax.core.Tracer)) or that only works on concrete arrays is judged by what it computes when traced")


def traced_error(answer) -> str | None:
    """Why a probe's answer about a traced program (one built by ``traced_run``: ``"outputs"``
    when it ran, ``"error"`` when tracing or running it failed) has no program to judge, or
    None when it has one."""
    if isinstance(answer, dict) and "outputs" in answer and "error" not in answer:
        return None
    return (answer.get("error") if isinstance(answer, dict) else None) or "no program"


def expect_jit_own(jitted: bool, function: str, *, why: str, decorator: str = "@jax.jit",
                    jit: str = "jax.jit") -> None:
    """Raise ``CheckFailed`` unless ``function`` is exactly what ``jit`` returns (``jitted``, read
    in the sandbox).  ``why``: what cannot be read otherwise ("the program its calls compile").
    A Python function in front of a jitted one can run another program when it is called than
    when it is traced, and has no ``lower`` of its own."""
    __tracebackhide__ = True
    if jitted:
        return
    advice = (f"decorate {function} itself with {decorator}: a Python function in front of a jitted one can run "
              f"another program when it is called than when it is traced")
    fail(f"{function} is not the function {jit} returns, so {why} cannot be read",
         measured=f"{function} is not a function {jit} returned", expected=f"{jit}(...)'s own function",
         advice=advice, diagnosis=f"{function} is a Python function (or another object), not what {jit} returns, so "
                                  f"{why} cannot be read")


def expect_traced_program_runs(error, function: str, *, how: str = "", advice: str = "",
                               expected: str = "a function JAX can trace, compile and run") -> None:
    """Raise ``CheckFailed`` when tracing ``function`` under jax.jit (``how``: with what traced
    or static), or running the program that trace built, raised ``error`` (None: it ran)."""
    __tracebackhide__ = True
    if error is None:
        return
    fail(f"{function} could not be traced and run under jax.jit", measured=str(error) or "no program",
         expected=expected, advice=advice or traced_advice(function, how),
         diagnosis=f"tracing {function} under jax.jit{how}, or running the program that trace built, raised an "
                   f"error: the structure of the program cannot be judged")


def expect_traced_program_computes(ok: bool, function: str, computes: str, *, measured: str, expected: str,
                                   how: str = "", advice: str = "") -> None:
    """Raise ``CheckFailed`` unless (``ok``) the traced program's own outputs are what the
    value checks accept: ``computes`` says what they must be ("compute the per-example norms")."""
    __tracebackhide__ = True
    if ok:
        return
    fail(f"the program the grader traced does not {computes}", measured=measured, expected=expected,
         advice=advice or traced_advice(function, how),
         diagnosis=f"traced under jax.jit and run, {function} does not {computes}: either it computes the wrong "
                   f"thing (the value checks say what), or it does one thing when traced and another when called on "
                   f"arrays; the structure judged here must be that of the program that computes the values")
