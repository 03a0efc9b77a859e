"""Exercise 15 (PRNG discipline): draws and verdicts shared by the public and the hidden checks.

NumPy only.  What JAX draws from a key is never computed here: it comes from the clean worker
(``probes.truth_*``), on the installed JAX, at every grading.  Keys are plain data,
``{"data": uint32[2], "kind": "typed" | "legacy"}`` (``probes.make_key`` rebuilds them).

Key reuse is judged twice, independently: by JAX's key-reuse checker (the analysis
``jax.debug_key_reuse(True)`` runs) in the learner's process (``probes.key_reuse``), and here by value, which nothing in the learner's process can switch
off.  With threefry (JAX's default, ``jax_threefry_partitionable``), two draws from one key share
a prefix: ``normal(k, (m, n)).ravel()`` starts with ``normal(k, (p, q)).ravel()`` when
``p * q <= m * n``; and the same key with the same shape draws the same mask.

Feedback for a hidden check names the *kind* of input that went wrong (a typed or a legacy key,
the same key twice, ``training=False``, a rate above one half), never a drawn value: those go to
``measured`` and ``expected``, which only the instructor reads.
"""

from __future__ import annotations

import numpy as np

from grader.feedback import (CheckFailed, describe, expect_traced_program_computes, expect_traced_program_runs,
                             traced_error)

SIGMAS = 6.0  # statistical bounds: a right answer falls outside one about once in 10**9
PREFIX = 16  # elements compared to decide that two draws came from one key

KIND_WORDS = {"typed": "a typed key (jax.random.key)", "legacy": "a legacy key (jax.random.PRNGKey)"}


def draw_key(rng, kind: str) -> dict:
    return {"data": rng.integers(0, 2 ** 32, size=2, dtype=np.uint64).astype(np.uint32), "kind": kind}


def legacy_twin(key: dict) -> dict:
    """The same key data as a legacy ``uint32[2]`` key: it must draw exactly what the typed key does."""
    return {"data": key["data"], "kind": "legacy"}


def _fail(message: str, diagnosis: str, advice: str, measured: str = "", expected: str = "") -> CheckFailed:
    return CheckFailed(message, measured=measured or diagnosis, expected=expected, hint=advice,
                       diagnosis=diagnosis, advice=advice)


def _error_failure(what: str, kind: str, error: str) -> CheckFailed:
    advice = ("accept both kinds of key: jax.random.key gives a typed key<fry>[], jax.random.PRNGKey a uint32[2] "
              "array; jax.random.split, fold_in, normal and bernoulli take either, while np.asarray(key) or "
              "arithmetic on the key works only on the legacy kind")
    return _fail(f"{what} raised with {KIND_WORDS.get(kind, kind)}: {error}",
                 f"{what} raised an error with {KIND_WORDS.get(kind, kind)}", advice, measured=error)


def as_array(value, dtype: str | None = None):
    return value if isinstance(value, np.ndarray) and (dtype is None or str(value.dtype) == dtype) else None


# --- part A: init_mlp -------------------------------------------------------------------------------

def draw_sizes(rng) -> list[int]:
    """Three or four widths that alternate one small (24-30) and one large (60-64) width: every
    layer's fan-in is at least twice its fan-out or at most half of it, so a scale by the wrong
    one shows; two layer shapes at most, so the sandbox compiles two draws."""
    small, large = int(rng.integers(24, 31)), int(rng.integers(60, 65))
    first, second = (small, large) if rng.integers(0, 2) else (large, small)
    return [first, second, first, second][: int(rng.integers(3, 5))]


def size_labels(sizes) -> set[str]:
    labels = {f"{len(sizes) - 1}_layers"}
    if all(max(m, n) >= 2 * min(m, n) for m, n in zip(sizes[:-1], sizes[1:])):
        labels.add("fan_in_differs")
    return labels


def init_calls(rng) -> tuple[list[dict], list[str]]:
    """A typed key, its legacy twin, the typed key again, another key: (keys, labels)."""
    first, other = draw_key(rng, "typed"), draw_key(rng, str(rng.choice(["typed", "legacy"])))
    return [first, legacy_twin(first), dict(first), other], ["typed_key", "legacy_key", "repeated_key", "other_key"]


