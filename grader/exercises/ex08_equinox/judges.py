"""Exercise 8 (Equinox: the model is a pytree): the trusted side's references, shared by the
public and the hidden checks.  NumPy only, in float64: the forward pass and the loss of
the exercise's MLP, its gradient by hand-written backprop, and optax's Adam step, all
computed from the weights the learner's own ``weights(model)`` returned.

The MLP: hidden layer ``l`` computes ``h = act(h @ W_l.T + b_l)`` with ``W_l`` of shape
``[out, in]`` (``eqx.nn.Linear``'s layout); the last layer is linear.  The loss is the mean
of ``(prediction - target) ** 2`` over every element of the batch.

Adam is optax's ``scale_by_adam`` followed by ``scale(-lr)``::

    m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g**2;   t += 1
    update = -lr * (m / (1 - b1**t)) / (sqrt(v / (1 - b2**t)) + eps)

``tests/test_ex08_reference.py`` checks all of it against JAX and optax themselves.
"""

from __future__ import annotations

import itertools

import numpy as np

from grader.compiles import OPAQUE_PRIMITIVES
from grader.feedback import (CheckFailed, describe, expect_jit_own, expect_traced_program_computes,
                             expect_traced_program_runs, traced_error)

LEARNING_RATE = 1e-2  # the stub's LEARNING_RATE; its OPTIMIZER is optax.adam with the defaults below
B1, B2, EPS = 0.9, 0.999, 1e-8
ACTIVATIONS = ("tanh", "relu")


# --- the learner's weights, read and validated ----------------------------------------------
def read_weights(value, sizes, what="weights(model)") -> list[tuple[np.ndarray, np.ndarray]]:
    """``[(W f64[out, in], b f64[out]), ...]`` from what ``weights`` returned, or a CheckFailed."""
    layers = len(sizes) - 1
    hint = ("one dict per eqx.nn.Linear, in layer order, holding its own `weight` (eqx.nn.Linear keeps it as "
            "[out, in]) under 'w' and its `bias` under 'b'")
    if not isinstance(value, (list, tuple)) or len(value) != layers:
        raise CheckFailed(f"{what} should return a list with one entry per layer", measured=describe(value),
                          expected=f"a list of {layers} dicts {{'w', 'b'}}", hint=hint,
                          diagnosis=f"{what} did not return one {{'w', 'b'}} dict per layer, in layer order",
                          advice=hint)
    out = []
    for i, (entry, fan_in, fan_out) in enumerate(zip(value, sizes[:-1], sizes[1:])):
        w = entry.get("w") if isinstance(entry, dict) else None
        b = entry.get("b") if isinstance(entry, dict) else None
        good = (isinstance(w, np.ndarray) and isinstance(b, np.ndarray) and w.shape == (fan_out, fan_in)
                and b.shape == (fan_out,) and str(w.dtype) == "float32" and str(b.dtype) == "float32")
        if not good:
            got = (f"w {describe(w)}, b {describe(b)}" if isinstance(entry, dict) else describe(entry))
            raise CheckFailed(f"entry {i} of {what} is not {{'w': f32[out, in], 'b': f32[out]}}", measured=got,
                              expected=f"w f32[{fan_out},{fan_in}], b f32[{fan_out}]", hint=hint,
                              diagnosis=f"an entry of {what} is not a dict holding w as f32[out, in] and b as "
                                        f"f32[out]", advice=hint)
        out.append((w.astype(np.float64), b.astype(np.float64)))
    return out


def act(name, z):
    return np.tanh(z) if name == "tanh" else np.maximum(z, 0.0)


def act_grad(name, z, h):
    """d act(z) / dz, given z and h = act(z)  (relu: 0 at 0, like jax.nn.relu)."""
    return 1.0 - h ** 2 if name == "tanh" else (z > 0).astype(np.float64)


def forward(layers, activation, xs) -> np.ndarray:
    h = np.asarray(xs, np.float64)
    for w, b in layers[:-1]:
        h = act(activation, h @ w.T + b)
    w, b = layers[-1]
    return h @ w.T + b


