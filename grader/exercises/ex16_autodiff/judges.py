"""Exercise 16 (forward and reverse mode, custom derivatives): draws, references and verdicts shared
by the public and the hidden checks.  NumPy only, references in float64 (``functions.py`` has the
exact Hessians and Jacobians); what ``jacfwd``, ``jacrev`` and the reference hvp cost comes from
the clean worker at every grading, measured by XLA's cost analysis on the installed JAX and by the
operations their jaxprs do, loops counted by their trip counts (``ir.live_work``).

Feedback for a hidden check names the *kind* of input that went wrong (a dense or a diagonal
Hessian, a wide or a tall Jacobian, a cotangent below the clip range, logits of 1e4), never a
drawn value: those go to ``measured`` and ``expected``, which only the instructor reads.
"""

from __future__ import annotations

import numpy as np

from grader.exercises.ex16_autodiff import functions
from grader.feedback import CheckFailed, describe, expect_traced_program_computes
from grader.traced_work import expect_no_host_callback

COST_SLACK = 1.2  # the learner's jacobian may cost this much more than the cheaper of jacfwd and jacrev
HESSIAN_SIZE = 1024  # hvp's jaxpr is read at this size: an n x n Hessian is a million elements
#: no value in hvp's jaxpr may hold this many times n elements: a Hessian-vector product needs a few
#: vectors of size n, while the Hessian in pieces (two n/2 x n halves, rows by the dozen) holds far more
HVP_MAX_ELEMENTS_PER_N = 8
#: hvp's program at ``HESSIAN_SIZE`` may do at most this many times the operations the reference
#: (forward over reverse) does for the same function, loops counted by their trip counts
#: (``ir.live_work``): honest Hessian-vector products cost a few gradients (reverse over reverse
#: 1.1x the reference), while the Hessian formed row by row, one pass per row in a loop that never
#: holds a large value, costs n gradients (over 1000x at n = 1024)
HVP_MAX_WORK_FACTOR = 10


def _fail(message: str, diagnosis: str, advice: str, measured: str = "", expected: str = "") -> CheckFailed:
    return CheckFailed(message, measured=measured or diagnosis, expected=expected, hint=advice,
                       diagnosis=diagnosis, advice=advice)


def _out(res: dict, what: str, advice: str) -> np.ndarray:
    if "error" in res:
        raise _fail(f"{what} raised: {res['error']}", f"{what} raised an error", advice, measured=res["error"])
    return res["out"]


# --- part A: hvp ------------------------------------------------------------------------------------

def hessian_label(name: str) -> str:
    return "dense_hessian" if name in functions.DENSE_HESSIAN else "diagonal_hessian"


def draw_hvp_cases(rng) -> list[dict]:
    """A function with a diagonal Hessian and one with a dense Hessian, at small sizes."""
    names = ["sine", str(rng.choice(functions.DENSE_HESSIAN))]
    cases = []
    for name in rng.permutation(names):
        n = int(rng.integers(6, 17))
        cases.append({"name": str(name), "params": functions.draw_params(rng, str(name), n),
                      "x": rng.normal(size=n).astype(np.float32), "v": rng.normal(size=n).astype(np.float32)})
    return cases


def reference_hvp(case: dict) -> np.ndarray:
    return functions.hessian(case["name"], case["params"], case["x"]) @ np.asarray(case["v"], np.float64)