def standard_draws(layer: dict) -> np.ndarray:
    """``w * sqrt(fan_in)``: what ``jax.random.normal`` gave for this layer, if it was scaled right."""
    w = np.asarray(layer["w"], np.float64)
    return w * np.sqrt(w.shape[0])


def _layers(out, sizes, what: str, kind: str) -> list[dict]:
    shapes = [(m, n) for m, n in zip(sizes[:-1], sizes[1:])]
    if type(out) is not list or len(out) != len(shapes):
        raise _fail(f"{what} returned {describe(out)}; expected a list of {len(shapes)} layers",
                    f"{what} did not return a list with one layer per pair of consecutive sizes",
                    "return [{'w': ..., 'b': ...} for each (m, n) in zip(sizes[:-1], sizes[1:])]",
                    measured=describe(out), expected=f"list of {len(shapes)}")
    for i, ((m, n), layer) in enumerate(zip(shapes, out)):
        if type(layer) is not dict or set(layer) != {"w", "b"}:
            raise _fail(f"layer {i} is {describe(layer)}; expected a dict with keys 'w' and 'b'",
                        "a layer is not a dict with exactly the keys 'w' and 'b'",
                        "each layer is {'w': f32[m, n], 'b': f32[n]}", measured=describe(layer))
        w, b = as_array(layer["w"], "float32"), as_array(layer["b"], "float32")
        if w is None or w.shape != (m, n) or b is None or b.shape != (n,):
            raise _fail(f"layer {i} has w {describe(layer['w'])} and b {describe(layer['b'])}; expected "
                        f"f32[{m},{n}] and f32[{n}]", "a layer's w or b has the wrong shape or dtype",
                        "layer i maps sizes[i] inputs to sizes[i + 1] outputs: w is f32[sizes[i], sizes[i + 1]], "
                        "b is f32[sizes[i + 1]]", measured=f"{describe(layer['w'])}, {describe(layer['b'])}",
                        expected=f"f32[{m},{n}], f32[{n}]")
        if np.any(b != 0):
            raise _fail(f"layer {i}'s b is not all zeros", "a layer's b is not zero",
                        "b starts at jnp.zeros(n): no randomness, no key")
    return out


def judge_init_scale(layers: list[dict], kind: str) -> None:
    """Each layer's ``w * sqrt(fan_in)`` must look like standard normal draws (6-sigma bounds on
    the mean and the standard deviation)."""
    for i, layer in enumerate(layers):
        z = standard_draws(layer).ravel()
        n = z.size
        mean, std = float(z.mean()), float(z.std())
        if abs(mean) > SIGMAS / np.sqrt(n) or abs(std - 1.0) > SIGMAS / np.sqrt(2 * n):
            m_in, n_out = np.shape(layer["w"])
            guess = ("w is not scaled at all" if abs(std - np.sqrt(m_in)) < 0.2 * np.sqrt(m_in) else
                     "w is scaled by the fan-out (its number of columns) instead of the fan-in"
                     if abs(std - np.sqrt(m_in / n_out)) < SIGMAS / np.sqrt(2 * n) else
                     "w * sqrt(fan_in) is not a standard normal draw (mean 0, standard deviation 1)")
            advice = ("w = jax.random.normal(layer_key, (m, n)) / jnp.sqrt(m), with m = sizes[i] the layer's fan-in "
                      "(its number of rows); not uniform, not sqrt(2 / m), not the fan-out")
            raise _fail(f"layer {i}: w * sqrt(fan_in) has mean {mean:.3f} and standard deviation {std:.3f}",
                        f"the weights have the wrong distribution: {guess}", advice,
                        measured=f"layer {i}: mean {mean:.4f}, std {std:.4f} over {n} values",
                        expected=f"mean 0 +- {SIGMAS / np.sqrt(n):.3f}, std 1 +- {SIGMAS / np.sqrt(2 * n):.3f}")


