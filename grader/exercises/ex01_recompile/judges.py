"""Exercise 1 (counting recompilations): reading ``predict_compiles``' answers and the
float64 reference of ``score``, shared by the public and the hidden checks.  NumPy only,
no JAX (the true compile counts are measured in the clean worker)."""

from __future__ import annotations

import numpy as np

from grader.feedback import CheckFailed


def as_count(value, what):
    """``value`` as a Python int (a 0-d integer array is accepted), or a CheckFailed."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iu":
        value = int(value)
    if type(value) is not int:
        raise CheckFailed(f"{what} should return a Python int", measured=f"a {type(value).__name__}",
                          expected="an int such as 2", hint="return len(...) of your set of cache keys",
                          diagnosis=f"{what} does not return a Python int",
                          advice="return len(...) of your set of cache keys")
    return value


# ---------------------------------------------------------------------------------------
# Part B: score(logits, temperature, shift, mode)
# ---------------------------------------------------------------------------------------

def reference_score(logits, temperature, shift, mode):
    """The stub's ``score`` in float64 NumPy: probs, logz or (any other mode) entropy of
    softmax((logits + shift) / temperature) along the last axis."""
    z = (np.asarray(logits, np.float64) + float(shift)) / temperature
    m = z.max(axis=-1, keepdims=True)
    e = np.exp(z - m)
    s = e.sum(axis=-1, keepdims=True)
    p = e / s
    if mode == "probs":
        return p
    if mode == "logz":
        return (m + np.log(s))[..., 0]
    return -(p * np.log(p)).sum(axis=-1)


def mode_of(args, kwargs):
    """The mode a request to ``score`` asks for, passed positionally (4th) or by keyword."""
    return args[3] if len(args) > 3 else kwargs["mode"]


def expected_score(request):
    """What ``score(*request['args'], **request['kwargs'])`` should return, as float32."""
    args, kwargs = request["args"], request["kwargs"]
    return reference_score(args[0], args[1], args[2], mode_of(args, kwargs)).astype(np.float32)


def warm_up_score(submission, reference) -> None:
    """``score`` on a [1, 2] batch in every form a request takes (shift a Python float or a
    0-d array, mode positional or by keyword), before a measured workload and not counted:
    converting a Python scalar (``jnp.asarray(shift, jnp.float32)`` compiles a
    ``convert_element_type`` once per process) is a one-time cost of an honest ``score``,
    not a recompile.  The reference solution gets the same calls."""
    from grader.testing import probe_pair

    logits = np.zeros((1, 2), np.float32)
    calls = [{"args": [logits, 1.0, shift] + ([] if by_keyword else ["probs"]),
              "kwargs": {"mode": "probs"} if by_keyword else {}}
             for shift in (0.5, np.asarray(0.5, np.float32)) for by_keyword in (False, True)]
    probe_pair(submission, reference, "generic:warm_up", "score", calls)


#: What every mode's program must hold: softmax and logsumexp both exponentiate.
SCORE_NEEDS = {"the softmax's exp": ("exp",)}
SCORE_IN_JAX_ADVICE = ("compute z, the softmax and the outputs with jax.numpy / jax.nn inside your jitted function; "
                       "NumPy on the logits runs on the host, and a jitted function that does none of the work only "
                       "makes the compile count look right")


def expect_score_in_jax(submission, compiles) -> None:
    """The count floor of Part B: ``score`` of every mode traces with its logits as a tracer
    (``traced:work``; temperature and shift stay as given, so host-side work on them is fine)
    and holds the softmax's ``exp``, with no host callback; and the programs compiled during
    the counted workload (``compiles``, its ``Compiles``: shapes the warm-up did not use) hold
    it too (``expect_compiled_work``).  NumPy work beside a trivial jit compiles once per
    (shape, mode) too; its program shows that JAX does none of the work."""
    __tracebackhide__ = True
    from grader.traced_work import expect_compiled_work, expect_jax_work

    logits = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)
    for mode in ("probs", "logz", "entropy"):
        found = submission.probe("traced:work", "score", [logits, 1.25, 0.5, mode], None, [0])
        expect_jax_work(found, what=f"score(logits, temperature, shift, {mode!r})", needs=SCORE_NEEDS,
                        advice=SCORE_IN_JAX_ADVICE)
    expect_compiled_work(compiles, what="score", needs=SCORE_NEEDS, advice=SCORE_IN_JAX_ADVICE)
