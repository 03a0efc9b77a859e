"""Exercise 14 (control flow under jit): draws, references and verdicts shared by the public and
the hidden checks.  NumPy only, references in float64.  The truth about the statement's
questions is not here: it is measured on the installed JAX by ``probes.truth_answers`` in the
clean worker, every grading.

Feedback for a hidden check names the *kind* of input that went wrong (an index below the
range, a positive sum, an exact zero), never a drawn value: those go to ``measured`` and
``expected``, which only the instructor reads.
"""

from __future__ import annotations

import numpy as np

from grader import ir
from grader.feedback import (CheckFailed, describe, expect_traced_program_computes, expect_traced_program_runs,
                             traced_error)

BRANCH_NAMES = ("scale", "wave", "square")


# --- part A: lax.switch ------------------------------------------------------------------------------

def branch(index: int, x: np.ndarray) -> np.ndarray:
    """What the stub's BRANCHES[index] computes, with lax.switch's clamping of the index."""
    i = min(max(int(index), 0), 2)
    x = np.asarray(x, np.float64)
    return 2.0 * x if i == 0 else np.sin(x) if i == 1 else x * x


def index_label(index: int) -> str:
    return "below_range" if index < 0 else "above_range" if index > 2 else f"index_{index}"


def draw_indices(rng) -> list[int]:
    """Every branch, an index below the range and one above it, and one more anywhere; shuffled."""
    indices = [0, 1, 2, int(rng.integers(-6, 0)), int(rng.integers(3, 10)), int(rng.integers(-6, 10))]
    return [int(i) for i in rng.permutation(indices)]


def judge_switch(got: list, indices: list, x: np.ndarray) -> None:
    for i, out in zip(indices, got):
        want = branch(i, x)
        if not isinstance(out, np.ndarray) or out.shape != want.shape or \
                not np.allclose(out.astype(np.float64), want, rtol=1e-5, atol=1e-6):
            kind = index_label(i)
            if kind == "below_range":
                advice = ("lax.switch clamps its index into range: an index below 0 runs branch 0 (not the last "
                          "branch, as Python's negative indexing or a modulo would)")
            elif kind == "above_range":
                advice = ("lax.switch clamps its index into range: an index above the last runs the last branch "
                          "(a modulo wraps it around instead)")
            else:
                advice = f"index {i} must run BRANCHES[{i}] ({BRANCH_NAMES[i]}) on x"
            where = {"below_range": "an index below 0", "above_range": "an index above 2"}.get(kind, f"index {i}")
            raise CheckFailed(
                f"apply_branch({i}, x) differs from lax.switch's result", measured=describe(out) if not isinstance(
                    out, np.ndarray) or out.shape != want.shape else
                f"largest difference {float(np.max(np.abs(out - want))):.3g}",
                expected=f"{BRANCH_NAMES[min(max(i, 0), 2)]}(x) (rtol 1e-5)", hint=advice,
                diagnosis=f"apply_branch gives the wrong result for {where}", advice=advice)


