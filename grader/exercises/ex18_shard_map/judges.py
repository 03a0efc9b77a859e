"""Exercise 18 (shard_map: collectives by hand): draws, float64 references and verdicts shared by
the public and the hidden checks.  NumPy only, no JAX.

A hidden check's feedback names the part, the mesh ("on the 2x4 mesh" or "on the second mesh
shape", never its drawn size) and what was found (the collectives by opcode, how many
collective-permutes against how many the ring needs, in words, whether each is a one-step ring
shift, which shard_map turned check_vma off), never a drawn size or value.
"""

from __future__ import annotations

import numpy as np

from grader.feedback import CheckFailed
from grader.feedback import fail as _fail
from grader.ir import collective_counts, collective_permute_pairs
from grader.layouts import draw_mlp, has_layout, recognise


def where(mesh_shape) -> str:
    return f"on the {mesh_shape[0]}x{mesh_shape[1]} mesh"


def _listing(found: dict) -> str:
    return ", ".join(f"{op} x{n}" for op, n in sorted(found.items())) or "no collective"


def collectives(result: dict) -> dict:
    return {op: n for op, n in collective_counts(result["hlo"]).items() if n}


def expect_ran(result: dict, what: str, mesh_shape, label: str, advice: str) -> None:
    if "error" in result:
        step = result["error"].split(":")[0]
        _fail(f"{where(mesh_shape)}: {what} failed while {result['error']}", measured=result["error"],
              expected=f"{what} traced, compiled and ran", diagnosis=f"{label}: {what} failed while {step}",
              advice=advice)


# --- references, float64 ------------------------------------------------------------------------

def mlp_reference(x, w1, w2):
    return np.maximum(x.astype(np.float64) @ w1, 0.0) @ w2