def judge_hvp(got: list[dict], cases: list[dict]) -> None:
    for res, case in zip(got, cases):
        kind = hessian_label(case["name"]).replace("_", " ")
        out = _out(res, "hvp(f, x, v) under jax.jit",
                   "hvp must trace under jax.jit: build it from jax.grad and jax.jvp, no NumPy on traced values")
        want = reference_hvp(case)
        if out.shape != want.shape:
            raise _fail(f"hvp returned {describe(out)}; expected f32[{want.size}]",
                        "hvp returned the wrong shape: H(x) v is a vector like x",
                        "return the Hessian times v, a vector of x's shape, not the Hessian itself",
                        measured=describe(out), expected=f"f32[{want.size}]")
        scale = max(1.0, float(np.max(np.abs(want))))
        if np.all(np.isfinite(out)) and np.allclose(out, want, rtol=1e-4, atol=1e-5 * scale):
            continue
        hess = functions.hessian(case["name"], case["params"], case["x"])
        if np.allclose(out, np.diag(hess) * case["v"], rtol=1e-4, atol=1e-5 * scale):
            diagnosis = f"hvp gives only the Hessian's diagonal times v (a function with a {kind})"
        else:
            diagnosis = f"hvp differs from the Hessian times v for a function with a {kind}"
        advice = ("H(x) v is the directional derivative of the gradient: jax.jvp(jax.grad(f), (x,), (v,))[1] "
                  "(forward over reverse); not grad(f)(x) * v, not finite differences")
        raise _fail(f"hvp differs from the float64 Hessian-vector product ({kind})", diagnosis, advice,
                    measured=f"largest difference {float(np.max(np.abs(out - want))):.3g}",
                    expected="H(x) @ v (rtol 1e-4)")


def _largest_message(facts: dict, n: int, shown: int = 3) -> str:
    """The largest values by type, floating-point first (``ir.largest_value`` orders them): the
    float Hessian before the integer basis ``jax.hessian`` builds beside it."""
    avals = list(facts.get("avals") or [facts["aval"]])
    floats = [a for a in avals if a.startswith(("float", "bfloat", "complex"))]
    named = (floats or avals)[:shown]
    rest = len(avals) - len(named)
    what = "a value" if len(avals) == 1 else f"{len(avals)} values"
    unnamed_floats = len(floats) - len(named) if floats else 0
    more = "" if not rest else (f" and {rest} more" if unnamed_floats else
                                f" and {rest} integer or boolean one{'s' if rest > 1 else ''}, e.g. the basis jax.jacfwd builds")
    return f"hvp's jaxpr holds {what} of {facts['elements']} elements for x of size {n}: {', '.join(named)}{more}"


def judge_hvp_largest(facts: dict, n: int = HESSIAN_SIZE) -> None:
    """No value of ``HVP_MAX_ELEMENTS_PER_N`` n elements or more in hvp's jaxpr (``ir.largest_value``)."""
    if "error" in facts:
        raise _fail(f"tracing hvp under jax.jit failed: {facts['error']}", "hvp does not trace (jax.jit raised)",
                    "build hvp from JAX transformations only", measured=facts["error"])
    if facts["elements"] >= HVP_MAX_ELEMENTS_PER_N * n:
        raise _fail(_largest_message(facts, n),
                    "hvp builds the n x n Hessian, whole or in pieces (a value with "
                    f"{HVP_MAX_ELEMENTS_PER_N} n elements or more appears in its jaxpr)",
                    "never form the Hessian: jax.jvp of jax.grad(f) at x in the direction v gives H(x) v with "
                    "vectors of size n only; jax.hessian(f)(x) @ v and jax.jacfwd(jax.grad(f))(x) @ v build all of H",
                    measured=f"largest values {', '.join(facts.get('avals') or [facts['aval']])}",
                    expected=f"fewer than {HVP_MAX_ELEMENTS_PER_N} n = {HVP_MAX_ELEMENTS_PER_N * n} elements")


def draw_hessian_case(rng) -> dict:
    """A function with a dense Hessian at ``HESSIAN_SIZE``, a point and a direction."""
    name = str(rng.choice(functions.DENSE_HESSIAN))
    params = functions.draw_params(rng, name, HESSIAN_SIZE)
    return {"name": name, "params": params, "x": rng.normal(size=HESSIAN_SIZE).astype(np.float32),
            "v": rng.normal(size=HESSIAN_SIZE).astype(np.float32)}