def judge_switch_structure(facts: dict, x) -> None:
    """``facts``: a ``switch_structure`` answer (``apply_branch(1, x)`` traced).  The traced
    program's own output must first be wave(x): the structure judged is that of the program
    that computes the answer."""
    __tracebackhide__ = True
    how = " (index and x traced)"
    expect_traced_program_runs(traced_error(facts), "apply_branch", how=how,
                               expected="a function JAX can trace, compile and run with a traced index")
    out, want = facts["outputs"], branch(1, x)
    shaped = isinstance(out, np.ndarray) and out.shape == want.shape
    expect_traced_program_computes(
        shaped and np.allclose(out.astype(np.float64), want, rtol=1e-5, atol=1e-6), "apply_branch",
        "compute lax.switch's result", how=how, expected="wave(x) for index 1 (rtol 1e-5)",
        measured=f"index 1: largest difference {float(np.max(np.abs(out - want))):.3g}" if shaped else describe(out))
    conds, outside = facts["conds"], facts["outside"]
    advice = ("use lax.switch(index, BRANCHES, x): it becomes one cond whose branches run only when chosen; "
              "jnp.where, jnp.select or arithmetic on the index compute every branch and then pick one, outside "
              "a cond or inside each of its branches alike")
    work = sorted(set(facts.get("work_outside", ())))
    if "sin" in outside or not conds or work:
        raise CheckFailed("apply_branch computes branches that are not chosen", measured=(
            f"conds with {conds} branches; outside them: {sorted(outside)}"
            + (f"; computed from x outside every cond, on every path: {', '.join(work)}" if work else "")),
            expected="the branches' work only inside a cond", hint=advice,
            diagnosis="the traced program computes a branch outside any cond: every branch runs, then one is "
                      "picked", advice=advice)
    holding = branches_with(facts, "sin")
    if len(holding) != 1:
        raise CheckFailed("apply_branch computes branches that are not chosen", measured=(
            f"wave's sin runs in {len(holding)} branches of the program's conds"),
            expected="wave's sin in exactly one branch: each branch computes its own function only", hint=advice,
            diagnosis="wave's work sits in more than one branch of the cond: a branch computes functions it was "
                      "not chosen for, then picks one" if holding else "no branch of a cond holds wave's work",
            advice=advice)
    extra = sorted(p for p in facts["branches"][holding[0]] if p != "sin" and p not in NOT_WORK)
    if extra:
        raise CheckFailed("apply_branch computes branches that are not chosen", measured=(
            f"the branch that runs wave's sin also runs {', '.join(extra)}"),
            expected="wave's branch computing sin(x) only", hint=advice,
            diagnosis="the cond's branch that computes wave also computes other work (the other functions and a "
                      "choice among them, say): a cond picks that branch, and inside it every function runs",
            advice=advice)


#: Primitives a branch may hold beside its function's own work: moving or re-typing a value, and
#: the calls that wrap a function (``jax.jit`` inside a branch, a ``custom_jvp``).
NOT_WORK = ir.LAYOUT_PRIMITIVES | {"jit", "pjit", "closed_call", "core_call", "remat", "checkpoint",
                                   "custom_jvp_call", "custom_vjp_call"}


def branches_with(facts: dict, primitive: str) -> list[int]:
    """The branches (of every ``cond``, nested ones apart) that run ``primitive`` themselves."""
    return [i for i, seen in enumerate(facts.get("branches", [])) if primitive in seen]


def judge_piecewise_structure(facts: dict, x) -> None:
    """``facts``: a ``piecewise_structure`` answer (``piecewise(x)`` traced).  The traced program's
    own output must first be piecewise's value; then positive_branch's ``sin`` and
    negative_branch's ``sqrt`` must each run in one branch of a cond, not the same one, and
    neither outside every cond: lax.cond runs only the branch it chooses."""
    __tracebackhide__ = True
    expect_traced_program_runs(traced_error(facts), "piecewise", how="",
                               expected="a function JAX can trace, compile and run")
    out, (want, _) = facts["outputs"], reference_piecewise(x)
    ok = isinstance(out, np.ndarray) and out.shape == () and np.isclose(float(out), want, rtol=1e-5, atol=1e-6)
    expect_traced_program_computes(ok, "piecewise", "compute piecewise's value", how="",
                                   expected=f"{want:.6g} (rtol 1e-5)", measured=describe(out))
    outside = sorted(p for p in ("sin", "sqrt") if p in facts["outside"])
    work = sorted(set(facts.get("work_outside", ())))
    sin_in, sqrt_in = branches_with(facts, "sin"), branches_with(facts, "sqrt")
    if outside or work or len(sin_in) != 1 or len(sqrt_in) != 1 or sin_in == sqrt_in:
        advice = ("choose with lax.cond(jnp.sum(x) > 0, positive_branch, negative_branch, x): each branch then runs "
                  "only when chosen; computing both (jnp.where, arithmetic on the predicate) outside the cond, or "
                  "both inside one branch, runs the branch that was not chosen")
        raise CheckFailed("piecewise computes the branch that is not chosen", measured=(
            f"outside every cond: {outside or 'neither'}; positive_branch's sin in {len(sin_in)} branch(es), "
            f"negative_branch's sqrt in {len(sqrt_in)}" + (", the same one" if sin_in and sin_in == sqrt_in else "")
            + (f"; computed from x outside every cond beyond choosing the branch: {', '.join(work)}" if work else "")),
            expected="sin in one branch of the cond and sqrt in the other; outside the cond, only what chooses the branch",
            hint=advice,
            diagnosis="the branches' work is not split between a cond's branches: the branch that is not chosen "
                      "runs too", advice=advice)