def judge_init_values(got: list[dict], keys: list[dict], labels: list[str], sizes) -> list[list[dict]]:
    """Every call's layers are well formed and well scaled; the same key data (typed, legacy, or
    again) gives bit-identical layers, and another key other layers.  Returns the layers."""
    results = []
    for res, key in zip(got, keys):
        if "error" in res:
            raise _error_failure("init_mlp(key, sizes)", key["kind"], res["error"])
        layers = _layers(res["out"], sizes, "init_mlp(key, sizes)", key["kind"])
        judge_init_scale(layers, key["kind"])
        results.append(layers)
    base = results[labels.index("typed_key")]
    for label, layers in zip(labels, results):
        same = all(np.array_equal(a["w"], b["w"]) for a, b in zip(base, layers))
        if label in ("legacy_key", "repeated_key") and not same:
            why = ("the same key data as a legacy key gave other weights than as a typed key"
                   if label == "legacy_key" else "the same key gave other weights on a second call")
            advice = ("init_mlp must be a function of its key alone: derive every layer's key from `key` with "
                      "jax.random.split (no np.random, no global key or counter), and use the key as JAX gives "
                      "it (typed and legacy keys with the same data draw the same numbers)")
            raise _fail(f"init_mlp: {why}", why, advice)
        if label == "other_key" and any(np.array_equal(a["w"], b["w"]) for a, b in zip(base, layers)):
            why = "another key gave the same weights for some layer"
            raise _fail(f"init_mlp: {why}", why, "draw every layer from a key derived from the `key` argument; "
                                                 "never from a key made inside the function (PRNGKey(0))")
    return results


def _shares_prefix(a: np.ndarray, b: np.ndarray) -> bool:
    """Two draws from one key: their first elements agree, in row-major or column-major order."""
    for x in (a, a.T):
        x = x.ravel()
        for y in (b, b.T) if b.ndim == 2 else (b,):
            y = y.ravel()
            k = min(PREFIX, x.size, y.size)
            if np.allclose(x[:k], y[:k], rtol=1e-4, atol=1e-5):
                return True
    return False


def judge_init_independent(layers: list[dict], root_draw: np.ndarray, reuse: dict) -> None:
    """No two layers drew from one key, no layer drew from ``key`` itself, and
    JAX's key-reuse checker saw no key used twice."""
    z = [standard_draws(layer) for layer in layers]
    for i in range(len(z)):
        for j in range(i + 1, len(z)):
            if _shares_prefix(z[i], z[j]):
                raise _fail(f"layers {i} and {j} drew their weights from the same key",
                            "two layers drew their weights from the same key (their weights share a prefix of the "
                            "same random stream)",
                            "split the key into one key per layer: keys = jax.random.split(key, n_layers), and "
                            "draw layer i from keys[i] only", measured=f"layers {i} and {j} share a prefix")
        if _shares_prefix(z[i], np.asarray(root_draw, np.float64)):
            raise _fail(f"layer {i} drew its weights from `key` itself",
                        "a layer drew its weights from the key init_mlp was given, which also served to make "
                        "other keys: a key is used once, either to draw or to split",
                        "split `key` first and draw every layer from one of the keys split gives; never draw from "
                        "a key you split", measured=f"layer {i} equals normal(key, ...)")
    if "reuse" in reuse:
        raise _fail(f"JAX's key-reuse checker raised: {reuse['reuse']}",
                    "JAX's key-reuse checker (jax.debug_key_reuse) raised KeyReuseError on init_mlp: a key was used twice "
                    "(drawn from and split, or drawn from twice)",
                    "every key is consumed by exactly one use: a draw or a split. Split first, then draw each layer "
                    "from its own key; run your code under jax.debug_key_reuse(True) with jax.random.key(0) to see "
                    "where", measured=reuse["reuse"])


# --- part B: dropout --------------------------------------------------------------------------------

RATES = (0.125, 0.1875, 0.25, 0.75, 0.8125, 0.875)  # exact in float32, far from one half


def rate_label(rate: float) -> str:
    return "low_rate" if rate < 0.5 else "high_rate"