def judge_hvp_program(facts: dict, reference_work: int, case: dict) -> None:
    """hvp's program at a large size (``probes.hvp_program``): it computes H(x) v, holds no value
    of the Hessian's size and does a few gradients' work -- ``HVP_MAX_WORK_FACTOR`` times the
    reference's operations at most, loops counted by their trip counts -- so the Hessian formed
    in pieces fails, whether the pieces are large values or the trips of a loop."""
    n = int(np.size(case["x"]))
    advice = ("never form the Hessian: jax.jvp of jax.grad(f) at x in the direction v gives H(x) v with vectors of "
              "size n and the work of a few gradients")
    if "error" in facts:
        judge_hvp_largest(facts, n)
    uncounted = facts.get("uncounted") or {}
    expect_no_host_callback(uncounted, where="hvp", advice=advice)
    if uncounted:
        raise _fail(f"hvp's program holds {', '.join(sorted(uncounted))}: its work cannot be counted",
                    "hvp computes in a while loop, a kernel or an opaque call, whose trip count or work is not in "
                    "the program, so whether it forms the Hessian cannot be measured",
                    advice + " (no loop is needed)",
                    measured=", ".join(f"{count} {name}" for name, count in sorted(uncounted.items())),
                    expected="no while loop, kernel or opaque call")
    out = facts.get("out") or {"error": facts.get("run_error", "no output")}
    want = reference_hvp(case)
    got = out.get("out")
    scale = max(1.0, float(np.max(np.abs(want))))
    expect_traced_program_computes(
        isinstance(got, np.ndarray) and got.shape == want.shape and bool(np.all(np.isfinite(got))) and
        bool(np.allclose(got, want, rtol=1e-3, atol=1e-4 * scale)),
        "hvp", f"compute H(x) v for x of size {n}", measured=out.get("error") or describe(got),
        expected="H(x) @ v, as traced under jax.jit")
    judge_hvp_largest(facts, n)
    work, limit = int(facts["work"]), HVP_MAX_WORK_FACTOR * int(reference_work)
    if work > limit:
        raise _fail(f"hvp does {work} operations for x of size {n}: {work / reference_work:.0f}x the "
                    f"{reference_work} of forward over reverse on the same function",
                    f"hvp does the work of the whole Hessian (about n gradients), in pieces no single value of "
                    f"which is large: a loop over its rows or columns, each trip a forward-over-reverse pass, counted "
                    f"by its trip count. A Hessian-vector product costs a few gradients (at most "
                    f"{HVP_MAX_WORK_FACTOR}x the reference here)",
                    advice + "; one jax.jvp of jax.grad(f) in the direction v, not one per basis vector",
                    measured=f"{work} operations (elements computed, a matrix product's multiply-adds; loops "
                             f"counted by their trip counts); forward over reverse {reference_work}",
                    expected=f"at most {HVP_MAX_WORK_FACTOR} x {reference_work} = {limit}")


# --- part B: jacobian -------------------------------------------------------------------------------

def shape_label(case: dict) -> str:
    return "wide" if case["m"] < np.shape(case["x"])[0] else "tall"


def draw_jacobian_cases(rng) -> list[dict]:
    """A wide function (3 to 6 outputs of 96 to 160 inputs) and a tall one (the other way round)."""
    cases = []
    for wide in rng.permutation([True, False]):
        small, large = int(rng.integers(3, 7)), int(rng.integers(96, 161))
        m, n = (small, large) if wide else (large, small)
        name = str(rng.choice(functions.VECTOR))
        cases.append({"name": name, "params": functions.draw_params(rng, name, n, m),
                      "x": rng.normal(size=n).astype(np.float32), "m": m})
    return cases


def _jacobian_words(case: dict) -> str:
    return ("a wide Jacobian (fewer outputs than inputs)" if shape_label(case) == "wide"
            else "a tall Jacobian (more outputs than inputs)")


def judge_jacobian_values(got: list[dict], cases: list[dict]) -> None:
    for res, case in zip(got, cases):
        out = _out(res, "jacobian(f, x) under jax.jit",
                   "jacobian must trace under jax.jit: jax.jacfwd or jax.jacrev of f, chosen from shapes alone")
        want = functions.jacobian(case["name"], case["params"], case["x"])
        if out.shape != want.shape:
            transposed = out.shape == want.T.shape
            raise _fail(f"jacobian returned {describe(out)}; expected f32[{want.shape[0]},{want.shape[1]}]",
                        f"jacobian returned the wrong shape for {_jacobian_words(case)}" +
                        (": the transpose" if transposed else ""),
                        "the Jacobian of f: R^n -> R^m is m x n (row i: the gradient of output i); jax.jacfwd and "
                        "jax.jacrev both return it that way", measured=describe(out),
                        expected=f"f32[{want.shape[0]},{want.shape[1]}]")
        if not np.allclose(out, want, rtol=1e-5, atol=1e-6):
            raise _fail(f"jacobian differs from the float64 Jacobian ({_jacobian_words(case)})",
                        f"jacobian's values are wrong for {_jacobian_words(case)}",
                        "return jax.jacfwd(f)(x) or jax.jacrev(f)(x): the same values, different costs",
                        measured=f"largest difference {float(np.max(np.abs(out - want))):.3g}",
                        expected="the Jacobian (rtol 1e-5)")


