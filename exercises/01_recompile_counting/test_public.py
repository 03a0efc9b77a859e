"""Public checks for exercise 1 (run by `grade exercise 1`; they carry no points).

The true compile counts are measured here, live, with the installed JAX; the hidden
checks draw new random sequences and a new workload at grading time.
"""

import numpy as np

from grader.exercises.ex01_recompile.judges import as_count, expect_score_in_jax, expected_score, mode_of, warm_up_score
from grader.feedback import CheckFailed, expect_array, expect_close
from grader.testing import count_compiles, expect_compiles

# ---------------------------------------------------------------------------------------
# Part A helpers: build a call's values, run a sequence on a fresh jit, render it
# ---------------------------------------------------------------------------------------

_SHORT = {"float32": "f32", "float16": "f16", "int32": "i32"}


def render(spec):
    if isinstance(spec, str):
        return repr(spec)
    if isinstance(spec, (float, int)):
        return repr(spec)
    if "array" in spec:
        text = f"{_SHORT[spec['array']]}[{','.join(map(str, spec['shape']))}]"
        return "np." + text if spec.get("numpy") else text
    if "tuple" in spec:
        items = [render(s) for s in spec["tuple"]]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return "{" + ", ".join(f"{k!r}: {render(s)}" for k, s in spec["dict"].items()) + "}"


def render_call(call):
    parts = [render(a) for a in call["args"]] + [f"{k}={render(v)}" for k, v in call["kwargs"].items()]
    return f"f({', '.join(parts)})"


def A(dtype="float32", *shape, numpy=False):
    spec = {"array": dtype, "shape": list(shape)}
    if numpy:
        spec["numpy"] = True
    return spec