def draw_dropout_cases(rng, shape: tuple[int, int] | None = None) -> tuple[list[dict], list[str]]:
    """A typed key with a low rate, a legacy key with a high rate, the first case again (same key),
    and training=False; shuffled after the first; one shape for all (``shape``: the epoch's mask
    shape, so the sandbox compiles one ``bernoulli`` for both).  Inputs are positive, so a
    dropped unit is the only zero."""
    drawn = (int(rng.integers(8, 13)), int(rng.integers(16, 25)))  # drawn always: the same stream either way
    shape = tuple(shape or drawn)

    def x():
        return (np.abs(rng.normal(size=shape)) + 0.5).astype(np.float32)

    low, high = float(rng.choice(RATES[:3])), float(rng.choice(RATES[3:]))
    first = {"key": draw_key(rng, "typed"), "x": x(), "rate": low, "training": True}
    cases = [first, {"key": draw_key(rng, "legacy"), "x": x(), "rate": high, "training": True},
             {**first, "key": dict(first["key"])},
             {"key": draw_key(rng, "typed"), "x": x(), "rate": float(rng.choice(RATES)), "training": False}]
    labels = ["typed_key", "legacy_key", "repeated_key", "training_false"]
    order = [0] + [1 + int(i) for i in rng.permutation(3)]
    return [cases[i] for i in order], [labels[i] for i in order]


def dropout_labels(cases, labels) -> set[str]:
    return set(labels) | {rate_label(c["rate"]) for c in cases if c["training"]}


def judge_dropout(got: list[dict], want: list[np.ndarray], cases: list[dict], labels: list[str]) -> None:
    for res, ref, case, label in zip(got, want, cases, labels):
        kind = case["key"]["kind"]
        if "error" in res:
            raise _error_failure("dropout(key, x, rate, training)", kind, res["error"])
        out = as_array(res["out"])
        if out is None or out.shape != ref.shape:
            raise _fail(f"dropout returned {describe(res['out'])}; expected f32{list(ref.shape)}",
                        "dropout returned something other than an array of x's shape",
                        "return an array of x's shape", measured=describe(res["out"]))
        out64 = out.astype(np.float64)
        if np.array_equal(out64 == 0, ref == 0) and np.allclose(out64, ref, rtol=1e-6, atol=0):
            continue
        x, rate = np.asarray(case["x"], np.float64), case["rate"]
        if not case["training"]:
            diagnosis = "with training=False, dropout did not return x unchanged"
            advice = ("at evaluation nothing is dropped and nothing is scaled: return x itself. Inverted dropout "
                      "already scaled the kept units by 1 / (1 - rate) during training")
        else:
            dropped = float(np.mean(out64 == 0))
            bound = SIGMAS * np.sqrt(rate * (1 - rate) / out.size)
            kept = out64 != 0
            scale = float(np.median(out64[kept] / x[kept])) if kept.any() else 0.0
            if abs(dropped - rate) > bound:
                flipped = abs(dropped - (1 - rate)) <= bound
                diagnosis = (f"dropout drops a fraction of units far from the rate ({rate_label(rate).replace('_', ' ')}"
                             f" case)" + (": it keeps with probability rate and drops with 1 - rate" if flipped else ""))
                advice = ("rate is the probability to DROP a unit: keep = jax.random.bernoulli(key, 1 - rate, x.shape) "
                          "is True with probability 1 - rate")
            elif not np.isclose(scale, 1.0 / (1.0 - rate), rtol=1e-5):
                diagnosis = ("the kept units are not scaled by 1 / (1 - rate)" +
                             (": they are not scaled at all" if np.isclose(scale, 1.0, rtol=1e-5) else ""))
                advice = ("inverted dropout divides the kept units by 1 - rate, so the output's mean is x's mean: "
                          "jnp.where(keep, x / (1 - rate), 0.0)")
            elif label == "repeated_key":
                diagnosis = "the same key gave another mask on a second call"
                advice = ("dropout must be a function of its arguments alone: no np.random, no global key or "
                          "counter; the same key must give the same mask")
            else:
                diagnosis = (f"the dropped units are not those jax.random.bernoulli(key, 1 - rate, x.shape) drops "
                             f"(with {KIND_WORDS[kind]})")
                advice = ("draw the mask once, from the key you were given, exactly as "
                          "jax.random.bernoulli(key, 1 - rate, x.shape): not uniform(...) >= rate, not from a key "
                          "split off first, not ~bernoulli(key, rate)")
        raise _fail(f"dropout differs from the reference: {diagnosis}", diagnosis, advice,
                    measured=f"{int(np.sum(~np.isclose(out64, ref, rtol=1e-6, atol=0)))} of {out.size} values differ",
                    expected="where(bernoulli(key, 1 - rate, x.shape), x / (1 - rate), 0); x when not training")


