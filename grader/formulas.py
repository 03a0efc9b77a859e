"""Feedback for functions that must be formulas, run where JAX does not exist.

Some answers must come from reasoning, not measurement: exercise 11's cost predictions,
exercise 17's collectives.  Such a function runs in a worker without JAX (the
``without_jax`` fixture, ``grader.sandbox.nojax``), by a plain call or a ``nojax_probes``
probe.  There, reaching for JAX fails, whatever the route: a JAX value raises
``JAXNotAvailable``, re-importing the real package or loading its native library is refused
("where JAX must not run"), and returning a stand-in is not plain data.  ``run_formula``
turns each of those into one verdict that says the function used JAX (or that the file
used it at import time), so the learner reads *why* the prediction failed, not a crash.
"""

from __future__ import annotations

from typing import Any, Callable

from grader.feedback import CheckFailed
from grader.sandbox.client import SubmissionError

#: how each way of reaching for JAX in a worker without it reads in a SubmissionError
_REFUSED = "where JAX must not run"


def used_jax(exc: SubmissionError) -> bool:
    """The learner's function failed because it reached for JAX (not for another reason)."""
    return (exc.exc_type == "JAXNotAvailable" or _REFUSED in exc.message
            or (exc.kind == "bad_return" and "nojax.Absent" in exc.message))  # returned a JAX stand-in


def run_formula(request: Callable[[], Any], name: str, *, hint: str, advice: str, import_advice: str) -> Any:
    """``request()`` (a call or probe on the worker without JAX), or a ``CheckFailed`` when
    ``name`` -- or the learner's file, at import -- used JAX.  ``hint``/``advice``: what to do
    instead, in the exercise's words; ``import_advice``: where module-level JAX work belongs."""
    try:
        return request()
    except SubmissionError as exc:
        if exc.kind == "import_error" and "JAXNotAvailable" in exc.message:
            raise CheckFailed(
                "your file uses JAX at import time, so it cannot be imported where predictions run",
                measured=exc.message[:600], expected="a file whose module-level code only defines things",
                hint="move module-level JAX work (arrays, calls) into the functions that need it",
                diagnosis="importing your file used a JAX value at module level: predictions run in a process "
                          "without JAX, where module-level JAX can be named and decorated with but not used",
                advice=import_advice) from None
        if not used_jax(exc):
            raise
        raise CheckFailed(
            f"{name} used JAX while predicting", measured=exc.message[:600],
            expected="a formula of its inputs: plain Python (or NumPy) arithmetic", hint=hint,
            diagnosis=f"{name} used JAX (a jax or jnp function, a compiled program, or XLA through a back door): "
                      f"predictions run in a process without JAX and must be worked out from their inputs",
            advice=advice) from None