def loss(layers, activation, xs, ys) -> float:
    return float(np.mean((forward(layers, activation, xs) - np.asarray(ys, np.float64)) ** 2))


def grads(layers, activation, xs, ys) -> list[tuple[np.ndarray, np.ndarray]]:
    """The gradient of ``loss`` with respect to each (W, b), by backprop."""
    hs, zs = [np.asarray(xs, np.float64)], []
    for w, b in layers[:-1]:
        zs.append(hs[-1] @ w.T + b)
        hs.append(act(activation, zs[-1]))
    w, b = layers[-1]
    pred = hs[-1] @ w.T + b
    dz = 2.0 * (pred - np.asarray(ys, np.float64)) / pred.size
    out = []
    for i in range(len(layers) - 1, -1, -1):
        w, _ = layers[i]
        out.append((dz.T @ hs[i], dz.sum(axis=0)))
        if i:
            dh = dz @ w
            dz = dh * act_grad(activation, zs[i - 1], hs[i])
    return out[::-1]


# --- Adam ---------------------------------------------------------------------------------
def adam(g, state, lr=LEARNING_RATE):
    """One step of optax.adam on one array: (update, new_state); state = (m, v, t) or None."""
    m, v, t = state if state is not None else (np.zeros_like(g), np.zeros_like(g), 0)
    m = B1 * m + (1 - B1) * g
    v = B2 * v + (1 - B2) * g * g
    t += 1
    update = -lr * (m / (1 - B1 ** t)) / (np.sqrt(v / (1 - B2 ** t)) + EPS)
    return update, (m, v, t)


def step_mismatch(before, after, gs, states, lr=LEARNING_RATE):
    """Compare one learner step (weights ``before`` -> ``after``) with Adam driven by the
    gradients ``gs``; returns (description of the worst mismatch or "", new states).

    Entries whose gradient is tiny next to the rest of their array (a float32 gradient
    cannot say which way they go) are left out; everywhere else the step must agree within
    0.1 % of the learning rate (plus 0.1 % of the step)."""
    problems, new_states = [], []
    for i, ((wb, bb), (wa, ba), (gw, gb)) in enumerate(zip(before, after, gs)):
        for name, x0, x1, g, state in (("W", wb, wa, gw, states[2 * i] if states else None),
                                       ("b", bb, ba, gb, states[2 * i + 1] if states else None)):
            update, new = adam(g, state, lr)
            new_states.append(new)
            scale = max(float(np.max(np.abs(g))), 1e-30)
            sure = np.maximum(np.abs(g), np.abs(new[0])) > 1e-5 * scale
            off = np.abs((x1 - x0) - update) > lr * 1e-3 + 1e-3 * np.abs(update)
            bad = off & sure
            if bad.any():
                j = np.unravel_index(int(np.argmax(np.abs((x1 - x0) - update) * bad)), bad.shape)
                problems.append(f"layer {i} {name}{list(j)}: moved by {float((x1 - x0)[j]):.6g}, "
                                f"Adam moves it by {float(update[j]):.6g} ({int(bad.sum())} of {bad.size} entries off)")
    return "; ".join(problems[:3]), new_states