# --- part C: train_epoch ----------------------------------------------------------------------------

EPOCH_RATES = (0.125, 0.25, 0.75, 0.875)


def draw_epoch(rng, kind: str | None = None) -> dict:
    """A two-layer MLP, 3 to 5 batches of one shape, a rate far from one half, a learning rate
    and a key."""
    d, h, o = int(rng.integers(4, 9)), int(rng.integers(16, 25)), int(rng.integers(1, 4))
    params = [{"w": (rng.normal(size=(d, h)) / np.sqrt(d)).astype(np.float32), "b": np.zeros(h, np.float32)},
              {"w": (rng.normal(size=(h, o)) / np.sqrt(h)).astype(np.float32), "b": np.zeros(o, np.float32)}]
    b = int(rng.integers(8, 13))
    batches = [(rng.normal(size=(b, d)).astype(np.float32), rng.normal(size=(b, o)).astype(np.float32))
               for _ in range(int(rng.integers(3, 6)))]
    return {"params": params, "batches": batches, "rate": float(rng.choice(EPOCH_RATES)),
            "lr": float(rng.uniform(0.05, 0.2)), "key": draw_key(rng, kind or "typed")}


def mask_shape(case: dict) -> tuple[int, int]:
    """(batch size, hidden width): the shape of each of the epoch's masks."""
    return case["batches"][0][0].shape[0], case["params"][0]["w"].shape[1]


def epoch_args(case: dict) -> tuple:
    return case["params"], case["batches"], case["rate"], case["lr"]


def epoch_masks(facts: dict, case: dict, what: str = "train_epoch") -> list[np.ndarray]:
    b, h = case["batches"][0][0].shape[0], case["params"][0]["w"].shape[1]
    masks = facts.get("masks")
    if type(masks) is not list or len(masks) != len(case["batches"]):
        raise _fail(f"{what}: masks is {describe(masks)}; expected a list of {len(case['batches'])} masks",
                    "train_epoch's masks are not a list with one mask per batch",
                    "append each step's keep mask to a list and return it", measured=describe(masks))
    out = []
    for m in masks:
        arr = as_array(m)
        if arr is None or arr.shape != (b, h) or not np.all((arr == 0) | (arr == 1)):
            raise _fail(f"{what}: a mask is {describe(m)}; expected bool[{b},{h}]",
                        "a mask is not a bool array of shape (batch size, hidden width)",
                        "each mask is the step's keep mask, jax.random.bernoulli(step_key, 1 - rate, (x.shape[0], H)),"
                        " with H the hidden width (params[0]['w'].shape[1])", measured=describe(m))
        out.append(arr.astype(bool))
    return out


def _params_close(got, want) -> bool:
    if type(got) is not list or len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if type(g) is not dict or set(g) != set(w):
            return False
        for k in w:
            a = as_array(g[k])
            if a is None or a.shape != np.shape(w[k]) or not np.allclose(a, w[k], rtol=1e-5, atol=1e-6):
                return False
    return True


def _same_epoch(a: dict, b: dict) -> bool:
    if not isinstance(a.get("masks"), list) or not isinstance(b.get("masks"), list) or \
            len(a["masks"]) != len(b["masks"]):
        return False
    same_masks = all(isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and np.array_equal(x, y)
                     for x, y in zip(a["masks"], b["masks"]))
    return same_masks and _params_close(a.get("params"), b.get("params")) and \
        a.get("key", {}).get("kind") != "other" and np.array_equal(a["key"].get("data"), b["key"].get("data"))