# --- part B: lax.cond ---------------------------------------------------------------------------------

# --- the count floor of the compile checks (grader.traced_work) --------------------------------------

#: What the traced program of each function must hold.  In JAX 0.10.2 ``lax.switch`` traces to
#: ``clamp`` and one ``cond`` with a branch per function, ``lax.cond`` to a ``cond`` with two:
#: a ``cond`` is the control flow the statement asks for, and the branches' own work (wave's
#: ``sin``; positive_branch's ``sin``, negative_branch's ``sqrt``) shows it is computed in JAX.
SWITCH_NEEDS = {"lax.switch's cond": ("cond",), "wave's sin": ("sin",)}
PIECEWISE_NEEDS = {"lax.cond's cond": ("cond",), "positive_branch's sin": ("sin",), "negative_branch's sqrt": ("sqrt",)}
SWITCH_IN_JAX_ADVICE = ("jit apply_branch with index traced and choose with lax.switch(index, BRANCHES, x): an index "
                        "turned into a Python int (int(index)) or branches computed in NumPy run on the host, and a "
                        "jitted function that does none of the work only makes the compile count look right")
PIECEWISE_IN_JAX_ADVICE = ("jit piecewise and choose with lax.cond(jnp.sum(x) > 0, positive_branch, negative_branch, "
                           "x): a Python if on the sum or NumPy branches run on the host, and a jitted function that "
                           "does none of the work only makes the compile count look right")


def expect_switch_in_jax(submission, compiles, x) -> None:
    """The count floor of apply_branch's compile checks: traced with the index *and* x as
    tracers (``traced:work``), it holds a ``cond`` and wave's ``sin``, and no host callback;
    and so does the program compiled during the counted calls (``compiles``, their
    ``Compiles``: a length no earlier request used; ``expect_compiled_work``).  Host NumPy
    beside a do-nothing jit also compiles once per shape."""
    __tracebackhide__ = True
    from grader.traced_work import expect_work_in_jax

    found = submission.probe("traced:work", "apply_branch", [1, x])
    expect_work_in_jax(found, compiles, what="apply_branch", needs=SWITCH_NEEDS, advice=SWITCH_IN_JAX_ADVICE)


def expect_piecewise_in_jax(submission, compiles, x) -> None:
    """The count floor of piecewise's compile checks: traced with x a tracer, it holds a
    ``cond`` and both branches' work, and no host callback; and so does the program compiled
    during the counted calls (``compiles``, their ``Compiles``; ``expect_compiled_work``)."""
    __tracebackhide__ = True
    from grader.traced_work import expect_work_in_jax

    found = submission.probe("traced:work", "piecewise", [x])
    expect_work_in_jax(found, compiles, what="piecewise", needs=PIECEWISE_NEEDS, advice=PIECEWISE_IN_JAX_ADVICE)


def reference_piecewise(x: np.ndarray) -> tuple[float, np.ndarray]:
    """The value and gradient, float64, of sum(sin(x) * x) where sum(x) > 0 and sqrt(-sum(x)) elsewhere."""
    x = np.asarray(x, np.float64)
    s = x.sum()
    if s > 0:
        return float(np.sum(np.sin(x) * x)), np.cos(x) * x + np.sin(x)
    return float(np.sqrt(-s)), np.full_like(x, -0.5 / np.sqrt(-s))