def as_float(value, what) -> float:
    """A Python float from a float or a 0-d float array, or a CheckFailed."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind == "f":
        return float(value)
    if type(value) in (float, int):
        return float(value)
    raise CheckFailed(f"{what} should be a scalar", measured=describe(value), expected="f32[]",
                      hint="return jnp.mean(...) of the squared errors",
                      diagnosis=f"{what} is not a scalar", advice="return a 0-d array such as jnp.mean(...)")


# --- dropout, read off the losses -------------------------------------------------------------
def dropout_masks(layers, activation: str, rate: float, x, y, losses, rtol: float = 2e-5) -> list:
    """For each loss of ``loss_fn`` in training mode on one example (``x`` f[d_in], ``y``
    f[d_out]) of a model with ONE hidden layer: the hidden units dropout kept and dropped.

    Dropout keeps each hidden unit with probability 1 - rate and scales the kept ones by
    1 / (1 - rate), so the loss is one of 2**H numbers, one per mask: the mask is found by
    trying them all.  Returns, per loss, ``None`` when no mask gives it (that is not
    dropout), else ``{unit: kept?}`` for the units every matching mask agrees on."""
    (w1, b1), (w2, b2) = layers
    h = act(activation, w1 @ np.asarray(x, np.float64) + b1)
    masks = np.array(list(itertools.product((0.0, 1.0), repeat=h.size)))
    candidates = np.mean(((masks * h / (1.0 - rate)) @ w2.T + b2 - np.asarray(y, np.float64)) ** 2, axis=1)
    out = []
    for loss in losses:
        match = masks[np.isclose(candidates, loss, rtol=rtol, atol=1e-9)]
        if not len(match):
            out.append(None)
            continue
        agreed = np.all(match == match[0], axis=0)
        out.append({int(u): bool(match[0][u]) for u in np.flatnonzero(agreed)})
    return out


def judge_dropout_masks(masks: list, rate: float, source: str = "loss_fn") -> None:
    """Every loss explained by a mask of kept units scaled by 1 / (1 - rate), and the share
    of units dropped equal to the rate within binomial bounds (4.5 standard deviations).
    ``source``: "loss_fn" (its losses with a key) or "train_step" (the losses it returns)."""
    advice = ("build the model's Dropout with the dropout rate (eqx.nn.Dropout(rate)), call it after each hidden "
              "layer's activation with a key in training mode, and split loss_fn's key into one key per example")
    if source == "train_step":
        advice = ("train in training mode: differentiate loss_fn(model, xs, ys, key) with the key train_step "
                  "receives, so dropout is on during the step (and " + advice[0].lower() + advice[1:] + ")")
    unexplained = sum(1 for m in masks if m is None)
    if unexplained:
        raise CheckFailed(
            f"{unexplained} of {len(masks)} training-mode losses"
            + (" that train_step returned" if source == "train_step" else "")
            + " are not those of any dropout mask",
            measured=f"{unexplained} losses match no choice of dropped units",
            expected="each loss: some hidden units zeroed, the others scaled by 1 / (1 - rate)",
            diagnosis=(f"in training mode, {source}'s losses are not those of the model with some hidden units "
                       "zeroed and the others scaled by 1 / (1 - rate): "
                       + ("the step does not train with dropout on (is the key passed on to loss_fn?), or "
                          if source == "train_step" else "")
                       + "the randomness is not dropout (noise that never zeroes a unit, or kept units not "
                         "rescaled)"),
            advice=advice)
    mask_chance = float(np.prod([1.0 - rate if kept else rate for kept in masks[0].values()])) if masks else 1.0
    judge_masks_change_with_key(masks, mask_chance, f"the dropout masks{' of train_step' * (source == 'train_step')}",
                                f"{source}'s dropout", advice)
    seen = [kept for m in masks for kept in m.values()]
    n = len(seen)
    dropped = sum(1 for kept in seen if not kept) / max(n, 1)
    bound = 4.5 * np.sqrt(rate * (1.0 - rate) / max(n, 1)) + 1.0 / max(n, 1)
    if n < 20 or abs(dropped - rate) > bound:
        raise CheckFailed(
            f"dropout dropped {dropped:.0%} of the hidden units it saw; the rate is {rate:.0%}",
            measured=f"{n} hidden units read over {len(masks)} keys, {dropped:.1%} of them zeroed",
            expected=f"{rate:.1%} +- {bound:.1%}",
            diagnosis="in training mode the share of hidden units dropout zeroes is not the dropout rate"
                      + (" (it never drops any)" if dropped == 0 else ""),
            advice=advice)


# --- dropout keys: one per hidden layer, one per example --------------------------------------
def _one_hidden_losses(layers, activation, rate, x, y) -> np.ndarray:
    """The loss of a one-hidden-layer model on one example under each of the 2**H masks."""
    (w1, b1), (w2, b2) = layers
    h = act(activation, w1 @ np.asarray(x, np.float64) + b1)
    masks = np.array(list(itertools.product((0.0, 1.0), repeat=h.size)))
    return np.mean(((masks * h / (1.0 - rate)) @ w2.T + b2 - np.asarray(y, np.float64)) ** 2, axis=1)


def _two_hidden_losses(layers, activation, rate, x, y) -> np.ndarray:
    """The loss of a two-hidden-layer model on one example under each pair of masks
    ``[first layer's mask, second layer's mask]`` (both layers of one width)."""
    (w1, b1), (w2, b2), (w3, b3) = layers
    h1 = act(activation, w1 @ np.asarray(x, np.float64) + b1)
    masks = np.array(list(itertools.product((0.0, 1.0), repeat=h1.size)))
    h2 = act(activation, (masks * h1 / (1.0 - rate)) @ w2.T + b2)                    # [m1, H]
    kept = masks[None, :, :] * h2[:, None, :] / (1.0 - rate)                         # [m1, m2, H]
    return np.mean((kept @ w3.T + b3 - np.asarray(y, np.float64)) ** 2, axis=-1)     # [m1, m2]


def mask_pairs(candidates: np.ndarray, losses, rtol: float = 2e-5) -> list:
    """For each loss: None when no pair of masks ``candidates[i, j]`` gives it, else whether
    every pair that gives it has ``i == j`` (the two masks are the same)."""
    same = np.eye(candidates.shape[0], dtype=bool)
    out = []
    for value in losses:
        match = np.isclose(candidates, value, rtol=rtol, atol=1e-9)
        out.append(None if not match.any() else bool(np.all(same[match])))
    return out


def pair_losses(layers, activation: str, rate: float, x, y, between: str) -> np.ndarray:
    """The candidate losses of two masks: ``between`` "layers" (a two-hidden-layer model on
    one example) or "examples" (a one-hidden-layer model on two copies of one example)."""
    if between == "layers":
        return _two_hidden_losses(layers, activation, rate, x, y)
    one = _one_hidden_losses(layers, activation, rate, x, y)
    return (one[:, None] + one[None, :]) / 2.0


def mask_pair_ids(candidates: np.ndarray, losses, between: str, rtol: float = 2e-5) -> list:
    """For each loss: the pairs of masks ``(i, j)`` that give it (unordered for "examples",
    whose candidates are symmetric), as one hashable value, or None when none does."""
    out = []
    for value in losses:
        match = np.argwhere(np.isclose(candidates, value, rtol=rtol, atol=1e-9))
        pairs = {tuple(sorted(map(int, ij))) if between == "examples" else tuple(map(int, ij)) for ij in match}
        out.append(frozenset(pairs) if pairs else None)
    return out


#: A set of pairs of masks more likely than this under independent draws is left out of the count
#: of repeats: its repeats follow a binomial far wider than the Poisson law the count is judged
#: by (a second layer whose units are all dropped makes every first mask give one loss, and ten
#: keys of 32 naming that set is rare, not impossible), and masks made from one another show in
#: the many light sets anyway.
LIGHT = 0.02


def _mask_chances(candidates: np.ndarray, rate: float) -> np.ndarray:
    """The chance of each pair of masks ``(i, j)`` of ``candidates`` (masks enumerated as
    ``itertools.product((0, 1), repeat=width)``: bit set = unit kept), each unit kept with
    probability ``1 - rate`` independently."""
    masks = candidates.shape[0]
    width = int(masks).bit_length() - 1
    kept = np.array([bin(i).count("1") for i in range(masks)], dtype=np.float64)
    one = (1.0 - rate) ** kept * rate ** (width - kept)
    return np.outer(one, one)


def match_chance(candidates: np.ndarray, rate: float, rtol: float = 2e-5, light: float = LIGHT,
                 chances: np.ndarray | None = None) -> float:
    """The chance that two keys drawing their masks independently give losses that name the same
    light set of pairs of masks (``mask_pair_ids``; a set no likelier than ``light``): the sum,
    over every pair of masks in a light set, of its chance times the chance of the pairs whose
    losses agree with its own within the tolerance.  With distinct losses this is ``sum
    P(pair)**2``; where the losses cannot tell several pairs apart, those pairs count as one,
    as ``mask_pair_ids`` does."""
    chances = _mask_chances(candidates, rate) if chances is None else chances
    values, chances = candidates.ravel(), chances.ravel()
    order = np.argsort(values, kind="stable")
    values, chances = values[order], chances[order]
    total = np.concatenate([[0.0], np.cumsum(chances)])
    reach = 1e-9 + rtol * np.abs(values)
    lo, hi = np.searchsorted(values, values - reach, side="left"), np.searchsorted(values, values + reach, side="right")
    window = total[hi] - total[lo]
    return float(np.sum(np.where(window <= light, chances * window, 0.0)))


def id_chance(pair_id, chances: np.ndarray, between: str) -> float:
    """The chance, under independent draws, of the set of pairs one loss names (``chances``:
    ``_mask_chances``; for "examples", whose ids hold unordered pairs, a pair stands for both
    orders)."""
    both = between == "examples"
    return float(sum(chances[i, j] + (chances[j, i] if both and i != j else 0.0) for i, j in pair_id))


def judge_static_activation(view: dict) -> None:
    """The activation sits in a field declared static (``eqx.field(static=True)``), as the
    statement asks: a value that is merely not a leaf (a dict ``{name: None}``, a tuple of
    no arrays) also reaches the treedef, but through a pytree node, not a static field."""
    missing = [activation for activation in ("tanh", "relu") if not view[activation].get("static_fields")]
    if missing:
        raise CheckFailed(
            "no static field of the model holds the activation",
            measured=f"models built with {', '.join(repr(a) for a in missing)}: no field declared "
                     "eqx.field(static=True) holds that name",
            expected="a field declared eqx.field(static=True) whose value is the activation's name",
            diagnosis="the activation reaches the treedef some other way (inside a container with no leaves), "
                      "not as a static field",
            advice="declare `activation: str = eqx.field(static=True)` and store the name ('tanh' or 'relu') in it")


#: One mask (or pair of masks) under every key is accused only where independent draws give it
#: less often than this.
SAME_UNDER_EVERY_KEY = 1e-6


def judge_masks_change_with_key(masks: list, chance: float, what: str, whose: str, advice: str) -> None:
    """Fails when every key gave the same mask (``masks``: one entry per key, comparable with
    ``==``) and independent draws would do that less than once in a million times: ``chance``
    is the chance of that mask under one key, so all n agree with chance ``chance ** (n - 1)``.
    A fixed key, NumPy's generator or a pattern gives one mask; under jit, a mask made outside
    JAX is fixed once the step compiles."""
    n = len(masks)
    if n < 2 or any(m != masks[0] for m in masks) or chance ** (n - 1) >= SAME_UNDER_EVERY_KEY:
        return
    raise CheckFailed(
        f"{what} do not change with the key: all {n} keys gave the same",
        measured=f"one mask under {n} keys; independent draws agree that often with chance {chance ** (n - 1):.1e}",
        expected="a mask drawn from each key",
        diagnosis=f"in training mode {whose} does not draw from the key it is given (a fixed key, NumPy's generator, "
                  "or a pattern): under jit a mask made outside JAX is fixed when the step compiles, the same on "
                  "every step",
        advice=advice)


def poisson_tail(mean: float, k: int) -> float:
    """P(X >= k) for X ~ Poisson(mean), in log space (no overflow however large k is)."""
    import math

    if k <= 0:
        return 1.0
    if mean <= 0.0:
        return 0.0
    below = sum(math.exp(-mean + i * math.log(mean) - math.lgamma(i + 1)) for i in range(k))
    return max(0.0, 1.0 - below)


def judge_masks_independent(ids: list, rate: float, width: int, between: str,
                            candidates: np.ndarray | None = None) -> None:
    """Two masks drawn from keys of their own are independent, so two keys give the same PAIR
    of masks only as often as chance says (about C(n, 2) * q**2, q the chance that two draws of
    one mask agree); when one mask is made from the other (the same draw rotated, flipped,
    shuffled) the pair repeats whenever the first mask does, C(n, 2) * q times.  Fails when so
    many keys repeat a pair that chance gives it less than once in a million.  ``candidates``
    (the losses of every pair of masks): the chance is then ``match_chance``, which counts
    pairs whose losses cannot be told apart as one -- honest keys naming one such set of
    pairs were counted as repeats against the smaller q**2, and accused."""
    seen = [i for i in ids if i is not None]
    n = len(seen)
    chances = _mask_chances(candidates, rate) if candidates is not None else None  # once: 4**width pairs
    # every key naming one set, however likely that set: judged before heavy sets are left out
    one_set = id_chance(seen[0], chances, between) if seen and chances is not None else \
        max(rate, 1.0 - rate) ** (2 * width)  # without the candidates: the likeliest pair of masks
    judge_masks_change_with_key(seen, one_set, {"layers": "the two hidden layers' dropout masks",
                                                 "examples": "the two examples' dropout masks"}[between], "loss_fn's dropout",
                                "split the key passed to loss_fn (one per example, then one per hidden layer) and "
                                "hand each Dropout its own")
    if chances is not None:  # heavy sets left out (LIGHT), on both sides of the comparison
        seen = [i for i in seen if id_chance(i, chances, between) <= LIGHT]
        chance = match_chance(candidates, rate, chances=chances)
    else:
        q = ((1.0 - rate) ** 2 + rate ** 2) ** width
        chance = q * q * (2.0 if between == "examples" else 1.0)
    collisions = sum(1 for a in range(len(seen)) for b in range(a + 1, len(seen)) if seen[a] == seen[b])
    expected = n * (n - 1) / 2 * chance
    tail = poisson_tail(expected, collisions)
    if collisions >= 3 and tail < 1e-6:
        what = {"layers": ("the two hidden layers' masks", "hidden layer",
                           "split the key into one key per hidden layer and give each layer's dropout its own"),
                "examples": ("the two examples' masks", "example",
                             "split loss_fn's key into one key per example (jax.random.split(key, len(xs))) and "
                             "vmap over the keys with the examples")}[between]
        raise CheckFailed(
            f"{what[0]} are not drawn independently: the same pair of masks comes back under {collisions} pairs of "
            f"keys", measured=f"{collisions} pairs of keys gave the same pair of masks; about {expected:.1f} expected",
            expected="masks drawn from keys of their own: pairs that repeat only by chance",
            diagnosis=f"in training mode one {what[1]}'s dropout mask is made from another's (the same draw, "
                      f"moved about): whenever the first mask repeats, so does the second",
            advice=what[2])


def judge_masks_differ(pairs: list, rate: float, width: int, between: str) -> None:
    """Two hidden layers (or two examples) given keys of their own draw their masks
    independently, so both are the same mask only as often as chance says:
    ((1 - rate)**2 + rate**2) ** width, within 4.5 standard deviations."""
    what = {"layers": ("each hidden layer's dropout", "the two hidden layers", "hidden layer",
                       "split the key into one key per hidden layer and give each layer's dropout its own"),
            "examples": ("each example's dropout", "the two examples of the batch", "example",
                         "split loss_fn's key into one key per example (jax.random.split(key, len(xs))) and vmap "
                         "over the keys with the examples")}[between]
    unexplained = sum(1 for p in pairs if p is None)
    if unexplained:
        raise CheckFailed(
            f"{unexplained} of {len(pairs)} training-mode losses are not those of any dropout masks of "
            f"{what[1]}", measured=f"{unexplained} losses match no choice of dropped units",
            expected="each loss: in every hidden layer of every example, some units zeroed and the others scaled by "
                     "1 / (1 - rate)",
            diagnosis=f"in training mode, the losses on {what[1]} are not those of dropout masks (units zeroed, the "
                      f"rest scaled by 1 / (1 - rate))",
            advice="call the Dropout after each hidden layer's activation, and never on the output layer")
    n = len(pairs)
    same = sum(pairs) / n
    chance = ((1.0 - rate) ** 2 + rate ** 2) ** width
    bound = chance + 4.5 * np.sqrt(chance * (1.0 - chance) / n) + 1.0 / n
    if same > bound:
        raise CheckFailed(
            f"{what[0]} does not get a key of its own: {what[1]} dropped the same units under {same:.0%} of "
            f"the keys", measured=f"the same mask in {round(same * n)} of {n} keys",
            expected=f"independent masks: the same one in about {chance:.0%} of keys (at most {bound:.0%})",
            diagnosis=f"in training mode {what[1]} draw their dropout masks from one key: every {what[2]} drops "
                      f"the same units",
            advice=what[3])


def shared_key_layers(layers) -> list[tuple[int, int]]:
    """Pairs of layers whose weights were drawn from the same key: JAX's random bits depend
    on the key and the element's flat index, not the shape, so layers built from one key
    (by eqx.nn.Linear or any one recipe) start with proportional values -- and, however the
    values were moved about afterwards (rolled, transposed, reshuffled), the smaller layer's
    values, scaled to a common bound, are among the larger one's (``_same_draws``)."""
    out = []
    for i in range(len(layers)):
        for j in range(i + 1, len(layers)):
            n = min(layers[i][0].size, layers[j][0].size)
            a, b = layers[i][0].ravel()[:n], layers[j][0].ravel()[:n]
            na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
            if n >= 4 and ((na > 0 and nb > 0 and abs(float(a @ b)) / (na * nb) > 1.0 - 1e-6)
                           or _same_draws(np.asarray(layers[i][0]), np.asarray(layers[j][0]))):
                out.append((i, j))
    return out


