"""Exercise 15 (PRNG discipline): draws and verdicts shared by the public and the hidden checks.

NumPy only.  What JAX draws from a key is never computed here: it comes from the clean worker
(``probes.truth_*``), on the installed JAX, at every grading.  Keys are plain data,
``{"data": uint32[2], "kind": "typed" | "legacy"}`` (``probes.make_key`` rebuilds them).

Key reuse is judged twice, independently: by JAX's key-reuse checker (the analysis
``jax.debug_key_reuse(True)`` runs) in the learner's process (``probes.key_reuse``), and here by
value, which nothing in the learner's process can switch off.  With threefry (JAX's default,
``jax_threefry_partitionable``) a key's draw is a fixed stream of random bits laid out in
row-major order: a draw of shape ``(a, b)`` holds the same bits as one of ``(a * b,)``, and a
shorter draw is a prefix of a longer one.  ``uniform``, ``normal``, ``truncated_normal`` and
``bernoulli`` are monotone functions of those bits (measured exact in float32 on the installed
JAX, ``tests/test_ex15_prng.py``), so whatever scale, shift, sign or threshold a function
applies, a value drawn from key ``k`` rises (or falls) with ``k``'s bits: "drawn from ``k``" is
decided by ranks (``monotone_chance``), not by equal values.  Two draws from one key are
monotone functions of each other, and two masks thresholded from one key are nested
(``nested_chance``).  Independent draws show such a relation only by chance, and that chance is
computed: a relation is called reuse only when chance gives it less than ``CHANCE``, counted over
every comparison the check makes, so an honest file is never failed by chance.

Feedback for a hidden check names the *kind* of input that went wrong (a typed or a legacy key,
the same key twice, ``training=False``, a rate above one half), never a drawn value: those go to
``measured`` and ``expected``, which only the instructor reads.
"""

from __future__ import annotations

import math

import numpy as np

from grader.feedback import (CheckFailed, describe, expect_traced_program_computes, expect_traced_program_runs,
                             traced_error)
from grader.jaxcompat import SCAN_PRIMITIVE, WHILE_PRIMITIVE
from grader.traced_work import expect_no_host_callback

SIGMAS = 6.0  # statistical bounds: a right answer falls outside one about once in 10**9
CHANCE = 1e-6  # a relation between draws is called reuse only when independent draws show it less often

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


# --- reuse by value: ranks and nesting --------------------------------------------------------------

def layouts(a) -> list[np.ndarray]:
    """The orders in which a draw may have laid out ``a``'s elements: row-major, and for a matrix
    column-major too (a draw of the transposed shape, transposed)."""
    a = np.asarray(a)
    return [a.ravel(), a.T.ravel()] if a.ndim == 2 and min(a.shape) > 1 else [a.ravel()]


def _log_ties(values: np.ndarray) -> float:
    """log of the product of c! over the multiplicities c of ``values``' distinct elements."""
    _, counts = np.unique(values, return_counts=True)
    return float(sum(math.lgamma(c + 1) for c in counts if c > 1))


def monotone_chance(order, values) -> float | None:
    """Whether ``values`` is a monotone (rising or falling, not necessarily strictly) function of
    ``order`` over their common prefix: a draw from the key whose bits ``order`` is, scaled,
    shifted, negated or thresholded any way (or, ``order`` another draw, two draws from one key).
    If so, the chance that values independent of ``order`` would be: of the arrangements of the
    values, at most 2 * prod(t!) are monotone in ``order`` (t: its runs of equal elements), out of
    n! / prod(c!) (c: the values' own); else None."""
    n = min(np.size(order), np.size(values))
    key, vals = np.asarray(order).ravel()[:n], np.asarray(values).ravel()[:n]
    if n < 2 or np.all(vals == vals[0]):
        return None  # a constant says nothing
    vals = vals.astype(np.float64) if vals.dtype == bool else vals
    rising = vals[np.lexsort((vals, key))]  # ties in ``order`` broken in the values' favour
    falling = vals[np.lexsort((-vals, key))]
    if not (np.all(np.diff(rising) >= 0) or np.all(np.diff(falling) <= 0)):
        return None
    log = math.log(2.0) + _log_ties(key) + _log_ties(vals) - math.lgamma(n + 1)
    return math.exp(min(log, 0.0))


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _contained(n: int, k: int, within: int) -> float:
    """The chance that ``k`` positions placed at random among ``n`` all fall in a given ``within``."""
    return math.exp(_log_comb(within, k) - _log_comb(n, k)) if k <= within else 0.0