def judge_jacobian_cost(got: list[dict], truth: list[dict], cases: list[dict]) -> None:
    """Each case's cost within ``COST_SLACK`` of the cheaper of jacfwd and jacrev, measured live
    twice, on the program that computed the Jacobian: XLA's flops (the compiled program, dead
    code dropped, but a loop's body counted once) and the operations its jaxpr does (elements
    computed, a matrix product's multiply-adds; a loop's body counted once per trip:
    ``ir.live_work``)."""
    for res, costs, case in zip(got, truth, cases):
        words = _jacobian_words(case)
        if "cost_error" in res:
            raise _fail(f"jacobian could not be compiled for its cost: {res['cost_error']}",
                        "jax.jit(lambda x: jacobian(f, x)) could not be lowered and compiled",
                        "keep jacobian a composition of JAX transformations", measured=res["cost_error"])
        if res.get("opaque"):
            raise _fail(f"jacobian hands work to {res['opaque']}: XLA cannot count it",
                        "jacobian computes through a host callback, whose work XLA's cost analysis cannot see",
                        "compute the Jacobian with jax.jacfwd or jax.jacrev inside the traced program",
                        measured=str(res["opaque"]))
        if res.get("while_loops"):
            raise _fail("jacobian runs a while loop: XLA's cost analysis counts one trip of a loop whose trip "
                        "count it cannot see, so its cost cannot be measured",
                        "jacobian computes in a while loop, whose work XLA's cost analysis counts only once",
                        "compute the Jacobian with jax.jacfwd or jax.jacrev (a loop with a fixed length, "
                        "lax.map or lax.scan, is counted by its trip count)",
                        measured=f"{res['while_loops']} while loop(s)")
        if res.get("uncounted"):
            raise _fail(f"jacobian's program holds {', '.join(sorted(res['uncounted']))}: its work cannot be counted",
                        "jacobian computes in a kernel or an opaque call whose work is not in the program",
                        "compute the Jacobian with jax.jacfwd or jax.jacrev inside the traced program",
                        measured=str(res["uncounted"]))
        program = res.get("program") or {"error": "no output"}
        want = functions.jacobian(case["name"], case["params"], case["x"])
        got_program = program.get("out")
        expect_traced_program_computes(
            isinstance(got_program, np.ndarray) and got_program.shape == want.shape and
            bool(np.allclose(got_program, want, rtol=1e-5, atol=1e-6)),
            "jacobian", f"compute the Jacobian for {words}", measured=program.get("error") or describe(got_program),
            expected="the Jacobian, as traced under jax.jit and compiled")
        _judge_cost(res["flops"], costs["jacfwd"], costs["jacrev"], words, "flops",
                    "the flops XLA's cost analysis counts for the compiled program")
        _judge_cost(res["work"], costs["jacfwd_work"], costs["jacrev_work"], words, "operations",
                    "the operations its jaxpr does (elements computed, a matrix product's multiply-adds), a loop's "
                    "body counted once per trip (XLA's cost analysis counts a lax.map or lax.scan body once)")