def _same_draws(w1: np.ndarray, w2: np.ndarray) -> bool:
    """Whether most of the smaller weight's values, divided by eqx.nn.Linear's bound
    1/sqrt(fan-in) (either dimension taken as the fan-in), are also among the larger one's:
    independent float32 draws coincide to 1e-6 almost never, draws from one key nearly always,
    whatever order their elements were put in afterwards."""
    small, large = sorted((w1, w2), key=lambda w: w.size)
    if small.size < 4 or small.ndim != 2 or large.ndim != 2:
        return False
    for fan_small in set(small.shape):
        a = np.sort(np.abs(small.ravel().astype(np.float64)) * np.sqrt(fan_small))
        for fan_large in set(large.shape):
            b = np.sort(np.abs(large.ravel().astype(np.float64)) * np.sqrt(fan_large))
            at = np.clip(np.searchsorted(b, a), 1, b.size - 1)
            near = np.minimum(np.abs(b[at] - a), np.abs(b[at - 1] - a))
            if np.mean(near <= 1e-6 * np.maximum(a, 1e-12)) >= 0.5:
                return True
    return False


def judge_layer_keys(layers, what: str) -> None:
    shared = shared_key_layers(layers)
    if shared:
        i, j = shared[0]
        raise CheckFailed(
            f"layers {i} and {j} were built from the same key",
            measured=f"{what}: the first weights of layers {i} and {j} are proportional (the same random draws)",
            expected="each eqx.nn.Linear built from its own split key",
            hint="keys = jax.random.split(key, len(sizes) - 1): one key per layer",
            diagnosis="two eqx.nn.Linear layers were built from one key: their weights are the same random draws",
            advice="split the constructor's key into one key per eqx.nn.Linear")