def first_epoch(got: dict, kind: str) -> dict:
    first = got["first"]
    if "error" in first:
        raise _error_failure("train_epoch(key, params, batches, rate, lr)", kind, first["error"])
    if "shape_error" in first:
        raise _fail(first["shape_error"], "train_epoch did not return a tuple (params, key, masks)",
                    "return params, key, masks: the parameters after the epoch, the key for the next epoch, and the "
                    "list of keep masks", measured=first["shape_error"])
    return first


def judge_epoch_values(got: dict, want: dict, case: dict) -> list[np.ndarray]:
    """The returned parameters are what the given sgd_step makes with the returned masks, step by
    step; the masks keep about 1 - rate of the units; the same key gives the same epoch.
    Returns the masks."""
    kind = case["key"]["kind"]
    first = first_epoch(got, kind)
    masks = epoch_masks(first, case)
    if not _params_close(first["params"], want["params"]):
        raise _fail("the parameters train_epoch returned are not those sgd_step makes with its masks",
                    f"with {KIND_WORDS[kind]}, the returned parameters differ from sgd_step applied to each batch in "
                    "order with the returned masks",
                    "for each batch: keep = the step's mask; params = sgd_step(params, x, y, keep, rate, lr); append "
                    "that same keep to masks. Return the parameters after the last step",
                    measured="parameters differ", expected="the epoch recomputed from the returned masks (rtol 1e-5)")
    rate = case["rate"]
    kept = float(np.mean(np.concatenate([m.ravel() for m in masks])))
    n = sum(m.size for m in masks)
    if abs(kept - (1 - rate)) > SIGMAS * np.sqrt(rate * (1 - rate) / n):
        flipped = abs(kept - rate) <= SIGMAS * np.sqrt(rate * (1 - rate) / n)
        raise _fail(f"the masks keep a fraction {kept:.3f} of the units; expected about {1 - rate:.3f}",
                    f"the masks keep a fraction of units far from 1 - rate ({rate_label(rate).replace('_', ' ')} case)" +
                    (": they keep with probability rate" if flipped else ""),
                    "a keep mask is jax.random.bernoulli(step_key, 1 - rate, shape): True (kept) with probability "
                    "1 - rate", measured=f"kept {kept:.4f}", expected=f"{1 - rate:.4f}")
    again = got.get("again", {})
    if "error" in again or not _same_epoch(first, again):
        raise _fail("train_epoch gave another epoch for the same key",
                    "the same key (a fresh copy of it) gave another epoch: other masks, parameters or key",
                    "train_epoch must be a function of its arguments alone: every mask comes from keys split off "
                    "`key`, never from np.random or a global key", measured=again.get("error", "epochs differ"))
    return masks


def judge_epoch_kinds(typed: dict, legacy: dict) -> None:
    """The same key data as a typed and as a legacy key gives the same epoch."""
    if not _same_epoch(typed["first"], legacy["first"]):
        raise _fail("a typed key and a legacy key with the same data gave different epochs",
                    "the same key data gave other masks, parameters or key as a legacy key than as a typed one",
                    "use the key only through jax.random (split, fold_in, bernoulli): both kinds then draw the same "
                    "numbers")


def _equal_masks(masks: list[np.ndarray], other: list[np.ndarray]) -> list[tuple[int, int]]:
    return [(i, j) for i, a in enumerate(masks) for j, b in enumerate(other) if np.array_equal(a, b)]