def loss_and_grads_reference(params: dict, x, y):
    """loss_fn's value and gradient on the whole batch, by hand: mean((relu(x w1) w2 - y)^2)."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    w1, w2 = params["w1"].astype(np.float64), params["w2"].astype(np.float64)
    pre = x @ w1
    h = np.maximum(pre, 0.0)
    r = h @ w2 - y
    g = 2.0 * r / r.size
    return float(np.mean(r ** 2)), {"w1": x.T @ ((g @ w2.T) * (pre > 0)), "w2": h.T @ g}


# --- by hand: the collective and the work inside the shard_map ----------------------------------------

MATMUL = "dot_general"


def _expanded(result: dict) -> bool:
    """Whether a value larger than every input and output is made outside every shard_map
    (``ir.largest_outside_shard_maps``): work done in global view, however spelled."""
    largest = result.get("largest_outside") or {}
    return int(largest.get("elements", 0)) > int(largest.get("io", 0))


def by_hand_fault(result: dict, axis: str, collective: str) -> str | None:
    """What keeps the work from being done by hand, in words, or None: in the jaxpr of the very trace
    that was compiled and run (``probes._compiled``), some shard_map's body must sum over ``axis`` (a
    psum or pmean) and hold the matmuls, and no matmul may be left outside every shard_map."""
    maps = result.get("shard_maps") or []
    outside = int((result.get("outside_shard_maps") or {}).get(MATMUL, 0))
    summing = [m for m in maps if axis in m.get("sums_over", ())]
    working = [m for m in summing if m.get("primitives", {}).get(MATMUL)]
    expanded = _expanded(result)
    if working and not outside and not expanded:
        return None
    if not maps:
        return "no shard_map"
    faults = []
    if not summing:
        faults.append(f"no {collective} over '{axis}' inside any shard_map")
    elif not working:
        faults.append(f"the shard_map that sums over '{axis}' holds no matmul")
    if outside:
        faults.append(f"{outside} matmul{'s' if outside > 1 else ''} outside every shard_map")
    if expanded:
        largest = result["largest_outside"]
        faults.append(f"a value of {largest['elements']} elements ({largest.get('primitive', '?')}) made outside "
                      f"every shard_map, larger than any input or output ({largest['io']}): work done in global "
                      f"view, a matmul spelled as a product and a sum")
    return ", and ".join(faults)


def structural_fault(result: dict, axis: str, collective: str) -> str | None:
    """The fault that makes the compiled collectives meaningless, if any: no shard_map at all, or a matmul
    left outside every shard_map.  Then XLA, not the learner, decides what to insert -- on a mesh whose
    axis has size 1 nothing at all -- so the collective count (and any advice on in_specs) misleads."""
    outside = int((result.get("outside_shard_maps") or {}).get(MATMUL, 0)) or _expanded(result)
    if "error" in result or not (outside or not result.get("shard_maps")):
        return None
    return by_hand_fault(result, axis, collective)


def judge_by_hand(result: dict, name: str, axis: str, collective: str, mesh_shape, label: str, advice: str,
                  compiled: str = "") -> None:
    """The statement's skill is the collective written by hand (``by_hand_fault``).  Plain jnp outside a
    shard_map that does nothing (or half the work) compiles to the same all-reduces -- XLA inserts them
    -- and the compiled program alone cannot tell.  ``compiled``: what the compiled program holds, when
    that is why this is asked (the collective count was wrong too)."""
    expect_ran(result, name, mesh_shape, label, advice)
    found = by_hand_fault(result, axis, collective)
    if found is None:
        return
    maps = result.get("shard_maps") or []
    also = f" (and the compiled program holds {compiled})" if compiled else ""
    _fail(f"{where(mesh_shape)}: {name} does not do its work by hand: {found}{also}",
          measured=f"{found}; shard_maps: " + "; ".join(
              f"sums over {m.get('sums_over') or 'nothing'}, {m.get('primitives', {}).get(MATMUL, 0)} matmul(s)"
              for m in maps) + (f"; compiled: {compiled}" if compiled else ""),
          expected=f"the matmuls and a {collective} over '{axis}' inside jax.shard_map, no matmul outside it",
          diagnosis=f"{label}: in {name}'s traced program, {found}{also}: XLA may insert the same all-reduce for "
                    f"plain jnp outside a shard_map, but this part asks for the {collective} written by hand, per "
                    f"device",
          advice=advice)


#: How much more matrix-product work than the reference solution's one device may do, per device:
#: an honest step that computes the loss twice (value, then gradient) does about 1.4x; one that
#: gathers the batch over 'data' (or the weights over 'model') does d x (m x) -- 2x at least on
#: the meshes the checks use for it.
WORK_FACTOR = 1.6
WORK_ADVICE = {
    "megatron_mlp": ("inside the shard_map keep each device on its own blocks: x's rows for its 'data' index, its "
                     "columns of w1 and rows of w2; relu(x @ w1) @ w2 there is that device's share of y, and the one "
                     "psum over 'model' adds the shares up. Gathering the weights first (with all_gather, or a psum "
                     "of zero-padded blocks) makes every device compute the whole layer"),
    "data_parallel_grads": ("inside the shard_map keep each device on its own rows of x and y: the gradient of its "
                            "rows' loss, then one pmean over 'data'. Gathering the batch first (with all_gather, or a "
                            "psum of zero-padded blocks) makes every device compute the whole batch's gradient"),
}


def judge_device_work(result: dict, reference_work: dict, name: str, mesh_shape, label: str) -> None:
    """What one device computes is its own share: the matrix-product flops in the shard_map bodies
    of the traced program (``ir.shard_map_matmul_flops``, loops counted by their trips) at most
    ``WORK_FACTOR`` times what the reference solution's device does on the same mesh and arrays
    (``reference_work``, measured live).  A device that gathers the batch or the weights -- by an
    all-gather, or by a psum of zero-padded blocks, which compiles to the all-reduce the collective
    check allows -- does the work of several devices.  A product inside a ``while`` loop, whose trip
    count the program does not state, cannot be measured: it fails too, saying so."""
    expect_ran(result, name, mesh_shape, label, WORK_ADVICE[name])
    work = result.get("device_work") or {}
    if int(work.get("in_while", 0)):
        _fail(f"{where(mesh_shape)}: {name} multiplies matrices inside a while loop",
              measured=f"{int(work['in_while'])} matmul(s) inside a lax.while_loop in the shard_map",
              expected="the matmuls outside while loops (a Python loop, or lax.fori_loop with Python bounds, is "
                       "fine): the work one device does is read from the program",
              diagnosis=f"{label}: {name}'s shard_map multiplies matrices inside a while loop, whose trip count the "
                        f"program does not state, so the work one device does cannot be read",
              advice=WORK_ADVICE[name])
    mine, theirs = int(work.get("flops", 0)), int(reference_work.get("flops", 0))
    if theirs > 0 and mine > WORK_FACTOR * theirs:
        _fail(f"{where(mesh_shape)}: every device of {name} does {mine / theirs:.1f}x the work of its own share",
              measured=f"matrix-product flops per device: {mine / theirs:.2f}x the reference solution's",
              expected=f"at most {WORK_FACTOR}x: each device works on its own blocks",
              diagnosis=f"{label}: one device of {name} multiplies {mine / theirs:.1f}x as much as the reference "
                        f"solution's: it works on more than its own blocks (the batch or the weights gathered)",
              advice=WORK_ADVICE[name])


# --- part A: the Megatron MLP with an explicit psum --------------------------------------------------

MEGATRON_ADVICE = ("inside jax.shard_map each device holds x's rows for its 'data' index and its hidden units of w1 "
                   "and w2; relu(x @ w1) @ w2 there is a partial sum of y: psum it over 'model' and return it with "
                   "out_specs P('data', None)")


def judge_megatron_numerics(result, arrays, mesh_shape, label) -> None:
    expect_ran(result, "megatron_mlp", mesh_shape, label, MEGATRON_ADVICE)
    out, want = result["output"], mlp_reference(*arrays)
    if out.shape != want.shape or not np.all(np.isfinite(out)) or not np.allclose(out, want, rtol=1e-4, atol=1e-4):
        measured = (f"shape {list(out.shape)}" if out.shape != want.shape else
                    f"largest difference {float(np.nanmax(np.abs(out - want))):.3g}")
        _fail(f"{where(mesh_shape)}: megatron_mlp does not equal relu(x @ w1) @ w2", measured=measured,
              expected=f"shape {list(want.shape)}, within rtol=1e-4, atol=1e-4",
              diagnosis=f"{label}: megatron_mlp gives other numbers (or another shape) than relu(x @ w1) @ w2",
              advice=MEGATRON_ADVICE)


def judge_megatron_collectives(result, mesh_shape, label) -> None:
    expect_ran(result, "megatron_mlp", mesh_shape, label, MEGATRON_ADVICE)
    found = collectives(result)
    if found != {"all-reduce": 1}:
        listing = _listing(found)
        if structural_fault(result, "model", "psum"):  # XLA chose the collectives: name the cause, not in_specs
            judge_by_hand(result, "megatron_mlp", "model", "psum", mesh_shape, label, MEGATRON_ADVICE,
                          compiled=listing)
        advice = ("give shard_map the inputs' own layouts as in_specs (x P('data', None), w1 P(None, 'model'), w2 "
                  "P('model', None)) so nothing is moved before the call, and sum once, with jax.lax.psum over 'model'")
        _fail(f"{where(mesh_shape)}: megatron_mlp compiles to {listing}", measured=f"collectives in ENTRY: {listing}",
              expected="exactly one all-reduce and no other collective",
              diagnosis=f"{label}: the compiled megatron_mlp holds {listing}; expected exactly one all-reduce",
              advice=advice)
    record = result["output_sharding"]
    if not has_layout(record, ("data", None), result):
        what = recognise(record, result, ("data", None))
        _fail(f"{where(mesh_shape)}: megatron_mlp's output has {what}", measured=record["text"],
              expected="rows split over 'data', columns whole",
              diagnosis=f"{label}: megatron_mlp's output has {what}, not rows over 'data' and columns whole",
              advice="psum (not psum_scatter) over 'model', and out_specs P('data', None)")
    judge_by_hand(result, "megatron_mlp", "model", "psum", mesh_shape, label, MEGATRON_ADVICE)


# --- part B: a ring all-reduce ------------------------------------------------------------------------

RING_ADVICE = ("m = jax.lax.axis_size('model'); a Python loop of m - 1 steps, each a jax.lax.ppermute of the block "
               "you received last to the next device of the ring, (j, (j + 1) % m), added to a running total")


def judge_ring_numerics(result, x, mesh_shape, label) -> None:
    expect_ran(result, "ring_allreduce", mesh_shape, label, RING_ADVICE)
    out = result["output"]
    want = np.tile(x.astype(np.float64).sum(axis=0, keepdims=True), (x.shape[0], 1))
    if out.shape != want.shape or not np.all(np.isfinite(out)) or not np.allclose(out, want, rtol=1e-5, atol=1e-5):
        measured = (f"shape {list(out.shape)}" if out.shape != want.shape else
                    f"largest difference {float(np.nanmax(np.abs(out - want))):.3g}")
        _fail(f"{where(mesh_shape)}: ring_allreduce does not leave every device with the sum of all blocks",
              measured=measured, expected="every block equal to the sum of the blocks over 'model'",
              diagnosis=f"{label}: after ring_allreduce some device does not hold the sum of every device's block "
                        f"(count your steps: each block must be added exactly once)", advice=RING_ADVICE)


def ring_shifts(result) -> tuple[set, set]:
    """The partition pairs of a one-step shift forward and backward along 'model', in every row of the mesh."""
    d, m = result["mesh"]["shape"]
    forward = {(i * m + j, i * m + (j + 1) % m) for i in range(d) for j in range(m)}
    return forward, {(b, a) for a, b in forward}


def judge_ring_collectives(result, mesh_shape, label) -> None:
    expect_ran(result, "ring_allreduce", mesh_shape, label, RING_ADVICE)
    m = mesh_shape[1]
    found = collectives(result)
    other = {op: n for op, n in found.items() if op != "collective-permute"}
    permutes = found.get("collective-permute", 0)
    if other or permutes != m - 1:
        listing = _listing(found)
        if other:
            words = "a collective other than collective-permute"
        elif permutes == 0 and "while" in result["hlo"]:
            words = "no collective-permute in ENTRY (they sit inside a loop: write the steps as a Python loop)"
        else:
            words = f"{'more' if permutes > m - 1 else 'fewer'} collective-permutes than the ring's m - 1 steps"
        _fail(f"{where(mesh_shape)}: ring_allreduce compiles to {listing}", measured=f"collectives in ENTRY: {listing}",
              expected=f"{m - 1} collective-permute(s) and nothing else",
              diagnosis=f"{label}: the compiled ring holds {words}", advice=RING_ADVICE)
    shifts = ring_shifts(result)
    for pairs in collective_permute_pairs(result["hlo"]):
        if set(pairs) not in shifts:
            _fail(f"{where(mesh_shape)}: a collective-permute of ring_allreduce is not a one-step ring shift",
                  measured=f"source_target_pairs {sorted(pairs)}", expected=f"{sorted(shifts[0])} (or reversed)",
                  diagnosis=f"{label}: some step of ring_allreduce sends a block further than the next device "
                            f"of the ring (or not around the whole ring)", advice=RING_ADVICE)


# --- part C: a data-parallel gradient -------------------------------------------------------------------

DP_ADVICE = ("with check_vma on, jax.grad of a function of replicated params and this device's rows already sums "
             "over 'data'; so take the mean over 'data' on the loss, inside the function you differentiate: "
             "jax.value_and_grad(lambda p: jax.lax.pmean(loss_fn(p, x, y), 'data'))(params)")


def judge_dp_numerics(result, problem, mesh_shape, label) -> None:
    expect_ran(result, "data_parallel_grads", mesh_shape, label, DP_ADVICE)
    params, x, y = problem
    loss, grads = loss_and_grads_reference(params, x, y)
    got_loss, got = result["loss"], result["grads"]
    if got_loss.shape != () or not np.isfinite(got_loss) or not np.isclose(got_loss, loss, rtol=1e-5, atol=1e-6):
        ratio = float(got_loss) / loss if got_loss.shape == () and loss else float("nan")
        _fail(f"{where(mesh_shape)}: data_parallel_grads' loss is not the full-batch loss",
              measured=f"loss {got_loss!r} ({ratio:.3g}x the full batch's)", expected=f"{loss:.6g}",
              diagnosis=f"{label}: the loss is not loss_fn on the whole batch (a mean over 'data' of the devices' "
                        f"losses)", advice=DP_ADVICE)
    if sorted(got) != sorted(grads):
        _fail(f"{where(mesh_shape)}: the gradients have keys {sorted(got)}", measured=f"keys {sorted(got)}",
              expected=f"keys {sorted(grads)}, as params",
              diagnosis=f"{label}: the gradients are not a dict shaped like params", advice=DP_ADVICE)
    for name, want in grads.items():
        g = got[name]
        if g.shape != want.shape or not np.all(np.isfinite(g)) or not np.allclose(g, want, rtol=1e-4, atol=1e-5):
            scale = float(np.sum(g * want) / np.sum(want * want)) if g.shape == want.shape else float("nan")
            _fail(f"{where(mesh_shape)}: the gradient of {name} is not the full-batch gradient",
                  measured=f"{name}: {scale:.3g}x the full-batch gradient (least squares), "
                           f"largest difference {float(np.nanmax(np.abs(g - want))) if g.shape == want.shape else 'n/a'}",
                  expected="the full-batch gradient within rtol=1e-4, atol=1e-5",
                  diagnosis=f"{label}: the gradient of {name} is not the gradient of the full-batch loss"
                            + (" (it is a multiple of it: the mean over 'data' is taken in the wrong place)"
                               if np.isfinite(scale) and abs(scale - 1) > 0.05 and
                               np.allclose(g, scale * want, rtol=1e-3, atol=1e-5) else ""),
                  advice=DP_ADVICE)


def judge_dp_collectives(result, mesh_shape, label) -> None:
    expect_ran(result, "data_parallel_grads", mesh_shape, label, DP_ADVICE)
    found = collectives(result)
    if set(found) != {"all-reduce"}:
        listing = _listing(found)
        if structural_fault(result, "data", "pmean"):  # XLA chose the collectives: name the cause
            judge_by_hand(result, "data_parallel_grads", "data", "pmean", mesh_shape, label, DP_ADVICE,
                          compiled=listing)
        _fail(f"{where(mesh_shape)}: data_parallel_grads compiles to {listing}", measured=f"collectives in ENTRY: {listing}",
              expected="all-reduces only (the mean over 'data'), at least one",
              diagnosis=f"{label}: the compiled data-parallel step holds {listing}; data parallelism keeps each "
                        f"device's rows where they are and all-reduces only the loss and the gradients",
              advice="give shard_map x and y as P('data', None) and never gather them: each device differentiates "
                     "its own rows, and one pmean over 'data' combines the results")
    judge_by_hand(result, "data_parallel_grads", "data", "pmean", mesh_shape, label, DP_ADVICE)


# --- every part: check_vma left on ---------------------------------------------------------------------

def judge_check_vma(results: dict, mesh_shape, label) -> None:
    """``results``: {function name: its probe result}; each traced function holds a shard_map, all with
    check_vma on."""
    for name, result in results.items():
        expect_ran(result, name, mesh_shape, label, "fix the function first")
        maps = result["shard_maps"]
        if not maps:
            _fail(f"{where(mesh_shape)}: {name} holds no shard_map", measured="no shard_map in its jaxpr",
                  expected="jax.shard_map with check_vma on",
                  diagnosis=f"{label}: {name} does not use jax.shard_map", advice="write it with jax.shard_map")
        if not all(m["check_vma"] for m in maps):
            _fail(f"{where(mesh_shape)}: {name} turns check_vma off", measured=str(maps),
                  expected="check_vma=True on every shard_map (the default)",
                  diagnosis=f"{label}: a shard_map in {name} runs with check_vma=False",
                  advice="leave check_vma at its default (True): it is what tells you that a value you return as "
                         "replicated is not, and it changes what grad computes; fix the program it complains about")


# --- draws ----------------------------------------------------------------------------------------------

def draw_ring(rng, m: int):
    return rng.normal(size=(m, int(rng.integers(3, 13)))).astype(np.float32)


def draw_dp(rng):
    x, w1, w2 = draw_mlp(rng)
    y = rng.normal(size=(x.shape[0], w2.shape[1])).astype(np.float32)
    return {"w1": w1, "w2": w2}, x, y