# --- compute_grads ---------------------------------------------------------------------------
def judge_grads(view: dict, sizes, activation: str, xs, ys) -> None:
    """``compute_grads``' pytree (``grads_view``): the model's structure, arrays only, and the
    true gradient of the mean squared error read through the learner's own ``weights``."""
    advice = ("return eqx.filter_grad(loss_fn)(model, xs, ys): the gradient of a Module is a Module of the same "
              "kind, with gradients where the model has arrays and None elsewhere")
    if view["grads_treedef"] != view["model_treedef"]:
        raise CheckFailed(
            "the gradient pytree does not have the model's structure",
            measured=f"gradient: {view['grads_type']} {view['grads_treedef'][:600]}",
            expected=f"the model's arrays-only structure: {view['model_treedef'][:600]}",
            diagnosis="compute_grads returned a pytree whose structure is not the model's (with None wherever "
                      "the model holds something other than an array)",
            advice=advice)
    kinds = sorted({leaf["kind"] for leaf in view["grads_leaves"]} - {"array"})
    if kinds or "grad_weights_error" in view:
        raise CheckFailed("the gradient pytree holds something other than arrays, or `weights` cannot read it",
                          measured=str(kinds or view.get("grad_weights_error")),
                          expected="arrays only, readable by your weights()",
                          diagnosis="the gradient pytree has the model's structure, but its leaves are not all "
                                    "arrays or your `weights` function cannot read it",
                          advice=advice)
    layers = read_weights(view["model_weights"], sizes)
    got = read_weights(view["grad_weights"], sizes, what="weights(compute_grads(model, xs, ys))")
    for (gw, gb), (rw, rb) in zip(got, grads(layers, activation, xs, ys)):
        for g, r in ((gw, rw), (gb, rb)):
            if not np.allclose(g, r, rtol=2e-4, atol=1e-6):
                raise CheckFailed(
                    "the gradient's values are not d loss / d parameters",
                    measured=f"largest difference {float(np.max(np.abs(g - r))):.3g}",
                    expected=f"backprop of the mean squared error ({activation}, sizes {sizes})",
                    diagnosis="compute_grads has the model's structure, but its values are not the gradient of "
                              "the mean squared error with respect to each weight and bias",
                    advice="differentiate loss_fn itself (the mean over every element of the squared error), "
                           "with respect to the model")