def judge_fresh_steps(masks: list[np.ndarray], from_input: list[np.ndarray], reuse: dict) -> None:
    """Every step drew its mask from a key of its own: no two masks equal, none drawn from the
    input key itself, and JAX's key-reuse checker saw no key used twice in the epoch."""
    same = [(i, j) for i, j in _equal_masks(masks, masks) if i < j]
    if same:
        raise _fail(f"steps {same[0][0]} and {same[0][1]} used the same mask",
                    "two steps of the epoch used the same dropout mask: they drew it from the same key",
                    "split a fresh key for every step: key, step_key = jax.random.split(key) inside the loop, and "
                    "draw the step's mask from step_key", measured=f"equal masks at steps {same}")
    hits = [i for i, (m, d) in enumerate(zip(masks, from_input)) if np.array_equal(m, d)]
    if hits:
        raise _fail(f"step {hits[0]} drew its mask from the key train_epoch was given",
                    "a step drew its mask from the epoch's own key, which also made the other steps' keys: that key "
                    "was used twice",
                    "never draw from a key you split (or will split): split first, and draw from the new key",
                    measured=f"steps {hits}")
    if "reuse" in reuse:
        raise _fail(f"JAX's key-reuse checker raised: {reuse['reuse']}",
                    "JAX's key-reuse checker (jax.debug_key_reuse) raised KeyReuseError in one epoch: a key was used "
                    "twice",
                    "each key is used once, to draw or to split: key, step_key = jax.random.split(key) at every step",
                    measured=reuse["reuse"])


def judge_returned_key(got: dict, masks: list[np.ndarray], from_returned: list[np.ndarray] | None,
                       case: dict, reuse: dict) -> None:
    """The returned key is a key, differs from the one given, drew none of the epoch's masks,
    and the next epoch started from it repeats none of them."""
    first = got["first"]
    key = first["key"]
    if key.get("kind") == "other":
        raise _fail(f"train_epoch returned {key.get('what')} as its key",
                    "train_epoch's second result is not a key",
                    "return the key left after the last split: params, key, masks", measured=str(key.get("what")))
    if np.array_equal(np.asarray(key["data"]), np.asarray(case["key"]["data"])):
        raise _fail("train_epoch returned the key it was given",
                    "train_epoch returned the key it was given: the next epoch will draw the same masks again",
                    "thread the key: key, step_key = jax.random.split(key) at every step, and return the last `key` "
                    "(the one no step used)")
    if from_returned is not None:
        hits = [i for i, (m, d) in enumerate(zip(masks, from_returned)) if np.array_equal(m, d)]
        if hits:
            raise _fail(f"the returned key drew the mask of step {hits[0]}",
                        "train_epoch returned a key that a step already used to draw its mask",
                        "return the other half of the last split (the key you would split next), not the step's key",
                        measured=f"steps {hits}")
    second = got.get("second", {})
    if "error" in second or "shape_error" in second:
        raise _fail(f"a second epoch from the returned key failed: {second.get('error') or second.get('shape_error')}",
                    "train_epoch failed when started from the key it returned",
                    "return a key of the kind you were given, ready to be split by the next epoch",
                    measured=str(second.get("error") or second.get("shape_error")))
    again = epoch_masks(second, case, "the next epoch")
    repeated = _equal_masks(again, masks)
    if repeated:
        raise _fail("the next epoch, started from the returned key, repeated a mask of this one",
                    "an epoch started from the returned key drew a mask this epoch already drew: the returned key was "
                    "already used",
                    "return the key left after the last split, which no step has used or split",
                    measured=f"(next step, this step): {repeated}")
    if "reuse" in reuse:
        raise _fail(f"JAX's key-reuse checker raised: {reuse['reuse']}",
                    "JAX's key-reuse checker (jax.debug_key_reuse) raised KeyReuseError over two epochs, the second "
                    "started from the returned key: the returned key was already used",
                    "return the key left after the last split, which no step has used", measured=reuse["reuse"])


# --- part D: per_example_noise ----------------------------------------------------------------------

def draw_noise_cases(rng) -> tuple[list[dict], list[str]]:
    """A typed key, a legacy key, and the first key again, on batches of one drawn shape."""
    shape = (int(rng.integers(3, 9)), int(rng.integers(2, 7)))
    cases = [{"key": draw_key(rng, kind), "xs": rng.normal(size=shape).astype(np.float32)}
             for kind in ("typed", "legacy")]
    return cases + [{**cases[0], "key": dict(cases[0]["key"])}], ["typed_key", "legacy_key", "repeated_key"]


