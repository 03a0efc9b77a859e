"""Exercise 19 (a Pallas kernel in interpret mode): draws, references and verdicts shared by the
public and the hidden checks.  NumPy only, references in float64.

What a kernel asks for is read from its jaxpr in the sandbox (``probes.structure``, the very trace
whose compiled program computed the judged values: every
``pallas_call`` with its grid and block shapes, and what runs outside the kernels) and judged
here against the grid and ``BlockSpec``s the statement asks for.  Wrong numbers are compared
with what the usual mistakes compute (no maximum subtracted, one maximum per block, ReLU after
every k step, a block overwritten instead of accumulated), so feedback can say which one it
looks like.

Feedback for a hidden check names the *kind* of row, grid axis or mistake, never a drawn value
or shape: those go to ``measured`` and ``expected``, which only the instructor reads.
"""

from __future__ import annotations

import numpy as np

from grader.feedback import CheckFailed, describe

#: What may run outside the kernel: calls and layout changes, never arithmetic.
LAYOUT_PRIMITIVES = frozenset({"jit", "pjit", "convert_element_type", "reshape", "squeeze", "expand_dims",
                               "broadcast_in_dim", "copy", "copy_p", "device_put"})
#: JAX errors a hidden check may name (its own classes, not a learner's), and what each means here.
KNOWN_ERRORS = {
    "TracerArrayConversionError": "NumPy was asked for the values of a traced array (np.asarray, np.array or a "
                                  "NumPy function on the input or the result): use jnp, which traces",
    "ConcretizationTypeError": "a Python value was asked of a traced array (float(), int(), an `if` on its values, "
                               "or a block size that is traced instead of a Python int)",
    "TracerBoolConversionError": "a Python `if` on a traced value",
    "TracerIntegerConversionError": "a traced value used where a Python int is needed (a block size or a grid "
                                    "that is traced instead of a Python int)",
    "AttributeError": "a method that only concrete arrays have (such as .block_until_ready()) was called on a "
                      "traced one",
    "TypeError": "an argument of the wrong type reached JAX or Pallas",
    "ValueError": "JAX or Pallas refused a value (a block size or grid that is traced instead of a Python int, a "
                  "block shape that does not divide the array, or pl.pallas_call without interpret=True on a CPU)",
}
#: Exponent range of float32: exp(x) overflows above about 88.7 and is 0 below about -103.9.
EXP_OVERFLOW, EXP_UNDERFLOW = 88.8, -104.0


def error_diagnosis(error: str) -> tuple[str, str]:
    """The error's class, if the check may name it, and what it means: (name or "", meaning)."""
    name = error.split(":", 1)[0].strip()
    if name in KNOWN_ERRORS:
        return name, KNOWN_ERRORS[name]
    return "", "read the traceback of your own call on an input of this kind"


def _raised(what: str, got: dict, advice: str) -> CheckFailed:
    name, meaning = error_diagnosis(got["error"])
    said = f" ({name}: {meaning})" if name else ""
    return CheckFailed(f"{what} raised", measured=got["error"], expected="an array", hint=f"{meaning}; {advice}",
                       diagnosis=f"{what} raised an error{said}", advice=advice)


def _host_failure(what: str, got: dict) -> CheckFailed | None:
    """Numbers a host callback computed are not the kernel's: the value checks judge the kernel."""
    host = got.get("host_callbacks") or {}
    if not host:
        return None
    advice = ("compute with jnp on the kernel's blocks; jax.pure_callback / io_callback hand the values to Python on "
              "the host, so the numbers are not the kernel's")
    return CheckFailed(f"{what}'s numbers come from a host callback", measured=f"host callbacks: {host}",
                       expected="numbers computed by the Pallas kernel", hint=advice,
                       diagnosis=f"{what} computes through a host callback ({', '.join(sorted(host))})", advice=advice)


def _shape_failure(what: str, value, want: tuple) -> CheckFailed | None:
    if not isinstance(value, np.ndarray) or value.shape != want or value.dtype != np.float32:
        advice = "return the pallas_call's float32 output as it is: out_shape=jax.ShapeDtypeStruct(shape, jnp.float32)"
        return CheckFailed(f"{what} returned the wrong shape or dtype", measured=describe(value),
                           expected=f"f32[{','.join(map(str, want))}]", hint=advice,
                           diagnosis=f"{what} returned an array of the wrong shape or dtype (float32, one value per "
                                     f"output element, is asked)", advice=advice)
    return None