def nested_chance(a, b) -> float | None:
    """Whether the boolean masks ``a`` and ``b`` (one layout, same size) are nested: one of ``a``,
    ``~a`` contains or lies in ``b``, as two thresholds of one key's bits are (``bernoulli(k, p)``
    is ``uniform(k) < p``, ``uniform(k) >= r`` its complement at another level).  If so, the
    chance that masks placed independently, with their counts of kept units, would be nested
    some way; else None."""
    a, b = np.asarray(a, bool).ravel(), np.asarray(b, bool).ravel()
    n, ka, kb = a.size, int(a.sum()), int(b.sum())
    if n != b.size or ka in (0, n) or kb in (0, n):
        return None  # an all-kept or all-dropped mask is nested with anything
    nested = (not np.any(a & ~b)) or (not np.any(b & ~a)) or (not np.any(a & b)) or np.all(a | b)
    if not nested:
        return None
    return min(1.0, _contained(n, ka, kb) + _contained(n, kb, ka) +  # a in b, b in a
               _contained(n, kb, n - ka) + _contained(n, n - ka, kb))  # b in ~a, ~a in b


def most_telling(found: list[tuple[float, object]], comparisons: int):
    """The relation least likely by chance among ``found`` (``(chance, what)`` pairs), if even
    counted over all ``comparisons`` made it is below ``CHANCE``; else None."""
    if not found:
        return None
    chance, what = min(found, key=lambda f: f[0])
    return (chance * max(comparisons, 1), what) if chance * max(comparisons, 1) < CHANCE else None


def drawn_from(bits, draw) -> float | None:
    """The chance that ``draw`` (a layer, a mask) is a monotone function of ``bits`` (the random
    bits a key gives over at least the draw's size) in one of its layouts by chance, counted
    over the layouts tried; None when it is no such function."""
    tried = layouts(draw)
    chances = [c for c in (monotone_chance(np.asarray(bits)[:x.size], x) for x in tried) if c is not None]
    return min(chances) * len(tried) if chances else None


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


def judge_init_independent(layers: list[dict], root_bits: np.ndarray, reuse: dict, draws: dict) -> None:
    """No two layers drew from one key, no layer drew from ``key`` itself, each layer is one draw
    of its own size (``judge_init_draws``), and JAX's key-reuse checker saw no key used twice.  ``root_bits``: the random bits ``key`` itself gives, over at
    least the largest layer.  By ranks: a layer drawn from ``key`` (negated, scaled, or through
    ``uniform``) rises or falls with its bits, and two layers drawn from one key with each other
    over their common prefix; independent layers of a thousand values do so with a chance far
    below ``CHANCE``."""
    z = [standard_draws(layer) for layer in layers]
    for i in range(len(z)):
        for j in range(i + 1, len(z)):
            pairs = [(x, y) for x in layouts(z[i]) for y in layouts(z[j])]
            found = [(c, None) for c in (monotone_chance(x, y) for x, y in pairs) if c is not None]
            if most_telling(found, len(pairs)):
                raise _fail(f"layers {i} and {j} drew their weights from the same key",
                            "two layers drew their weights from the same key: over their common length one layer's "
                            "weights rise (or fall) exactly with the other's, the same random bits scaled, shifted "
                            "or negated",
                            "split the key into one key per layer: keys = jax.random.split(key, n_layers), and "
                            "draw layer i from keys[i] only", measured=f"layers {i} and {j}: monotone in each other "
                            f"over {min(z[i].size, z[j].size)} values")
        chance = drawn_from(root_bits, z[i])
        if chance is not None and chance < CHANCE:
            raise _fail(f"layer {i} drew its weights from `key` itself",
                        "a layer drew its weights from the key init_mlp was given, which also served to make other "
                        "keys (its weights rise or fall exactly with the random bits that key gives, whatever scale, "
                        "sign or copy of the key was used): a key is used once, either to draw or to split",
                        "split `key` first and draw every layer from one of the keys split gives; never draw from "
                        "a key you split, nor from a copy of it (jax.random.wrap_key_data(jax.random.key_data(key)) "
                        "is the same key)",
                        measured=f"layer {i} is a monotone function of key's bits (chance {chance:.2g})")
    judge_init_draws(layers, draws)
    if "reuse" in reuse:
        raise _fail(f"JAX's key-reuse checker raised: {reuse['reuse']}",
                    "JAX's key-reuse checker (jax.debug_key_reuse) raised KeyReuseError on init_mlp: a key was used twice "
                    "(drawn from and split, or drawn from twice)",
                    "every key is consumed by exactly one use: a draw or a split. Split first, then draw each layer "
                    "from its own key; run your code under jax.debug_key_reuse(True) with jax.random.key(0) to see "
                    "where", measured=reuse["reuse"])