def _judge_cost(cost: float, fwd: float, rev: float, words: str, unit: str, what: str) -> None:
    """``cost`` within ``COST_SLACK`` of the cheaper of ``fwd`` and ``rev``, in one measure."""
    best = min(fwd, rev)
    if cost <= COST_SLACK * best:
        return
    cheaper = "jax.jacrev" if rev < fwd else "jax.jacfwd"
    ratio = [abs(np.log(max(cost, 1.0) / max(mode, 1.0))) for mode in (fwd, rev)]
    like = "jax.jacfwd" if ratio[0] <= ratio[1] else "jax.jacrev"  # the nearer by ratio
    advice = ("forward mode (jax.jacfwd) computes one column per input: cheap for a tall Jacobian; reverse "
              "mode (jax.jacrev) one row per output: cheap for a wide one. Compare the output size "
              "(jax.eval_shape(f, x).shape) with the input size and pick; a loop over basis vectors costs its "
              "mode's price, one trip per vector")
    raise _fail(f"for {words}, jacobian costs {cost:.0f} {unit}; the cheaper mode, {cheaper}, {best:.0f}",
                f"for {words}, jacobian costs more than {COST_SLACK}x the cheaper mode ({cheaper}), measured as "
                f"{what}; its cost is nearer {like}'s", advice,
                measured=f"{cost:.0f} {unit} (jacfwd {fwd:.0f}, jacrev {rev:.0f})",
                expected=f"at most {COST_SLACK} x {best:.0f}")


# --- part C: clip_gradient --------------------------------------------------------------------------

def draw_clip_cases(rng) -> list[dict]:
    """A 1-D and a 2-D input, each with cotangent weights below, inside and above [lo, hi]."""
    cases = []
    for shape in ((int(rng.integers(8, 17)),), (int(rng.integers(2, 5)), int(rng.integers(3, 7)))):
        lo, hi = -float(rng.uniform(0.2, 1.5)), float(rng.uniform(0.2, 1.5))
        size = int(np.prod(shape))
        w = rng.uniform(lo, hi, size=size)
        w[0], w[1] = lo - rng.uniform(0.5, 3.0), hi + rng.uniform(0.5, 3.0)
        cases.append({"lo": lo, "hi": hi, "x": rng.normal(size=shape).astype(np.float32),
                      "w": rng.permutation(w).reshape(shape).astype(np.float32)})
    return cases


def clip_labels(cases: list[dict]) -> set[str]:
    labels = set()
    for c in cases:
        w = np.asarray(c["w"], np.float64)
        labels |= {f"{w.ndim}d"} | ({"below"} if np.any(w < c["lo"]) else set()) | \
            ({"above"} if np.any(w > c["hi"]) else set()) | \
            ({"inside"} if np.any((w >= c["lo"]) & (w <= c["hi"])) else set())
    return labels


def _clipped(w, lo, hi) -> np.ndarray:
    return np.clip(np.asarray(w, np.float64), lo, hi)


def judge_clip(got: list[dict], cases: list[dict]) -> None:
    advice_trace = "write clip_gradient with jax.custom_vjp: its forward returns x, its backward clips the cotangent"
    for res, case in zip(got, cases):
        lo, hi, x, w = case["lo"], case["hi"], np.asarray(case["x"]), np.asarray(case["w"])
        fwd = _out(res["forward"], "clip_gradient(lo, hi, x)", advice_trace)
        if fwd.shape != x.shape or not np.array_equal(fwd, x):
            clipped = fwd.shape == x.shape and np.allclose(fwd, np.clip(x, lo, hi))
            raise _fail("clip_gradient(lo, hi, x) is not x", "clip_gradient changes the value it is given" +
                        (": it clips the values, not the gradient" if clipped else ""),
                        "the forward pass is the identity: return x unchanged; only the backward pass clips",
                        measured=describe(fwd))
        grad = _out(res["grad"], "jax.grad through clip_gradient", advice_trace)
        want = _clipped(w, lo, hi)
        if grad.shape == want.shape and np.allclose(grad, want, rtol=1e-6, atol=1e-7):
            continue
        if grad.shape == want.shape and np.allclose(grad, w, rtol=1e-6, atol=1e-7):
            diagnosis = "the gradient is not clipped: the cotangent passes through unchanged"
        else:
            where = [name for name, mask in (("below lo", w < lo), ("between lo and hi", (w >= lo) & (w <= hi)),
                                             ("above hi", w > hi))
                     if grad.shape == want.shape and np.any(mask & ~np.isclose(grad, want, rtol=1e-6, atol=1e-7))]
            diagnosis = ("the gradient is wrong for cotangent entries " + ", ".join(where) if where
                         else "the gradient has the wrong shape")
        raise _fail(f"the gradient through clip_gradient is not clip(g, lo, hi) ({w.ndim}-D input)", diagnosis,
                    "the backward rule returns jnp.clip(g, lo, hi) for x (and nothing, None, for lo and hi): each "
                    "entry of the incoming cotangent is clipped to [lo, hi] on its own",
                    measured=describe(grad), expected="clip(g, lo, hi) elementwise")


