"""Exercise 7 (the training lab): the references the judges (``judges.py``) and both check
files share.  NumPy only.  Kept apart from the verdicts, which read them, because the two
are each the size of a module.

* the lab's hyperparameters (the stub's constants) and the model's definition;
* float64 NumPy references of the MLP, its loss, the per-example metric and the loss's
  gradient (used to draw inputs whose gradient norm is known, so the clipping of
  ``clip_by_global_norm`` is certainly active);
* draws of parameters, separable data and Adam moments;
* reading the optimized HLO text a probe sent back: the fusion instructions of its ENTRY
  computation (``entry_fusions``);
* comparisons that turn what a probe measured into ``CheckFailed`` with feedback.
"""

from __future__ import annotations

import re

import numpy as np

from grader.feedback import CheckFailed, describe
from grader.ir import entry_computation

# The stub's constants: train_step uses make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY).
LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY = 0.05, 1.0, 0.01
HYPER = [LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY]
CONSTANT_NAMES = ("LEARNING_RATE", "CLIP_NORM", "WEIGHT_DECAY")


# --- the model in float64 NumPy ----------------------------------------------------------------

def forward(params, x):
    """The stub's ``forward``: relu hidden layers, a linear last layer (logits)."""
    h = np.asarray(x, np.float64)
    for layer in params[:-1]:
        h = np.maximum(h @ layer["w"] + layer["b"], 0.0)
    return h @ params[-1]["w"] + params[-1]["b"]


def log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def per_example(params, x, y):
    """(losses f64[B], correct bool[B], margin f64[B]): the margin is how far the true
    class's logit is from the best other one, so ties (where float32 may disagree) can be skipped."""
    logits = forward(params, x)
    y = np.asarray(y)
    losses = -log_softmax(logits)[np.arange(len(y)), y]
    top = np.sort(logits, axis=-1)
    margin = top[:, -1] - top[:, -2]
    return losses, logits.argmax(axis=-1) == y, margin


def loss(params, x, y):
    return float(per_example(params, x, y)[0].mean())


def grads(params, x, y):
    """The gradient of the mean cross-entropy, by hand-written backprop."""
    x = np.asarray(x, np.float64)
    hs, zs = [x], []
    for layer in params[:-1]:
        zs.append(hs[-1] @ layer["w"] + layer["b"])
        hs.append(np.maximum(zs[-1], 0.0))
    logits = hs[-1] @ params[-1]["w"] + params[-1]["b"]
    p = np.exp(log_softmax(logits))
    p[np.arange(len(y)), y] -= 1.0
    d = p / len(y)
    out = [None] * len(params)
    for i in range(len(params) - 1, -1, -1):
        out[i] = {"w": hs[i].T @ d, "b": d.sum(axis=0)}
        if i:
            d = (d @ params[i]["w"].T) * (zs[i - 1] > 0)
    return out


def global_norm(tree) -> float:
    return float(np.sqrt(sum(float(np.sum(np.square(leaf["w"]))) + float(np.sum(np.square(leaf["b"])))
                             for leaf in tree)))


# --- draws ---------------------------------------------------------------------------------------

def f32(a):
    return np.asarray(a, np.float32)


def draw_params(rng, sizes, bias_scale=0.1):
    """He-scaled normal weights; biases drawn too (zero biases would hide a bias mistake)."""
    return [{"w": f32(rng.normal(size=(a, b)) * np.sqrt(2.0 / a)), "b": f32(rng.normal(size=b) * bias_scale)}
            for a, b in zip(sizes[:-1], sizes[1:])]


def draw_sizes(rng, d_in=None, classes=None):
    d_in = int(rng.integers(3, 9)) if d_in is None else d_in
    classes = int(rng.integers(2, 6)) if classes is None else classes
    hidden = [int(h) for h in rng.integers(6, 17, size=int(rng.integers(1, 3)))]
    return [d_in, *hidden, classes]


def draw_blobs(rng, batch, d_in, classes, spread=3.0):
    """Separable data: one Gaussian blob per class, every class present."""
    means = rng.normal(size=(classes, d_in)) * spread
    y = rng.integers(0, classes, size=batch)
    y[:min(batch, classes)] = np.arange(min(batch, classes))
    y = rng.permutation(y)
    return f32(means[y] + rng.normal(size=(batch, d_in))), y.astype(np.int32)


def draw_adam(rng, params, count_range=(2, 40)):
    """Adam moments the grader chose: mu of either sign, nu positive, a count of a few steps."""
    mu = [{k: f32(rng.normal(size=v.shape) * 0.05) for k, v in layer.items()} for layer in params]
    nu = [{k: f32(rng.uniform(0.5, 2.0, size=v.shape) * 1e-3) for k, v in layer.items()} for layer in params]
    return {"count": int(rng.integers(*count_range)), "mu": mu, "nu": nu}


def draw_step_case(rng, batch, sizes=None):
    """Parameters, Adam moments and a batch whose gradient norm is at least twice CLIP_NORM
    (so clipping is active: clip-then-adamw and adamw-then-clip disagree).  The layer sizes
    are the first thing drawn (unless given), so other checks can reuse them."""
    sizes = draw_sizes(rng) if sizes is None else sizes
    for _ in range(200):  # untrained parameters almost always give a large gradient: redraw otherwise
        params = draw_params(rng, sizes)
        x, y = draw_blobs(rng, batch, sizes[0], sizes[-1])
        if global_norm(grads(params, x, y)) >= 2 * CLIP_NORM:
            break
    return {"sizes": sizes, "params": params, "adam": draw_adam(rng, params), "x": x, "y": y,
            "grad_norm": global_norm(grads(params, x, y))}