def draw_piecewise_inputs(rng, n: int | None = None, count: int = 4) -> list[np.ndarray]:
    """Vectors whose sums are positive and negative (both, every time), never within 0.2 of 0."""
    n = int(rng.integers(3, 9)) if n is None else n
    out = []
    for k in range(count):
        sign = 1.0 if k % 2 == 0 else -1.0
        while True:
            x = rng.normal(size=n).astype(np.float32)
            if abs(float(x.astype(np.float64).sum())) >= 0.2:
                break
        if np.sign(x.astype(np.float64).sum()) != sign:
            x = -x
        out.append(x)
    return [out[i] for i in rng.permutation(len(out))]


def sign_label(x: np.ndarray) -> str:
    return "positive_sum" if float(np.asarray(x, np.float64).sum()) > 0 else "negative_sum"


def _where(x) -> str:
    return "a positive sum" if sign_label(x) == "positive_sum" else "a negative sum"


def judge_piecewise_values(got: list, xs: list) -> None:
    for out, x in zip(got, xs):
        want, _ = reference_piecewise(x)
        value = out.get("value")
        if "value_error" in out or not isinstance(value, np.ndarray) or value.shape != () or \
                not np.isclose(float(value), want, rtol=1e-5, atol=1e-6):
            advice = ("piecewise(x) = lax.cond(jnp.sum(x) > 0, positive_branch, negative_branch, x): the predicate "
                      "is a traced boolean, so a Python `if` cannot decide it under jax.jit")
            raise CheckFailed(f"piecewise(x) differs from the branch its sum selects ({_where(x)})",
                              measured=out.get("value_error") or (describe(value) if not isinstance(value, np.ndarray)
                                                                  or value.shape != () else repr(float(value))),
                              expected=f"{want:.7g} (rtol 1e-5)", hint=advice,
                              diagnosis=f"piecewise's value is wrong, or it raised, for an input with {_where(x)}",
                              advice=advice)


def judge_piecewise_gradients(got: list, xs: list) -> None:
    for out, x in zip(got, xs):
        _, want = reference_piecewise(x)
        grad = out.get("grad")
        if "grad_error" in out or not isinstance(grad, np.ndarray) or grad.shape != want.shape:
            advice = "jax.grad(piecewise)(x) must work: build piecewise from JAX operations (lax.cond), under jit"
            raise CheckFailed(f"jax.grad(piecewise) failed for an input with {_where(x)}",
                              measured=out.get("grad_error") or describe(grad), expected=f"f32[{want.size}]",
                              hint=advice, diagnosis=f"jax.grad(piecewise) raised or gave the wrong shape for an input "
                                                     f"with {_where(x)}", advice=advice)
        if not np.all(np.isfinite(grad)):
            advice = ("the gradient holds NaN: a branch computed on every path (with jnp.where, or computed before "
                      "lax.cond and handed to it) is differentiated even where it is not taken, and sqrt of a "
                      "negative number poisons the gradient though its value is never selected; compute each branch "
                      "inside the function lax.cond calls: cond differentiates only the branch that runs")
            raise CheckFailed(f"jax.grad(piecewise) is not finite for an input with {_where(x)}",
                              measured=f"{int(np.sum(~np.isfinite(grad)))} non-finite entries", expected="finite",
                              hint=advice, diagnosis=f"the gradient of piecewise holds NaN or inf for an input with "
                                                     f"{_where(x)}", advice=advice)
        if not np.allclose(grad.astype(np.float64), want, rtol=1e-4, atol=1e-5):
            advice = "the gradient is that of the branch the sum selects: no stop_gradient, no casts, no other branch"
            raise CheckFailed(f"jax.grad(piecewise) differs from the float64 reference ({_where(x)})",
                              measured=f"largest difference {float(np.max(np.abs(grad - want))):.3g}",
                              expected="the selected branch's gradient (rtol 1e-4)", hint=advice,
                              diagnosis=f"the gradient of piecewise differs from the reference for an input with "
                                        f"{_where(x)}", advice=advice)


# --- part C: a square root with a finite gradient -----------------------------------------------------