# --- the step's work is in the compiled program -------------------------------------------------
def judge_step_program(prepared: dict, first_loss) -> None:
    """``train_step``'s traced program holds its work: the layers' matmuls (forward and
    backward) and no host callback.  A step computed in NumPy behind one trivial jitted call
    compiles once too, so the compile count alone cannot see it.

    ``prepared``: a ``prepare_training`` answer, ``train_step`` traced once under the grader's
    jit; ``first_loss``: the loss the measured calls' first step returned.  The compile count
    needs the learner's own calls, so the two are tied: ``train_step`` must be exactly what
    ``eqx.filter_jit`` (or ``jax.jit``) returns (every call then traces its body, which cannot
    tell the grader's trace from the calls by ``isinstance(x, jax.core.Tracer)``), and the
    traced program's loss must be the first call's."""
    __tracebackhide__ = True
    expect_jit_own(bool(prepared.get("jitted")), "train_step", why="the program its calls compile",
                   decorator="@eqx.filter_jit", jit="eqx.filter_jit")
    expect_traced_program_runs(traced_error(prepared), "train_step", how=" (its arrays traced, on the first batch)")
    loss = prepared["outputs"]["loss"]
    scalar = isinstance(loss, np.ndarray) and loss.shape == ()
    ok = scalar and first_loss is not None and np.isclose(float(loss), float(first_loss), rtol=1e-4, atol=1e-6)
    expect_traced_program_computes(
        ok, "train_step", "compute the loss its first call returned", how=" (its arrays traced, on the first batch)",
        measured=f"traced program's loss {float(loss) if scalar else describe(loss)}, the first call's {first_loss}",
        expected="the same loss (rtol 1e-4)")
    primitives = prepared["step_primitives"]
    opaque = sorted(set(primitives) & OPAQUE_PRIMITIVES)
    if opaque or not primitives.get("dot_general"):
        raise CheckFailed(
            "train_step's traced program does not hold the step's work",
            measured=(f"host callbacks in it: {', '.join(opaque)}" if opaque else
                      f"no dot_general among its {sum(primitives.values())} equations"),
            expected="the forward pass, its gradient and the Adam update, traced by eqx.filter_jit (dot_general for "
                     "every layer, no callback)",
            hint="write the step with eqx.filter_value_and_grad(loss_fn) and OPTIMIZER.update inside the "
                 "filter_jit-ed train_step",
            diagnosis=("train_step hands its work to the host through a callback" if opaque else
                       "train_step's traced program holds no matrix multiply: the model's work is not in it"),
            advice="compute the loss and gradient with eqx.filter_value_and_grad(loss_fn) inside train_step, and "
                   "the update with OPTIMIZER.update and eqx.apply_updates, so XLA compiles the whole step")