def call(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


PUBLIC_SEQUENCES = [
    # new values, same signature: numpy vs jax does not matter either
    [call(A("float32", 3), 0.5), call(A("float32", 3), 1.5), call(A("float32", 3, numpy=True), -2.0)],
    # a new shape compiles; going back to an old shape does not; a new dtype at the same shape does
    [call(A("float32", 3), 0.5), call(A("float32", 4), 0.5), call(A("float32", 3), 2.5), call(A("float16", 3), 0.5)],
    # Python scalars versus arrays
    [call(A("float32", 3), 0.5), call(A("float32", 3), A("float32")), call(A("float32", 3), 2), call(A("float32", 3), 7)],
    # the static argument: its value, and how it is passed
    [call(A("float32", 2, 2), 1.0), call(A("float32", 2, 2), 1.0, mode="sum"), call(A("float32", 2, 2), 1.0, "sum"),
     call(A("float32", 2, 2), 3.0, mode="max"), call(A("float32", 2, 2), 1.0, mode="max")],
    # pytree structure
    [call({"tuple": [A("float32", 3), A("int32", 2)]}, 1.0),
     call({"dict": {"a": A("float32", 3), "b": A("int32", 2)}}, 1.0),
     call({"dict": {"b": A("int32", 2), "a": A("float32", 3)}}, 1.0),
     call({"tuple": [A("float32", 3), A("int32", 2), A("int32", 2)]}, 1.0)],
    # a 0-d NumPy array is strongly typed, like a 0-d jax array, never weak like a Python float
    [call(A("float32", 3), 0.5), call(A("float32", 3), A("float32", numpy=True)), call(A("float32", 3), 1.5)],
    # positional versus keyword arguments
    [call(x=A("float16", 5), scale=0.1), call(scale=0.2, x=A("float16", 5)), call(A("float16", 5), scale=0.3),
     call(A("float16", 5), 0.4)],
]


def test_predicts_public_sequences(submission, truth, rng):
    measured = truth.probe("ex01_recompile:count_sequences", PUBLIC_SEQUENCES, int(rng.integers(2**31)))
    misses = []
    for seq, true_count in zip(PUBLIC_SEQUENCES, measured["counts"]):
        got = as_count(submission.call("predict_compiles", seq), "predict_compiles")
        ran = {k: submission.last_meter.get(k, 0) for k in ("traces", "compiles")}
        if ran["traces"] or ran["compiles"]:
            listing = "\n".join(f"  {i}. {render_call(c)}" for i, c in enumerate(seq, 1))
            raise CheckFailed(
                f"predict_compiles ran JAX while it predicted the sequence\n{listing}",
                measured=f"{ran['traces']} trace(s) and {ran['compiles']} compilation(s) during that call",
                expected="none: the exercise asks for a prediction from jit's rules, in plain Python",
                hint="turn each call description into a hashable key and count the distinct keys; do not call "
                     "jax.jit, jax.make_jaxpr or jax.eval_shape, or create jnp arrays, inside predict_compiles",
            )
        if got != true_count:
            misses.append((seq, got, true_count))
    if misses:
        seq, got, truth = misses[0]
        listing = "\n".join(f"  {i}. {render_call(c)}" for i, c in enumerate(seq, 1))
        raise CheckFailed(
            f"predict_compiles is wrong on {len(misses)} of {len(PUBLIC_SEQUENCES)} public sequences; the first:\n"
            f"{listing}",
            measured=f"you predicted {got} compilation(s)",
            expected=f"{truth} compilation(s), measured just now with jax {measured['jax']}",
            hint="run these calls yourself with JAX_LOG_COMPILES=1 (and JAX_EXPLAIN_CACHE_MISSES=1 to see why); "
                 "the key is the (args, kwargs) pytree of the call: shapes, dtypes, weak types, its structure "
                 "(which arguments came by keyword included) and the values of static arguments",
        )


# ---------------------------------------------------------------------------------------
# Part B
# ---------------------------------------------------------------------------------------

def describe_request(args, kwargs):
    logits, temperature, shift = args[:3]
    mode = mode_of(args, kwargs)
    how_shift = "a Python float" if isinstance(shift, float) else "a 0-d float32 array"
    how_mode = f"mode={mode!r}" if "mode" in kwargs else f"{mode!r} positionally"
    return f"logits f32{list(logits.shape)}, temperature {temperature:.3f}, shift as {how_shift}, {how_mode}"


def test_serves_small_workload(submission, reference, rng):
    requests = []
    for shape, mode, shift_is_array, mode_kw in [((2, 5), "probs", False, False), ((2, 5), "probs", True, True),
                                                 ((2, 5), "logz", True, False), ((3, 4), "logz", False, True),
                                                 ((2, 5), "logz", False, True), ((3, 4), "logz", True, False),
                                                 ((2, 5), "probs", False, True), ((3, 4), "entropy", True, True),
                                                 ((3, 4), "entropy", False, False)]:
        logits = rng.normal(size=shape).astype(np.float32)
        temperature = float(rng.uniform(0.5, 2.0))
        shift = float(rng.uniform(-1, 1))
        shift_value = np.asarray(shift, np.float32) if shift_is_array else shift
        args, kwargs = [logits, temperature, shift_value], {}
        if mode_kw:
            kwargs["mode"] = mode
        else:
            args.append(mode)
        requests.append({"args": args, "kwargs": kwargs})
    warm_up_score(submission, reference)
    outputs, compiles = count_compiles(submission, reference, "score", requests)
    for req, out in zip(requests, outputs):
        expected = expected_score(req)
        what = f"score({describe_request(req['args'], req['kwargs'])})"
        out = expect_array(out, shape=expected.shape, dtype="float32", what=what)
        expect_close(out, expected, rtol=1e-4, atol=1e-5, what=what, reveal=True,
                     hint="z = (logits + shift) / temperature; use jax.nn.log_softmax / jax.nn.logsumexp on z")
    expect_compiles(compiles, at_least=1, at_most=4, what="score", fewer_ok=True,
                    hint="4 (shape, mode) pairs should mean at most 4 compilations: make `mode` static but not "
                         "`temperature`, and make every request reach your jitted function the same way "
                         "(one dtype and weak type for shift, mode always passed the same way)")
    expect_score_in_jax(submission, compiles)  # the compilations must be of JAX doing the work