# --- part A: a row-wise softmax -------------------------------------------------------------------

def reference_softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_mistakes(x: np.ndarray, block_rows: int) -> dict[str, np.ndarray]:
    """What the usual mistakes compute (float32, as a kernel would), by the diagnosis they get."""
    x = np.asarray(x, np.float32)
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        e = np.exp(x)
        naive = e / e.sum(axis=-1, keepdims=True)
        blocks = x.reshape(-1, block_rows, x.shape[-1])
        eb = np.exp(blocks - blocks.max(axis=(1, 2), keepdims=True))
        block_max = (eb / eb.sum(axis=-1, keepdims=True)).reshape(x.shape)
        ec = np.exp(blocks - blocks.max(axis=1, keepdims=True))
        columns = (ec / ec.sum(axis=1, keepdims=True)).reshape(x.shape)
        em = np.exp(x - x.mean(axis=-1, keepdims=True))
        mean = em / em.sum(axis=-1, keepdims=True)
    return {"each row's mean (not its maximum) is subtracted before exp: a row whose largest logit stands far above "
            "the others still overflows to inf (inf / inf is NaN)": mean,
            "no row maximum is subtracted before exp: exp overflows to inf for large logits (inf / inf is NaN) and "
            "underflows to 0 for very negative ones (0 / 0 is NaN)": naive,
            "one maximum is subtracted for the whole block instead of each row's own: a row far below the block's "
            "largest logit underflows to 0 / 0": block_max,
            "the softmax runs down the columns of the block (axis 0), not along each row": columns}