def draw_update_cases(rng):
    """Two make_optimizer cases with hyperparameters drawn here: the gradient's norm above the
    clip threshold in one (clipping active) and below it in the other."""
    sizes = draw_sizes(rng)
    cases = []
    for regime in ("clip_active", "clip_inactive"):
        params = draw_params(rng, sizes)
        g = [{k: f32(rng.normal(size=v.shape) * 0.5) for k, v in layer.items()} for layer in params]
        norm = global_norm(g)
        clip = norm / rng.uniform(2.0, 5.0) if regime == "clip_active" else norm * rng.uniform(2.0, 5.0)
        hyper = [float(rng.uniform(0.01, 0.1)), float(clip), float(rng.uniform(0.05, 0.3))]
        cases.append({"regime": regime, "hyper": hyper, "params": params, "grads": g,
                      "adam": draw_adam(rng, params), "grad_norm": norm})
    return cases


# --- the optimized HLO -----------------------------------------------------------------------------

_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[^\s=]+\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\(")


def _opcode(line: str) -> str | None:
    """The opcode of one HLO instruction line (``%n = <type> opcode(...)``), else ``None``.
    A tuple type ``(f32[2], s32[])`` holds spaces and parentheses: it is skipped whole."""
    m = _INSTRUCTION.match(line)
    if not m:
        return None
    rest = line[m.end():]
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                rest = rest[i + 1:]
                break
        else:
            return None
    else:
        space = rest.find(" ")
        if space < 0:
            return None
        rest = rest[space:]
    m = _OPCODE.match(rest)
    return m.group(1) if m else None


def entry_opcodes(hlo_text: str) -> list[str]:
    """The opcode of every instruction of the ENTRY computation, in order."""
    body = entry_computation(hlo_text).splitlines()[1:]
    return [op for op in map(_opcode, body) if op]


def entry_fusions(hlo_text: str) -> int:
    """How many instructions of the ENTRY computation are ``fusion`` instructions."""
    return sum(1 for op in entry_opcodes(hlo_text) if op == "fusion")


# --- judging what came back -------------------------------------------------------------------------

def tree_close(got, want, *, rtol, atol) -> tuple[bool, str]:
    """Whether two lists of {"w", "b"} dicts agree leaf by leaf; the second item says where not."""
    if type(got) not in (list, tuple) or len(got) != len(want):
        return False, f"got {describe(got)}, expected a list of {len(want)} layer dicts"
    for i, (g, w) in enumerate(zip(got, want)):
        if type(g) is not dict or set(g) != set(w):
            return False, f"layer {i}: got {describe(g)}, expected a dict with keys ['b', 'w']"
        for k in sorted(w):
            a, b = g[k], np.asarray(w[k])
            if not isinstance(a, np.ndarray) or a.shape != b.shape:
                return False, f"layer {i} {k}: got {describe(a)}, expected shape {b.shape}"
            if not np.all(np.isfinite(a)):
                return False, f"layer {i} {k}: NaN or inf"
            bad = ~np.isclose(a, b, rtol=rtol, atol=atol)
            if bad.any():
                return False, (f"layer {i} {k}: {int(bad.sum())} of {bad.size} values off, largest difference "
                               f"{float(np.max(np.abs(a.astype(np.float64) - b))):.3g}")
    return True, ""


def same_shapes(got, want) -> bool:
    """Whether ``got`` is a list of {"w", "b"} dicts with the shapes and float32 dtype of ``want``."""
    if type(got) not in (list, tuple) or len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if type(g) is not dict or set(g) != set(w):
            return False
        for k in w:
            if not isinstance(g[k], np.ndarray) or g[k].shape != np.shape(w[k]) or g[k].dtype != np.float32:
                return False
    return True


def expect_one_adam_state(out: dict, what: str) -> None:
    if out.get("adam_states") != 1:
        n = out.get("adam_states")
        raise CheckFailed(
            f"{what}: the optimizer state holds {n} Adam states (optax.ScaleByAdamState); expected exactly one",
            measured=f"state structure: {out.get('state_structure', '?')}",
            expected="the state of optax.chain(optax.clip_by_global_norm(clip), optax.adamw(lr, weight_decay=wd))",
            hint="make_optimizer's chain holds two transformations: optax.clip_by_global_norm, then optax.adamw",
            diagnosis=f"the optimizer state holds {n} optax.ScaleByAdamState; an AdamW chain holds exactly one",
            advice="make_optimizer's chain holds two transformations, optax.clip_by_global_norm and then "
                   "optax.adamw; build train_step's state with its init")


def changed_constants(constants: dict | None) -> list[str]:
    """The stub's hyperparameter constants the learner's module no longer holds."""
    if not constants:
        return []
    return [f"{n} = {constants.get(n)!r} (the stub says {v!r})" for n, v in zip(CONSTANT_NAMES, HYPER)
            if constants.get(n) != v]