def judge_noise(got: list[dict], want: list[np.ndarray], cases: list[dict], labels: list[str],
                explain=None) -> None:
    """``want``: the reference for each case; ``explain(i)``, when given, the classic wrong
    answers for case ``i`` (``one_draw``, ``one_key``), asked only to diagnose a failure."""
    for i, (res, target, case, label) in enumerate(zip(got, want, cases, labels)):
        kind = case["key"]["kind"]
        if "error" in res:
            raise _error_failure("per_example_noise(key, xs)", kind, res["error"])
        out = as_array(res["out"])
        if out is None or out.shape != target.shape:
            raise _fail(f"per_example_noise returned {describe(res['out'])}; expected f32{list(target.shape)}",
                        "per_example_noise returned something other than an array of xs's shape",
                        "return xs plus the noise, an array of xs's shape", measured=describe(res["out"]))
        if np.allclose(out, target, rtol=1e-6, atol=1e-6):
            continue
        wrong = explain(i) if explain is not None else {}
        noise = out - case["xs"]
        if "one_draw" in wrong and np.allclose(out, wrong["one_draw"], rtol=1e-6, atol=1e-6):
            diagnosis = "the noise is one draw for the whole batch, jax.random.normal(key, xs.shape)"
        elif np.allclose(noise, noise[:1], atol=1e-6):
            diagnosis = "every example got the same noise: one key served every example"
        elif label == "repeated_key":
            diagnosis = "the same key gave other noise on a second call"
        else:
            diagnosis = f"the noise is not example i's draw from jax.random.split(key, B)[i] (with {KIND_WORDS[kind]})"
        advice = ("keys = jax.random.split(key, xs.shape[0]); then jax.vmap over (keys, xs) of "
                  "lambda k, x: x + jax.random.normal(k, x.shape): example i draws from keys[i] alone")
        raise _fail(f"per_example_noise differs from the reference: {diagnosis}", diagnosis, advice,
                    measured=f"largest difference {float(np.max(np.abs(out - target))):.3g}",
                    expected="xs[i] + normal(split(key, B)[i], xs.shape[1:]) for each i")


def noise_structure_cases(key: dict, batch_sizes: list, width: int) -> list[dict]:
    """The ``truth_noise`` cases of a ``noise_structure`` probe: ``xs = 0`` at each batch size."""
    return [{"key": key, "xs": np.zeros((int(b), int(width)), np.float32)} for b in batch_sizes]


def judge_noise_structure(facts: list[dict], want: list[np.ndarray]) -> None:
    """The traced program does not grow with the batch: one ``random_bits`` for any B (vmap), not
    one per example (a Python loop).  ``want``: the reference noise on ``xs = 0`` at each batch
    size (``truth_noise`` of ``noise_structure_cases``); the counts are read only from a
    traced program whose own output is that noise -- the program that computes the answer."""
    for f in facts:
        expect_traced_program_runs(traced_error(f), "per_example_noise", advice=(
            "build it from JAX operations only: jax.random.split, jax.vmap and jax.random.normal"))
    for f, target in zip(facts, want, strict=True):
        out = as_array(f.get("outputs"))
        shaped = out is not None and out.shape == np.shape(target)
        expect_traced_program_computes(
            shaped and np.allclose(out, target, rtol=1e-6, atol=1e-6), "per_example_noise",
            "draw the reference noise (example i's draw from jax.random.split(key, B)[i])",
            expected="the reference noise, as traced under jax.jit",
            measured=f"B={f['batch']}: largest difference {float(np.max(np.abs(out - target))):.3g}" if shaped else
            describe(f.get("outputs")))
    small, large = facts[0], facts[-1]
    if large["random_bits"] > small["random_bits"] or large["equations"] > small["equations"]:
        raise _fail(f"the jaxpr grows with the batch: {small['random_bits']} random_bits and {small['equations']} "
                    f"equations at B={small['batch']}, {large['random_bits']} and {large['equations']} at "
                    f"B={large['batch']}",
                    "per_example_noise's traced program grows with the batch size: a Python loop over the examples",
                    "jax.vmap over the split keys draws every example's noise with one random_bits, whatever B",
                    measured=f"{small} / {large}", expected="the same counts at every batch size")