def judge_init_draws(layers: list[dict], draws: dict) -> None:
    """Each layer's weights are one draw of exactly its ``m * n`` numbers: the program of
    ``init_mlp`` (``init_draws``, traced once under jit, whose own output must be the layers the
    call gave) draws one ``(m, n)`` block per layer and nothing else.  Slicing every layer out of
    one long draw, or cutting a layer from a later stretch of a longer draw, takes two layers'
    numbers from one key's stream, which no comparison of values can see."""
    expect_traced_program_runs(traced_error(draws), "init_mlp", advice=(
        "build it from JAX operations only: jax.random.split and jax.random.normal"))
    traced = draws.get("outputs")
    same = type(traced) is list and len(traced) == len(layers) and all(
        type(t) is dict and set(t) == {"w", "b"} and all(
            isinstance(t[k], np.ndarray) and t[k].shape == np.shape(layer[k])
            and bool(np.allclose(t[k], layer[k], rtol=1e-5, atol=1e-6)) for k in ("w", "b"))
        for t, layer in zip(traced, layers))  # XLA may fuse the scaling differently: not bit for bit
    expect_traced_program_computes(same, "init_mlp", "return the same layers for the same key, traced or not",
                                   expected="the layers init_mlp(key, sizes) gives called on the same key (rtol 1e-5)",
                                   measured=describe(traced))
    _judge_draws(draws, [int(np.size(layer["w"])) for layer in layers], "init_mlp", "layer",
                 "each layer's weights must be one jax.random.normal(layer_key, (m, n)) from a key of its own: "
                 "init_mlp's program draws other amounts (every layer sliced out of one long draw, a layer cut "
                 "from a longer draw, or extra draws), so some layers take their numbers from one key's stream",
                 "split key into one key per layer and draw layer i's weights with "
                 "jax.random.normal(keys[i], (m, n)): exactly m * n numbers, nothing sliced")