def draw_sqrt_input(rng) -> np.ndarray:
    """Negative numbers, exact zeros (both signs), tiny positives and ordinary positives, shuffled."""
    parts = [-rng.uniform(0.01, 10.0, size=3), np.float64([0.0, -0.0]),
             10.0 ** rng.uniform(-30, -20, size=2), rng.uniform(0.01, 100.0, size=3)]
    return rng.permutation(np.concatenate(parts)).astype(np.float32)


def sqrt_labels(x: np.ndarray) -> set[str]:
    labels = set()
    for v in np.asarray(x, np.float64):
        labels.add("negative" if v < 0 else "zero" if v == 0 else "tiny_positive" if v < 1e-10 else "positive")
    return labels


def reference_sqrt(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, np.float64)
    pos = x > 0
    value = np.where(pos, np.sqrt(np.where(pos, x, 1.0)), 0.0)
    grad = np.where(pos, 0.5 / np.sqrt(np.where(pos, x, 1.0)), 0.0)
    return value, grad


def _kinds(x: np.ndarray, bad: np.ndarray) -> str:
    names = {"negative": "negative inputs", "zero": "exact zeros", "tiny_positive": "tiny positive inputs",
             "positive": "ordinary positive inputs"}
    return ", ".join(names[k] for k in ("negative", "zero", "tiny_positive", "positive")
                     if k in sqrt_labels(np.asarray(x)[bad]))


def judge_sqrt_values(got: dict, x: np.ndarray) -> None:
    want, _ = reference_sqrt(x)
    value = got.get("value")
    if "value_error" in got or not isinstance(value, np.ndarray) or value.shape != want.shape:
        advice = "safe_sqrt(x) is elementwise and must trace under jax.jit: jnp operations only, no Python if"
        raise CheckFailed("safe_sqrt(x) under jax.jit failed", measured=got.get("value_error") or describe(value),
                          expected=f"f32[{want.size}]", hint=advice,
                          diagnosis="safe_sqrt raised under jax.jit or returned the wrong shape", advice=advice)
    v = value.astype(np.float64)
    bad = ~(np.isclose(v, want, rtol=1e-6, atol=0.0) | ((want == 0) & (v == 0)))
    if bad.any():
        advice = ("safe_sqrt(x) is sqrt(x) where x > 0 and exactly 0 where x <= 0: no epsilon added or clipped in "
                  "(sqrt(1e-12) is 1e-6, not 0)")
        raise CheckFailed(f"safe_sqrt's value is wrong on {_kinds(x, bad)}",
                          measured=f"{int(bad.sum())} of {bad.size} values off", expected="sqrt(x) for x > 0, 0 else",
                          hint=advice, diagnosis=f"safe_sqrt's value is wrong on {_kinds(x, bad)}", advice=advice)


def judge_sqrt_gradient(got: dict, x: np.ndarray) -> None:
    _, want = reference_sqrt(x)
    grad = got.get("grad")
    if "grad_error" in got or not isinstance(grad, np.ndarray) or grad.shape != want.shape:
        advice = "jax.grad of sum(safe_sqrt(x)) must work under jax.jit: jnp operations only"
        raise CheckFailed("the gradient of safe_sqrt failed", measured=got.get("grad_error") or describe(grad),
                          expected=f"f32[{want.size}]", hint=advice,
                          diagnosis="jax.grad through safe_sqrt raised or gave the wrong shape", advice=advice)
    g = grad.astype(np.float64)
    finite = np.isfinite(g)
    bad = ~finite | ~(np.isclose(g, want, rtol=1e-5, atol=0.0) | ((want == 0) & (g == 0)))
    if bad.any():
        if not finite.all():
            advice = ("the gradient is NaN or inf where the value is fine: jnp.where(x > 0, jnp.sqrt(x), 0.0) still "
                      "differentiates sqrt at x <= 0 (an infinite slope times a zero is NaN). Take the square root of "
                      "a safe input: jnp.where(x > 0, jnp.sqrt(jnp.where(x > 0, x, 1.0)), 0.0)")
        else:
            advice = ("the gradient is 1 / (2 sqrt(x)) where x > 0 and exactly 0 where x <= 0: no epsilon in the "
                      "input (it changes the slope of tiny positive inputs) and no clip that leaks a slope at 0")
        raise CheckFailed(f"the gradient of safe_sqrt is wrong on {_kinds(x, bad)}",
                          measured=f"{int(bad.sum())} of {bad.size} entries off ({int((~finite).sum())} not finite)",
                          expected="1/(2 sqrt(x)) for x > 0, 0 for x <= 0 (rtol 1e-5)", hint=advice,
                          diagnosis=f"the gradient of safe_sqrt is wrong on {_kinds(x, bad)}" + (
                              " (NaN or inf)" if not finite.all() else ""), advice=advice)