def draw_composed_case(rng) -> dict:
    b, n = int(rng.integers(3, 7)), int(rng.integers(4, 9))
    lo, hi = -float(rng.uniform(0.2, 1.5)), float(rng.uniform(0.2, 1.5))
    return {"lo": lo, "hi": hi, "xs": rng.normal(size=(b, n)).astype(np.float32),
            "ws": (2.0 * rng.normal(size=(b, n))).astype(np.float32)}


def judge_clip_composed(got: dict, case: dict) -> None:
    grads = _out(got["grads"], "jax.jit(jax.vmap(jax.grad(...))) through clip_gradient",
                 "the backward rule must trace: jnp.clip on the cotangent, no NumPy (np.clip, np.asarray) and no "
                 "Python if on its values; jax.jit and jax.vmap then compose with it")
    want = _clipped(case["ws"], case["lo"], case["hi"])
    if grads.shape != want.shape or not np.allclose(grads, want, rtol=1e-6, atol=1e-7):
        raise _fail("per-example gradients under jit(vmap(grad)) are not clip(g, lo, hi)",
                    "under jax.jit(jax.vmap(jax.grad(...))) the clipped gradients are wrong",
                    "clip each entry of the cotangent on its own (jnp.clip(g, lo, hi)): no reduction over the batch",
                    measured=describe(grads), expected="clip(g, lo, hi) per example")
    if "jaxpr_error" not in got:
        # structure and values from one trace: the custom_vjp_call counts only in a program that computes x
        # (a trace that failed is jaxpr_error; "forward" holds the traced program's output, or why it is none)
        forward = got.get("forward", {})
        forward = forward if isinstance(forward, dict) else {"error": describe(forward)}
        traced, x0 = forward.get("out"), np.asarray(case["xs"][0])
        expect_traced_program_computes(
            isinstance(traced, np.ndarray) and traced.shape == x0.shape and bool(np.allclose(traced, x0)),
            "clip_gradient", "compute clip_gradient's forward (x itself)", how=" (lo and hi static)",
            measured=forward.get("error") or describe(traced), expected="x itself, as traced under jax.jit")
    if "jaxpr_error" in got or not got.get("custom_vjp"):
        raise _fail("no custom_vjp_call in the jaxpr of clip_gradient",
                    "clip_gradient's jaxpr holds no custom_vjp_call: it is not a jax.custom_vjp function",
                    "decorate clip_gradient with @jax.custom_vjp and register (forward, backward) with defvjp",
                    measured=got.get("jaxpr_error", "no custom_vjp_call"))


# --- part D: softmax --------------------------------------------------------------------------------

def draw_softmax_cases(rng) -> tuple[list[dict], list[str]]:
    """Ordinary logits (1-D), logits of +-1e4 (1-D), and rows of logits all near -1e4 (2-D), each
    with a drawn cotangent."""
    n = int(rng.integers(4, 9))
    ordinary = (3.0 * rng.normal(size=n)).astype(np.float32)
    huge = (1e4 * rng.choice([-1.0, 1.0], size=n) + rng.normal(size=n)).astype(np.float32)
    huge[0] = abs(huge[0])  # at least one logit near +1e4
    negative = (-1e4 + rng.normal(size=(int(rng.integers(2, 4)), n))).astype(np.float32)
    cases = [{"x": x, "g": rng.normal(size=x.shape).astype(np.float32)} for x in (ordinary, huge, negative)]
    labels = ["ordinary", "huge", "very_negative"]
    order = rng.permutation(3)
    return [cases[i] for i in order], [labels[i] for i in order]


def softmax_labels(cases, labels) -> set[str]:
    return set(labels) | {f"{np.ndim(c['x'])}d" for c in cases}