def _judge_draws(draws: dict, sizes: list[int], function: str, each: str, diagnosis: str, advice: str) -> None:
    """The traced program's random draws (``probes._draws``) are exactly one of each of ``sizes``
    elements: one per ``each`` (a layer, a step), of its own size; and no key is used up twice,
    copies followed (``jax.random.clone``, a key's data wrapped again: JAX's checker lets a copy
    through, and values drawn from one key and moved apart pass every comparison)."""
    reused = draws.get("reused") or []
    if reused:
        raise _fail(f"{function} uses a key twice: {reused[0]}",
                    f"{function}'s traced program uses one key up twice (draws from it, splits it, or returns it "
                    "after using it), through a copy that JAX's key-reuse checker does not follow "
                    "(jax.random.clone, or the key's data wrapped again): the numbers come from one key's stream",
                    "a key is used once: split it into as many keys as you need and use each of those once; "
                    "jax.random.clone exists to reuse a key on purpose, which this exercise forbids",
                    measured="; ".join(reused), expected="every key used up at most once")
    want: dict = {}
    for size in sizes:
        want[size] = want.get(size, 0) + 1
    got = {int(size): int(count) for size, count in draws.get("draws", [])}
    if got == want and not draws.get("in_while"):
        return

    def words(table):
        return ", ".join(f"{c} of {s} numbers" for s, c in sorted(table.items())) or "none"

    raise _fail(f"{function}'s random draws are {words(got)}; expected one draw per {each}: {words(want)}",
                diagnosis + (" (a draw sits in a while loop, whose trips the program does not state)"
                             if draws.get("in_while") else ""),
                advice, measured=f"draws by size: {words(got)}", expected=f"draws by size: {words(want)}")


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
    and a key.  Masks of 2048 units or more: two steps thresholding one key's bits in opposite
    directions (``bernoulli(k, 1 - rate)`` and ``uniform(k) >= rate``) have disjoint dropped (or
    kept) units, which independent masks have at rate 0.125 with a chance below 1e-14 (1e-9 at
    three standard deviations fewer), so ``nested_chance`` tells them apart at every rate drawn."""
    d, h, o = int(rng.integers(4, 9)), int(rng.integers(64, 97)), int(rng.integers(1, 4))
    params = [{"w": (rng.normal(size=(d, h)) / np.sqrt(d)).astype(np.float32), "b": np.zeros(h, np.float32)},
              {"w": (rng.normal(size=(h, o)) / np.sqrt(h)).astype(np.float32), "b": np.zeros(o, np.float32)}]
    b = int(rng.integers(32, 49))
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


def _nested_pairs(masks: list[np.ndarray], other: list[np.ndarray], *, within: bool) -> tuple[list, int]:
    """Every pair of masks, one of ``masks`` and one of ``other`` (``within``: one list, each pair
    once), in every pair of layouts: ``(chance, (i, j))`` for those nested, and the number of
    comparisons made."""
    found, comparisons = [], 0
    for i, a in enumerate(masks):
        for j, b in enumerate(other):
            if within and j <= i:
                continue
            for x in layouts(a):
                for y in layouts(b):
                    comparisons += 1
                    chance = nested_chance(x, y)
                    if chance is not None:
                        found.append((chance, (i, j)))
    return found, comparisons


def _masks_drawn_from(bits, masks: list[np.ndarray]):
    """The mask most clearly drawn from the key whose random ``bits`` these are (a threshold of
    them: ``max(u[mask]) < min(u[~mask])`` or the reverse, in some layout), as ``(chance, step)``
    when chance alone explains it less than ``CHANCE`` over all the masks; else None."""
    if bits is None:
        return None
    found = [(c, i) for i, m in enumerate(masks) if (c := drawn_from(bits, m)) is not None]
    return most_telling(found, len(masks))


NESTED_WHY = ("one's kept units, or its dropped units, contain or lie inside the other's: two thresholds of the same "
              "random numbers, as jax.random.bernoulli(k, p) and jax.random.uniform(k) >= rate drawn from one key "
              "(or from a copy of it, jax.random.wrap_key_data(jax.random.key_data(k))) are")


def judge_fresh_steps(masks: list[np.ndarray], input_bits: np.ndarray | None, reuse: dict) -> None:
    """Every step drew its mask from a key of its own: no two masks are nested (equal, or two
    thresholds of one key's bits), none is a threshold of the input key's own bits, and JAX's
    key-reuse checker saw no key used twice in the epoch.  ``input_bits``: the random bits the
    epoch's key gives over a mask's size."""
    advice = ("split a fresh key for every step: key, step_key = jax.random.split(key) inside the loop, and draw the "
              "step's mask from step_key; never draw twice from one key, nor from a copy of a key")
    found, comparisons = _nested_pairs(masks, masks, within=True)
    hit = most_telling(found, comparisons)
    if hit:
        chance, (i, j) = hit
        if np.array_equal(masks[i], masks[j]):
            raise _fail(f"steps {i} and {j} used the same mask",
                        "two steps of the epoch used the same dropout mask: they drew it from the same key", advice,
                        measured=f"equal masks at steps {i} and {j}")
        raise _fail(f"steps {i} and {j} drew their masks from the same key",
                    f"two steps' dropout masks are nested ({NESTED_WHY}); masks drawn from keys of their own are "
                    f"nested so less than once in a million epochs", advice,
                    measured=f"steps {i} and {j}: nested masks, chance {chance:.2g} over {comparisons} comparisons")
    hit = _masks_drawn_from(input_bits, masks)
    if hit:
        raise _fail(f"step {hit[1]} drew its mask from the key train_epoch was given",
                    "a step drew its mask from the epoch's own key (its mask is a threshold of the random numbers "
                    "that key gives), which also made the other steps' keys: that key was used twice",
                    "never draw from a key you split (or will split), nor from a copy of it: split first, and draw "
                    "from the new key", measured=f"step {hit[1]}: a threshold of the key's bits, chance {hit[0]:.2g}")
    if "reuse" in reuse:
        raise _fail(f"JAX's key-reuse checker raised: {reuse['reuse']}",
                    "JAX's key-reuse checker (jax.debug_key_reuse) raised KeyReuseError in one epoch: a key was used "
                    "twice",
                    "each key is used once, to draw or to split: key, step_key = jax.random.split(key) at every step",
                    measured=reuse["reuse"])


def judge_epoch_draws(masks: list[np.ndarray], draws: dict, case: dict) -> None:
    """Each step's mask is one draw of exactly its ``B * H`` numbers: the program of one epoch
    (``epoch_draws``, traced once under jit, whose own masks must be the ones the call returned)
    draws one ``(B, H)`` block per step and nothing else.  Masks made without a draw (a pattern
    moved by the key's data) or cut from a later stretch of a longer draw pass every comparison
    of values; the draws say what they are."""
    expect_traced_program_runs(traced_error(draws), "train_epoch", advice=(
        "build it from JAX operations only: jax.random.split, jax.random.bernoulli and the given sgd_step"))
    traced = (draws.get("outputs") or {}).get("masks")
    shaped = [as_array(m) for m in traced] if type(traced) is list else []
    same = len(shaped) == len(masks) and all(
        t is not None and t.shape == m.shape and np.array_equal(t.astype(bool), m) for t, m in zip(shaped, masks))
    expect_traced_program_computes(same, "train_epoch", "return the same masks for the same key, traced or not",
                                   expected="the masks train_epoch returns called on the same typed key",
                                   measured=describe(traced))
    _judge_draws(draws, [int(m.size) for m in masks], "train_epoch", "step",
                 "each step's mask must be one jax.random.bernoulli(step_key, 1 - rate, (B, H)) from a key of its "
                 "own: the epoch's program draws other amounts (masks made without a draw, cut from a longer draw, "
                 "or extra draws), so the masks are not the steps' own draws",
                 "split a fresh step_key at every step and draw that step's mask with "
                 "jax.random.bernoulli(step_key, 1 - rate, (x.shape[0], H)): exactly B * H numbers, nothing sliced")


def judge_returned_key(got: dict, masks: list[np.ndarray], returned_bits: np.ndarray | None,
                       case: dict, reuse: dict) -> None:
    """The returned key is a key, differs from the one given, drew none of the epoch's masks (no
    mask is a threshold of its bits), and the next epoch started from it draws no mask nested with
    one of this epoch's.  ``returned_bits``: the random bits the returned key gives over a mask's
    size (None when it is no key)."""
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
    hit = _masks_drawn_from(returned_bits, masks)
    if hit:
        raise _fail(f"the returned key drew the mask of step {hit[1]}",
                    "train_epoch returned a key that a step already used to draw its mask (that mask is a threshold "
                    "of the random numbers the returned key gives)",
                    "return the other half of the last split (the key you would split next), not the step's key nor "
                    "a copy of it", measured=f"step {hit[1]}: a threshold of the returned key's bits, chance "
                                             f"{hit[0]:.2g}")
    second = got.get("second", {})
    if "error" in second or "shape_error" in second:
        raise _fail(f"a second epoch from the returned key failed: {second.get('error') or second.get('shape_error')}",
                    "train_epoch failed when started from the key it returned",
                    "return a key of the kind you were given, ready to be split by the next epoch",
                    measured=str(second.get("error") or second.get("shape_error")))
    again = epoch_masks(second, case, "the next epoch")
    found, comparisons = _nested_pairs(again, masks, within=False)
    hit = most_telling(found, comparisons)
    if hit:
        chance, (i, j) = hit
        same = np.array_equal(again[i], masks[j])
        drew = "a mask this epoch already drew" if same else f"a mask nested with one of this epoch's ({NESTED_WHY})"
        raise _fail("the next epoch, started from the returned key, " +
                    ("repeated a mask of this one" if same else "drew a mask from a key this one used"),
                    f"an epoch started from the returned key drew {drew}: the returned key was already used",
                    "return the key left after the last split, which no step has used or split",
                    measured=f"(next step, this step): ({i}, {j}), chance {chance:.2g}")
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


def expect_no_batch_loop(fact: dict) -> None:
    """One ``noise_structure`` answer's program holds no loop over the examples in any form the
    equation count cannot see: no host callback (Python run from inside the program), no ``scan``
    (``lax.map``, ``lax.scan``, ``fori_loop`` with static bounds, of any length: a vmapped draw
    holds none) and no ``while`` (``while_loop``, ``fori_loop`` with traced bounds)."""
    loops = fact.get("loops") or {}
    advice = ("keys = jax.random.split(key, xs.shape[0]); jax.vmap(lambda k, x: x + jax.random.normal(k, x.shape))"
              "(keys, xs): vmap draws every example's noise in one batched program")
    expect_no_host_callback(loops, where="per_example_noise", advice=advice,
                            why="whatever loops over the examples there is Python, invisible to JAX and not vectorised")
    found = {p: n for p, n in loops.items() if p in (SCAN_PRIMITIVE, WHILE_PRIMITIVE) and n}
    if found:
        lengths = fact.get("scan_lengths") or []
        raise _fail("per_example_noise loops over the batch with a JAX loop",
                    "the traced program holds a JAX loop (scan or while: lax.map, lax.scan, fori_loop or while_loop), "
                    "which draws the examples' noise one after another instead of vectorising them with jax.vmap",
                    advice, measured=", ".join(f"{n} `{p}` equation(s)" for p, n in found.items()) +
                    (f" (scan lengths {lengths} at B={fact.get('batch')})" if lengths else ""),
                    expected="no scan or while: one vmapped program")


def judge_noise_structure(facts: list[dict], want: list[np.ndarray]) -> None:
    """The traced program does not loop over the batch (``expect_no_batch_loop``) nor grow with
    it: one ``random_bits`` for any B (vmap), not one per example (a Python loop).  ``want``: the
    reference noise on ``xs = 0`` at each batch size (``truth_noise`` of
    ``noise_structure_cases``); the counts are read only from a traced program whose own output
    is that noise -- the program that computes the answer."""
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
    for f in reversed(facts):  # the largest batch first: its loop is the longest
        expect_no_batch_loop(f)
    small, large = facts[0], facts[-1]
    if large["random_bits"] > small["random_bits"] or large["equations"] > small["equations"]:
        raise _fail(f"the jaxpr grows with the batch: {small['random_bits']} random_bits and {small['equations']} "
                    f"equations at B={small['batch']}, {large['random_bits']} and {large['equations']} at "
                    f"B={large['batch']}",
                    "per_example_noise's traced program grows with the batch size: a Python loop over the examples",
                    "jax.vmap over the split keys draws every example's noise with one random_bits, whatever B",
                    measured=f"{small} / {large}", expected="the same counts at every batch size")