# --- part D: the questions ------------------------------------------------------------------------------

ANSWER_TYPES = {"cond_branches_traced": int, "switch_index_minus_1": int, "switch_index_5": int,
                "jit_if_error": str, "grad_if_raises": bool, "where_grad_finite": bool}
QUESTIONS = {
    "cond_branches_traced": "how many of lax.cond's two branch functions run in Python when the jitted function "
                            "is traced",
    "switch_index_minus_1": "which branch lax.switch runs for the index -1",
    "switch_index_5": "which branch lax.switch runs for the index 5 (three branches)",
    "jit_if_error": "the class of the error a Python `if` on a traced value raises under jax.jit",
    "grad_if_raises": "whether plain jax.grad (no jit) of a function with that `if` raises",
    "where_grad_finite": "whether the jnp.where version of piecewise has a finite gradient at a positive sum",
}


def _plain_answer(value, t: type):
    """A 0-d NumPy or JAX value of the right kind (``np.bool_``, ``jnp.int32(2)``) as the Python
    value it stands for; anything else unchanged."""
    if isinstance(value, np.ndarray) and value.shape == ():
        if t is bool and value.dtype == np.bool_:
            return bool(value)
        if t is int and np.issubdtype(value.dtype, np.integer):
            return int(value)
    return value


def judge_answers_shape(got) -> dict:
    """The answers, each of its type (0-d NumPy or JAX values of the right kind accepted)."""
    if type(got) is not dict:
        raise CheckFailed("answers() should return a dict", measured=describe(got), expected="a dict",
                          hint="return a dict with the six keys of the docstring",
                          diagnosis="answers() did not return a dict", advice="return a dict with the six keys")
    got = {k: _plain_answer(v, ANSWER_TYPES[k]) if k in ANSWER_TYPES else v for k, v in got.items()}
    for key, t in ANSWER_TYPES.items():
        if key not in got or type(got[key]) is not t:
            advice = f"answers()[{key!r}] must be a {t.__name__}: {QUESTIONS[key]}"
            raise CheckFailed(f"answers()[{key!r}] is missing or not a {t.__name__}",
                              measured="missing" if key not in got else type(got[key]).__name__,
                              expected=t.__name__, hint=advice,
                              diagnosis=f"answers() lacks {key!r} or gives it the wrong type", advice=advice)
    return got


def judge_answers(got: dict, truth: dict, keys=None) -> None:
    got = judge_answers_shape(got)
    wrong = [k for k in (keys or ANSWER_TYPES) if got[k] != truth[k]]
    if wrong:
        advice = ("run each question on the JAX you have (a jitted function whose branches append to a list, a "
                  "switch with an index out of range, a try/except around the jitted `if`, ...) and read the answer "
                  "off what it does; course texts and older JAX versions differ")
        raise CheckFailed(f"{len(wrong)} answer(s) differ from what the installed JAX does: {', '.join(wrong)}",
                          measured="; ".join(f"{k}={got[k]!r}" for k in wrong),
                          expected="; ".join(f"{k}={truth[k]!r}" for k in wrong), hint=advice,
                          diagnosis="wrong: " + "; ".join(QUESTIONS[k] for k in wrong), advice=advice)
