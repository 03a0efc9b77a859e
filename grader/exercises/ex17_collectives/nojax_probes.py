"""Exercise 17's probe for the worker where JAX does not exist (``grader.sandbox.nojax``).

``predict(ctx, layouts)``
    the learner's ``predict_collectives`` for each layout, handed a dict of
    ``PartitionSpec``s (the worker's plain-Python ones, ``nojax.PartitionSpec``, which compare
    equal to the learner's own ``P(...)`` there), its answer normalised to
    ``{"counts": {opcode: count}}`` (zeros dropped), or ``{"error": ...}`` / ``{"form": ...}``
    when it raised or returned something else than a dict of ints.

Why here and not beside JAX: the statement asks for a prediction from the layout alone.  In
the JAX sandbox a meter can only watch the predict request, and the family is finite (18
layouts), so a file could compile every layout at import and look the answer up; here no
JAX exists at import or at call, so only rules can answer.  Reaching for JAX raises
``JAXNotAvailable`` out of this probe, which the checks read as "used JAX while predicting"
(``grader.formulas``).  This module imports no JAX.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

from grader.probes.errors import first_line_or_unimplemented as _first_line, type_name as _type_name
from grader.sandbox.nojax import Absent as _Absent, JAXNotAvailable as _JAXNotAvailable
from grader.sandbox.nojax import PartitionSpec as _P

NAMES = ("x", "w1", "w2")
_REFUSED = "where JAX must not run"  # the guard's refusal of the real JAX packages here
_isinstance = isinstance


def _jax_in(value) -> bool:
    return _isinstance(value, _Absent)


def _normalise(answer) -> dict:
    if _jax_in(answer):
        raise _JAXNotAvailable(f"predict_collectives returned {answer!r}")
    if not _isinstance(answer, Mapping):
        return {"form": f"a {_type_name(answer)}"}
    counts = {}
    for key, value in list(answer.items())[:64]:
        if _jax_in(key) or _jax_in(value):
            raise _JAXNotAvailable(f"predict_collectives returned a dict holding {value!r}")
        if not _isinstance(key, str) or _isinstance(value, bool) or not _isinstance(value, numbers.Integral):
            return {"form": f"a dict holding the entry {_type_name(key)} -> {_type_name(value)}"}
        if int(value):
            counts[str(key)[:80]] = int(value)
    return {"counts": counts}


def predict(ctx, layouts: list) -> list[dict]:
    fn = ctx.function("predict_collectives")
    out = []
    for layout in layouts:
        specs = {name: _P(*layout[name]) for name in NAMES}
        try:
            answer = fn(specs)
        except _JAXNotAvailable:
            raise  # it needed JAX: the check says so
        except Exception as exc:  # noqa: BLE001 - measured, not judged (NotImplementedError goes up)
            if _REFUSED in str(exc):
                raise  # it tried to bring the real JAX back
            out.append({"error": _first_line(exc)})
            continue
        out.append(_normalise(answer))
    return out