_SOFTMAX_WORDS = {"ordinary": "ordinary logits", "huge": "logits of +-1e4",
                  "very_negative": "logits all near -1e4", "": "the given logits"}


def reference_softmax(x, g) -> tuple[np.ndarray, np.ndarray]:
    x, g = np.asarray(x, np.float64), np.asarray(g, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    return y, y * (g - np.sum(g * y, axis=-1, keepdims=True))


def judge_softmax(got: list[dict], cases: list[dict], labels: list[str]) -> None:
    advice = ("subtract the row's max before exp (exp(1e4) overflows to inf, and inf / inf is NaN), and give "
              "jax.custom_vjp a backward rule from the output alone: y * (g - sum(g * y, axis=-1, keepdims=True))")
    for res, case, label in zip(got, cases, labels):
        words = _SOFTMAX_WORDS[label] + (" (2-D)" if np.ndim(case["x"]) == 2 else "")
        if "error" in res:
            raise _fail(f"jax.vjp(softmax, x) raised: {res['error']}", f"jax.vjp(softmax, x) raised for {words}",
                        advice, measured=res["error"])
        want_y, want_ct = reference_softmax(case["x"], case["g"])
        for name, res_y in (("softmax(x)", res["y"]), ("jax.jit(softmax)(x)", res["jit"])):
            y = _out(res_y, name, advice)
            if y.shape != want_y.shape or not np.all(np.isfinite(y)) or \
                    not np.allclose(y, want_y, rtol=1e-5, atol=1e-7):
                finite = y.shape == want_y.shape and np.all(np.isfinite(y))
                raise _fail(f"{name} differs from the float64 softmax ({words})",
                            f"{name} is wrong for {words}" + ("" if finite else ": NaN or inf"),
                            advice, measured=describe(y), expected="the softmax over the last axis (rtol 1e-5)")
        ct = _out(res["ct"], "the VJP of softmax", advice)
        scale = max(1e-6, float(np.max(np.abs(want_ct))))
        if ct.shape != want_ct.shape or not np.all(np.isfinite(ct)) or \
                not np.allclose(ct, want_ct, rtol=1e-4, atol=1e-5 * scale):
            finite = ct.shape == want_ct.shape and np.all(np.isfinite(ct))
            raise _fail(f"the VJP of softmax differs from the float64 one ({words})",
                        f"the gradient of softmax is wrong for {words}" + ("" if finite else ": NaN or inf"),
                        "the VJP of y = softmax(x) at cotangent g is y * (g - sum(g * y, axis=-1, keepdims=True)): "
                        "the whole Jacobian diag(y) - y y^T, not only its diagonal, and the sum over the last axis "
                        "only", measured=describe(ct), expected="y * (g - sum(g * y, axis=-1)) (rtol 1e-4)")


def judge_softmax_residuals(got: list[dict], cases: list[dict]) -> None:
    """What ``jax.vjp`` keeps for the backward pass is one array: the output itself -- and
    nothing kept elsewhere (a global, a closure variable, an attribute) for the backward rule."""
    changed = next((res.get("state_changed") for res in got if res.get("state_changed")), [])
    if changed:
        raise _fail("softmax keeps state outside its residuals between calls",
                    "the forward or backward rule writes state that outlives the call (a global variable, its "
                    "contents, a function's attribute or closure variable, or a module's attribute): whatever the "
                    "backward pass reads must come from its residuals, and the only residual is the output",
                    "with jax.custom_vjp, the forward rule returns (y, y) and the backward rule computes from y and g "
                    "alone; keep nothing in globals, closures or attributes",
                    measured=f"changed, by the global name it is reached from: {', '.join(changed)}",
                    expected="nothing outside softmax changes")
    for res, case in zip(got, cases):
        residuals, count = res.get("residuals", []), res.get("residual_count", 0)
        y = res["y"]["out"]
        if count == 1 and isinstance(residuals[0], np.ndarray) and residuals[0].shape == y.shape and \
                np.array_equal(residuals[0], y, equal_nan=True):  # a NaN output is the values check's to judge
            continue
        if count == 1 and isinstance(residuals[0], np.ndarray) and residuals[0].shape == np.shape(case["x"]) and \
                np.array_equal(residuals[0], case["x"]):
            diagnosis = ("the forward rule saves the input x for the backward pass, so the backward pass has to compute the "
                         "softmax again; save the output y instead: the softmax's derivative needs only y")
            message = "jax.vjp(softmax, x) keeps 1 residual, but it is the input x, not the output"
        elif count > 1:
            diagnosis = (f"reverse mode keeps {count} arrays for the backward pass: JAX's own derivative of every "
                         "step, or a custom rule that saves more than the output")
            message = f"jax.vjp(softmax, x) keeps {count} residuals; expected 1, the output"
        elif count == 1:
            diagnosis = "what the backward pass keeps is not the output of softmax"
            message = "jax.vjp(softmax, x) keeps 1 residual, but it is not the output"
        else:
            diagnosis = "the backward pass keeps nothing: not the output of softmax"
            message = "jax.vjp(softmax, x) keeps no residual; expected 1, the output"
        raise _fail(message, diagnosis,
                    "with jax.custom_vjp, the forward rule returns (y, y): the output, and the output as the only "
                    "residual; the backward rule needs nothing else",
                    measured=f"{count} leaves: {[describe(r) for r in residuals]}", expected="one leaf, equal to y")
    for res, case in zip(got, cases):
        _judge_softmax_custom_vjp(res, case)


def _judge_softmax_custom_vjp(res: dict, case: dict) -> None:
    """The residual is the output because softmax is a ``jax.custom_vjp`` whose forward rule keeps
    it: a ``custom_vjp_call`` in the program of softmax, traced under ``jax.jit``, that computes the
    softmax.  Plain autodiff of a formulation whose linearisation happens to keep only y (a
    ``stop_gradient`` construction) is not the custom rule the statement asks for; nor is a
    ``custom_vjp`` kept beside such a construction (fed ``stop_gradient(x)``, or added times
    zero): the derivative ``jax.vjp`` gives must go through the rule alone, read from the very
    pull-back whose values and residuals the other checks judged (``bypass``)."""
    advice = ("decorate softmax with @jax.custom_vjp and register (forward, backward) with defvjp: the forward rule "
              "returns (y, y), the backward rule y * (g - sum(g * y, axis=-1, keepdims=True))")
    if "jaxpr_error" not in res:
        traced = (res.get("traced") or {}).get("out")
        want, _ = reference_softmax(case["x"], case["g"])
        expect_traced_program_computes(
            isinstance(traced, np.ndarray) and traced.shape == want.shape and
            bool(np.allclose(traced, want, rtol=1e-5, atol=1e-7)),
            "softmax", "compute the softmax", measured=(res.get("traced") or {}).get("error") or describe(traced),
            expected="the softmax over the last axis, as traced under jax.jit")
    if "jaxpr_error" in res or not res.get("custom_vjp"):
        raise _fail("no custom_vjp_call in the jaxpr of softmax",
                    "softmax's jaxpr holds no custom_vjp_call: its backward pass is JAX's own derivative of how the "
                    "forward is written, not a jax.custom_vjp rule, even where that derivative keeps only the output",
                    advice, measured=res.get("jaxpr_error", "no custom_vjp_call"),
                    expected="a custom_vjp_call (softmax defined with jax.custom_vjp)")
    bypass = res.get("bypass")
    if "bypass_error" in res or bypass:
        raise _fail("softmax's derivative does not go through its custom_vjp rule alone",
                    "jax.vjp(softmax, x) carries x's tangent to the output along a path that passes no custom_vjp "
                    "rule: part or all of the derivative is JAX's own derivative of other operations (a "
                    "stop_gradient construction, say), and the custom_vjp rule is beside it rather than the one "
                    "the backward pass runs",
                    "let the custom_vjp function take x itself (not stop_gradient(x)) and return the softmax: "
                    "softmax = the custom_vjp function, with nothing computed from x beside it",
                    measured=res.get("bypass_error") or f"the tangent reaches the output through {', '.join(bypass)}",
                    expected="every path from x's tangent to the output through the custom_vjp rule")