def row_kinds(x: np.ndarray, block_rows: int) -> list[str]:
    """Each row's kind: large positive logits (exp overflows), large negative ones (exp underflows to 0),
    ordinary ones sharing a block with a row of far larger logits, or ordinary."""
    maxima = np.asarray(x, np.float64).max(axis=-1)
    spread = maxima - np.asarray(x, np.float64).mean(axis=-1)
    kinds = []
    for r, m in enumerate(maxima):
        block = maxima[(r // block_rows) * block_rows:(r // block_rows + 1) * block_rows]
        kinds.append("wide_row" if spread[r] > EXP_OVERFLOW else
                     "overflow_row" if m > EXP_OVERFLOW else "underflow_row" if m < EXP_UNDERFLOW else
                     "row_below_its_block" if block.max() - m > -EXP_UNDERFLOW else "ordinary_row")
    return kinds


ROW_WORDS = {"wide_row": "rows whose largest logit stands far above the row's others",
             "overflow_row": "rows of large positive logits", "underflow_row": "rows of large negative logits",
             "row_below_its_block": "ordinary rows sharing a block with a row of far larger logits",
             "ordinary_row": "ordinary rows"}


def softmax_labels(x: np.ndarray, block_rows: int) -> set[str]:
    labels = set(row_kinds(x, block_rows))
    if x.shape[0] // block_rows >= 2:
        labels.add("several_blocks")
    return labels


def draw_softmax_case(rng) -> tuple[np.ndarray, int]:
    """A float32 (R, C) matrix, R a multiple of block_rows, with 2 to 4 blocks: rows of ordinary
    logits, of large positive ones (about +1000) and of large negative ones (about -1000), and one
    block that holds an ordinary row beside a large positive one."""
    block_rows = int(rng.choice([2, 4, 8]))
    rows, cols = block_rows * int(rng.integers(2, 5)), int(rng.integers(5, 25))
    return _hard_logits(rng, rows, cols, block_rows), block_rows


def _hard_logits(rng, rows: int, cols: int, block_rows: int) -> np.ndarray:
    """A float32 (rows, cols) matrix holding every kind of row (``row_kinds``): among them one whose
    largest logit stands about 300 above the row's others, which only subtracting each row's own
    maximum keeps finite (its mean, say, leaves exp(200) and more: inf in float32)."""
    kinds = rng.choice(["ordinary", "ordinary", "large", "small"], size=rows)
    mixed = int(rng.integers(0, rows // block_rows)) * block_rows
    a, b = rng.choice(block_rows, size=2, replace=False)
    kinds[mixed + a], kinds[mixed + b] = "ordinary", "large"
    others = [r for r in range(rows) if r not in (mixed + a, mixed + b)]
    small, wide = rng.choice(others, size=2, replace=False)
    kinds[int(small)], kinds[int(wide)] = "small", "wide"
    x = rng.normal(scale=3.0, size=(rows, cols))
    x[kinds == "large"] = 1000.0 + rng.normal(scale=5.0, size=(int((kinds == "large").sum()), cols))
    x[kinds == "small"] = -1000.0 + rng.normal(scale=5.0, size=(int((kinds == "small").sum()), cols))
    x[int(wide), int(rng.integers(cols))] += 300.0
    return x.astype(np.float32)


def draw_softmax_batch(rng) -> tuple[np.ndarray, int]:
    """A batch of 2 or 3 float32 matrices (B, R, C), R a multiple of block_rows, each holding every
    kind of row ``draw_softmax_case`` holds: a kernel under ``jax.vmap`` meets the hard rows too."""
    block_rows = int(rng.choice([2, 4]))
    batch, rows, cols = int(rng.integers(2, 4)), block_rows * int(rng.integers(2, 4)), int(rng.integers(4, 13))
    return np.stack([_hard_logits(rng, rows, cols, block_rows) for _ in range(batch)]), block_rows


def softmax_batch_labels(xs: np.ndarray, block_rows: int) -> set[str]:
    """Every case any matrix of the batch holds (``softmax_labels``)."""
    return set().union(*(softmax_labels(m, block_rows) for m in xs))


def judge_softmax(got: dict, x: np.ndarray, block_rows: int, what: str = "softmax_rows(x, block_rows)") -> None:
    if "error" in got:
        raise _raised(what, got, "softmax_rows must run as written, on float32 input, with a Python int block size")
    failure = _host_failure(what, got)
    if failure:
        raise failure
    value = got.get("value")
    failure = _shape_failure(what, value, x.shape)
    if failure:
        raise failure
    want = reference_softmax(x)
    v = value.astype(np.float64)
    bad = ~np.isclose(v, want, rtol=1e-5, atol=1e-6) | ~np.isfinite(v)
    if not bad.any():
        return
    batch = x.reshape(-1, *x.shape[-2:])
    kinds = [k for m in batch for k in row_kinds(m, block_rows)]
    bad_rows = bad.reshape(-1, x.shape[-1]).any(axis=-1)
    wrong = sorted({kinds[r] for r in np.flatnonzero(bad_rows)}, key=list(ROW_WORDS).index)
    where = ", ".join(ROW_WORDS[k] for k in wrong)
    like = ""
    for diagnosis, mistake in _softmax_mistakes(batch.reshape(-1, x.shape[-1]), block_rows).items():
        m = mistake.reshape(v.shape).astype(np.float64)
        if np.array_equal(np.isfinite(m), np.isfinite(v)) and np.allclose(
                np.nan_to_num(m), np.nan_to_num(v), rtol=1e-4, atol=1e-5):
            like = diagnosis
            break
    advice = like or ("each row of the output is exp(row - max(row)) / sum(exp(row - max(row))), computed inside the "
                      "kernel on its block of whole rows")
    nonfinite = int((~np.isfinite(v)).sum())
    raise CheckFailed(f"{what} differs from the float64 softmax on {where}",
                      measured=f"{int(bad.sum())} of {bad.size} values off ({nonfinite} not finite)",
                      expected="each row's softmax (rtol 1e-5, atol 1e-6)", hint=advice,
                      diagnosis=f"{what} is wrong on {where}" + (" (NaN or inf)" if nonfinite else "") +
                      (f"; it looks like this mistake: {like}" if like else ""), advice=advice)


def expected_softmax_kernel(shape: tuple, block_rows: int) -> dict:
    rows, cols = shape
    return {"grid": [rows // block_rows], "blocks": [[block_rows, cols], [block_rows, cols]], "num_inputs": 1,
            "num_outputs": 1}


# --- part B: a tiled matmul + ReLU -----------------------------------------------------------------

def reference_matmul_relu(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.maximum(np.asarray(x, np.float64) @ np.asarray(w, np.float64), 0.0)


def _partials(x: np.ndarray, w: np.ndarray, bk: int) -> list[np.ndarray]:
    """x @ w's contribution of each k block, float64."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    return [x[..., k:k + bk] @ w[k:k + bk] for k in range(0, x.shape[-1], bk)]


def relu_every_step(x: np.ndarray, w: np.ndarray, bk: int) -> np.ndarray:
    acc = 0.0
    for p in _partials(x, w, bk):
        acc = np.maximum(acc + p, 0.0)
    return acc


def _matmul_mistakes(x: np.ndarray, w: np.ndarray, bk: int) -> dict[str, np.ndarray]:
    parts = _partials(x, w, bk)
    return {"ReLU is applied after every k step, to partial sums, instead of once after the last":
            relu_every_step(x, w, bk),
            "each k step overwrites the output block instead of adding to it (only the last k block counts)":
            np.maximum(parts[-1], 0.0),
            "only the first k block is added (the others are dropped)": np.maximum(parts[0], 0.0),
            "the ReLU is missing": sum(parts)}


def matmul_labels(x: np.ndarray, w: np.ndarray, blocks: tuple[int, int, int]) -> set[str]:
    bm, bn, bk = blocks
    grid = (x.shape[0] // bm, w.shape[1] // bn, x.shape[1] // bk)
    want = reference_matmul_relu(x, w)
    labels = set()
    if grid[2] >= 2:
        labels.add("several_k_steps")
    if len(set(grid)) == 3:
        labels.add("grid_axes_distinct")
    if len(set(blocks)) == 3:
        labels.add("block_sizes_distinct")
    if (want == 0).any() and (want > 0).any():
        labels.add("relu_clips")
    if np.abs(relu_every_step(x, w, bk) - want).max() > 1e-2:
        labels.add("partial_sums_cross_zero")
    return labels


def draw_matmul_case(rng) -> tuple[np.ndarray, np.ndarray, tuple[int, int, int]]:
    """x (M, K) and w (K, N), float32, with M, N, K multiples of three distinct block sizes and a
    grid of three distinct sizes (a permutation of 2, 3, 4): every axis and block dimension can be
    told apart, and there are several k steps.  Redrawn until some partial sum over k changes
    sign, so ReLU between k steps changes the answer."""
    while True:
        bm, bn, bk = (int(b) for b in rng.choice([2, 4, 8], size=3, replace=False))
        gi, gj, gk = (int(g) for g in rng.permutation([2, 3, 4]))
        x = rng.normal(size=(gi * bm, gk * bk)).astype(np.float32)
        w = rng.normal(size=(gk * bk, gj * bn)).astype(np.float32)
        if "partial_sums_cross_zero" in matmul_labels(x, w, (bm, bn, bk)):
            return x, w, (bm, bn, bk)


def draw_matmul_batch(rng) -> tuple[np.ndarray, np.ndarray, tuple[int, int, int]]:
    """A batch of 2 or 3 x matrices (B, M, K) sharing one w (K, N), with a grid of 2 to 3 per axis
    (so several k steps), redrawn until a partial sum over k changes sign somewhere in the batch."""
    while True:
        bm, bn, bk = (int(b) for b in rng.choice([2, 4], size=3))
        batch = int(rng.integers(2, 4))
        m, n, k = (int(rng.integers(2, 4)) * b for b in (bm, bn, bk))
        xs = rng.normal(size=(batch, m, k)).astype(np.float32)
        w = rng.normal(size=(k, n)).astype(np.float32)
        if "partial_sums_cross_zero" in matmul_batch_labels(xs, w, (bm, bn, bk)):
            return xs, w, (bm, bn, bk)


def matmul_batch_labels(xs: np.ndarray, w: np.ndarray, blocks: tuple[int, int, int]) -> set[str]:
    """Every case any x of the batch holds with w (``matmul_labels``)."""
    return set().union(*(matmul_labels(x, w, blocks) for x in xs))


def judge_matmul_relu(got: dict, x: np.ndarray, w: np.ndarray, blocks: tuple[int, int, int],
                      what: str = "matmul_relu(x, w, bm, bn, bk)") -> None:
    if "error" in got:
        raise _raised(what, got, "matmul_relu must run as written, on float32 input, with Python int block sizes")
    failure = _host_failure(what, got)
    if failure:
        raise failure
    value = got.get("value")
    want = reference_matmul_relu(x, w)
    failure = _shape_failure(what, value, want.shape)
    if failure:
        raise failure
    v = value.astype(np.float64)
    bad = ~np.isclose(v, want, rtol=1e-4, atol=1e-4) | ~np.isfinite(v)
    if not bad.any():
        return
    nonfinite = int((~np.isfinite(v)).sum())
    like = ""
    if nonfinite:
        like = ("NaN: in interpret mode an output block starts as NaN, so a block that is never written stays NaN: "
                "an index_map that returns element offsets (i * bm) instead of block indices (i) writes other "
                "blocks, and an output not zeroed at the first k step (pl.when(pl.program_id(2) == 0)) adds into NaN")
    else:
        for diagnosis, mistake in _matmul_mistakes(x, w, blocks[2]).items():
            if np.allclose(v, mistake, rtol=1e-4, atol=1e-4):
                like = diagnosis
                break
    advice = like or ("grid step (i, j, k) adds x block (i, k) @ w block (k, j) into output block (i, j): zero it at "
                      "k == 0, add at every k, ReLU once at the last k")
    raise CheckFailed(f"{what} differs from relu(x @ w)",
                      measured=f"{int(bad.sum())} of {bad.size} values off ({nonfinite} not finite)",
                      expected="relu(x @ w) in float64 (rtol 1e-4, atol 1e-4)", hint=advice,
                      diagnosis=f"{what} differs from relu(x @ w)" + (f"; it looks like this mistake: {like}" if like
                                                                     else ""), advice=advice)


def expected_matmul_kernel(x_shape: tuple, w_shape: tuple, blocks: tuple[int, int, int]) -> dict:
    (m, k), n = x_shape, w_shape[1]
    bm, bn, bk = blocks
    return {"grid": [m // bm, n // bn, k // bk], "blocks": [[bm, bk], [bk, bn], [bm, bn]], "num_inputs": 2,
            "num_outputs": 1}


# --- both parts: the kernel the statement asks for --------------------------------------------------

def judge_kernel(facts: dict, want: dict, what: str, asked: str, layout: bool = True) -> None:
    """One ``pallas_call`` with exactly the asked grid, operands and block shapes, and no arithmetic
    outside it.  ``asked`` says the grid and blocks in words (no drawn value).  ``layout=False``
    leaves the grid and the block shapes out: they are judged once, by the layout check."""
    if "error" in facts:
        name, meaning = error_diagnosis(facts["error"])
        advice = "your function must trace under jax.jit (the grader runs the traced program): " + meaning
        raise CheckFailed(f"{what} could not be traced under jax.jit", measured=facts["error"],
                          expected="a jaxpr holding one pallas_call", hint=advice,
                          diagnosis=f"{what} could not be traced" + (f" ({name})" if name else ""), advice=advice)
    calls, outside = facts["calls"], facts["outside"]
    host = facts.get("host_callbacks") or {}
    if host:
        advice = ("compute with jnp on the kernel's blocks (x_ref[...], o_ref[...] = ...); a callback hands the block to "
                  "Python on the host, so the kernel itself computes nothing")
        raise CheckFailed(f"{what} calls back to the host: {', '.join(sorted(host))}",
                          measured=f"host callbacks: {host}", expected="none, in the kernel or around it", hint=advice,
                          diagnosis=f"{what} computes through a host callback ({', '.join(sorted(host))}) instead of "
                                    f"in its Pallas kernel", advice=advice)
    if len(calls) != 1:
        advice = (f"call pl.pallas_call exactly once, with {asked}" if calls else
                  f"the work must be a Pallas kernel: pl.pallas_call(kernel, grid=..., in_specs=..., out_specs=..., "
                  f"out_shape=..., interpret=True), with {asked}; a plain jnp version has no kernel at all")
        raise CheckFailed(f"{what} calls {len(calls)} Pallas kernels; exactly one is asked",
                          measured=f"{len(calls)} pallas_call(s)", expected="1 pallas_call", hint=advice,
                          diagnosis=f"{what}'s jaxpr holds {'no' if not calls else 'more than one'} pallas_call",
                          advice=advice)
    call = calls[0]
    got_grid, got_blocks = call["grid"], call["blocks"]
    if (call["num_inputs"], call["num_outputs"]) != (want["num_inputs"], want["num_outputs"]):
        advice = f"the kernel takes exactly the function's arrays as inputs and writes one output: {asked}"
        raise CheckFailed(f"{what}'s kernel has other operands than asked",
                          measured=f"{call['num_inputs']} input(s), {call['num_outputs']} output(s)",
                          expected=f"{want['num_inputs']} input(s), {want['num_outputs']} output", hint=advice,
                          diagnosis=f"{what}'s pallas_call has another number of inputs or outputs than asked",
                          advice=advice)
    if layout and (got_grid != want["grid"] or got_blocks != want["blocks"]):
        raise _layout_failure(what, asked, got_grid, got_blocks, want)
    extra = sorted(set(outside) - LAYOUT_PRIMITIVES)
    if extra:
        advice = ("do the whole computation inside the kernel, on its blocks; outside the pallas_call the function "
                  "only calls it")
        raise CheckFailed(f"{what} computes outside its kernel: {', '.join(extra)}",
                          measured=f"outside the pallas_call: {outside}", expected="no arithmetic outside the kernel",
                          hint=advice, diagnosis=f"{what} computes outside its Pallas kernel ({', '.join(extra)})",
                          advice=advice)


def judge_batched_kernel(facts: dict, want: dict, batch: int, what: str, asked: str) -> None:
    """``judge_kernel`` for the function under our ``jax.vmap``, without its grid and blocks: the
    batched numbers must come from one ``pallas_call`` with no arithmetic outside it (the statement's
    "exactly once" and "all their arithmetic inside the kernel" hold under jax.vmap too), but the
    grid's order and the block shapes are the layout check's alone, so one layout mistake costs
    that check, not the composition check as well."""
    judge_kernel(facts, want, what, asked, layout=False)


def _layout_failure(what: str, asked: str, grid: list, blocks: list, want: dict) -> CheckFailed:
    if all(g == 1 for g in grid) or (blocks and all(b == s for b, s in zip(blocks[-1], _whole(want)))):
        diagnosis = f"{what}'s kernel takes the whole array as one block: a grid of one step is not a tiled kernel"
    elif sorted(map(str, grid)) == sorted(map(str, want["grid"])) and grid != want["grid"]:
        diagnosis = (f"{what}'s grid has the asked sizes in another order: the row-block axis first, then the "
                     f"column-block axis, and the reduction (k) axis last")
    elif len(grid) != len(want["grid"]):
        diagnosis = (f"{what}'s grid has {len(grid)} axes where {len(want['grid'])} are asked"
                     + (": the k (reduction) axis must be tiled too, with blocks of bk" if len(want["grid"]) == 3
                        else ""))
    elif grid != want["grid"]:
        diagnosis = f"{what}'s grid has the wrong number of steps along some axis"
    else:
        diagnosis = f"{what}'s BlockSpecs have other block shapes than asked (check which size goes on which axis)"
    advice = f"ask for exactly {asked}"
    return CheckFailed(f"{what}'s grid or blocks differ from what was asked", measured=f"grid {grid}, blocks {blocks}",
                       expected=f"grid {want['grid']}, blocks {want['blocks']}", hint=advice,
                       diagnosis=diagnosis, advice=advice)


def _whole(want: dict) -> list:
    """The output's whole shape (the asked output block times the asked grid, per axis)."""
    out = want["blocks"][-1]
    grid = want["grid"]
    if len(grid) == 1:
        return [out[0] * grid[0], out[1]]
    return [out[0] * grid[0], out[1] * grid[1]]


SOFTMAX_ASKED = "grid (R // block_rows,) and BlockSpecs of shape (block_rows, C) for the input and the output"
MATMUL_ASKED = ("grid (M // bm, N // bn, K // bk) and BlockSpecs of shape (bm, bk) for x, (bk, bn) for w and "
                "(bm, bn) for the output")
