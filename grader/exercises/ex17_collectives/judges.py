"""Exercise 17 (predicting collectives; FSDP): the family of layouts, draws, references and
verdicts shared by the public and the hidden checks.  NumPy only, no JAX: the truth about a
layout is compiled live in the clean worker (``probes.truth_collectives``); the learner's
predictions run in the worker without JAX (``nojax_probes.predict``).

Feedback of a hidden check names the *kind* of layout that was mispredicted (the family is
public: 18 layouts, every one described in the statement), never the sizes of a drawn FSDP
problem nor which second mesh shape was drawn.
"""

from __future__ import annotations

import itertools

import numpy as np

from grader.feedback import CheckFailed
from grader.feedback import fail as _fail
from grader.formulas import run_formula
from grader.ir import collective_counts
from grader.jaxcompat import COLLECTIVE_OPCODES
from grader.layouts import describe_axes, has_layout, recognise
from grader.layouts import draw_mlp as draw_fsdp_problem

NAMES = ("x", "w1", "w2")
F32_BYTES = 4

# --- part A: the family of layouts ---------------------------------------------------------------

X_KINDS = {"batch": ("data", None), "features": ("data", "model")}
W_KINDS = {"replicated": (None, None), "column": (None, "model"), "row": ("model", None)}
X_WORDS = {"batch": "x: rows over 'data', columns whole", "features": "x: rows over 'data', columns over 'model'"}
W_WORDS = {"replicated": "replicated", "column": "column-split over 'model'", "row": "row-split over 'model'"}


def layout(x_kind: str, w1_kind: str, w2_kind: str) -> dict:
    return {"x": X_KINDS[x_kind], "w1": W_KINDS[w1_kind], "w2": W_KINDS[w2_kind]}


def kinds(lay: dict) -> tuple[str, str, str]:
    """(x kind, w1 kind, w2 kind) of a layout of the family."""
    x = next(k for k, v in X_KINDS.items() if tuple(v) == tuple(lay["x"]))
    w1 = next(k for k, v in W_KINDS.items() if tuple(v) == tuple(lay["w1"]))
    w2 = next(k for k, v in W_KINDS.items() if tuple(v) == tuple(lay["w2"]))
    return x, w1, w2


def family(x_kind: str) -> list[dict]:
    return [layout(x_kind, a, b) for a, b in itertools.product(W_KINDS, W_KINDS)]


def describe_layout(lay: dict) -> str:
    x, w1, w2 = kinds(lay)
    return f"{X_WORDS[x]}; w1 {W_WORDS[w1]}; w2 {W_WORDS[w2]}"


def spec_text(lay: dict) -> str:
    def p(axes):
        return "P(" + ", ".join("None" if a is None else repr(a) for a in axes) + ")"
    return ", ".join(f"{n}={p(lay[n])}" for n in NAMES)


def labels(lay: dict) -> set[str]:
    """Coverage categories of one layout: each weight's kind and the pair they make."""
    _, w1, w2 = kinds(lay)
    return {f"w1 {w1}", f"w2 {w2}", f"{w1}->{w2}"}


#: layouts of the public check, each showing one rule (their answers are printed when wrong)
PUBLIC_LAYOUTS = [layout("batch", "column", "row"), layout("batch", "row", "row"), layout("batch", "row", "replicated"),
                  layout("batch", "column", "replicated"), layout("batch", "replicated", "row"),
                  layout("features", "row", "column"), layout("features", "column", "column")]

WEIGHT_KINDS = {f"w{i} {k}" for i in (1, 2) for k in W_KINDS}
PAIRS = {f"{a}->{b}" for a in W_KINDS for b in W_KINDS}
#: what each hidden check's draw must hold, whatever the seed: every layout its kind of x has.
#: Six of the nine, drawn to hold the pairs the statement calls tricky, let a predictor with one
#: rule wrong for a pair outside that list (w1 by rows beside a whole w2: slicing x and
#: all-reducing h where XLA gathers w1) pass at about a third of the seeds; the nine cost
#: three more compiles in the clean worker, and no rule is left to luck.
REQUIRED = {"batch": WEIGHT_KINDS | PAIRS, "features": WEIGHT_KINDS | PAIRS}
DRAWN = 9  # layouts per hidden check: all nine its kind of x has, in an order drawn from the seed


def draw_layouts(rng, x_kind: str) -> list[dict]:
    """The ``DRAWN`` layouts with x of ``x_kind``, in an order drawn from ``rng``, holding every
    category of ``REQUIRED`` (checked: a family and a count that could miss one fail here)."""
    pool = family(x_kind)
    pick = [pool[int(i)] for i in rng.permutation(len(pool))[:DRAWN]]
    if not REQUIRED[x_kind] <= set().union(*(labels(lay) for lay in pick)):
        raise RuntimeError("the drawn layouts miss a required one")  # pragma: no cover - DRAWN is the family
    return pick


def draw_labels(layouts: list[dict]) -> set[str]:
    return set().union(*(labels(lay) for lay in layouts))


def _listing(counts: dict) -> str:
    return ", ".join(f"{op} x{n}" for op, n in sorted(counts.items())) or "no collective"


#: what a prediction that reached for JAX is told (``grader.formulas``)
NO_JAX_HINT = ("predict from the specs alone, in plain Python: no jax.jit, lower, compile, make_jaxpr or collectives_of "
               "inside predict_collectives (use collectives_of yourself, to test your rules)")
NO_JAX_IMPORT = ("keep module-level code to imports, constants and definitions: compiling layouts at import (a table "
                 "of collectives_of answers) is measuring, not predicting; compile them yourself, outside the file")


def predictions(box, layouts: list) -> list:
    """The learner's answers for ``layouts``, from ``predict_collectives`` run in the worker
    where JAX does not exist (the ``without_jax`` fixture, ``nojax_probes.predict``): at import
    and at call alike, nothing can compile or trace there, so a table measured at import
    cannot be built.  Reaching for JAX fails the check with what it used."""
    return run_formula(lambda: box.probe("ex17_collectives:predict", layouts), "predict_collectives",
                       hint=NO_JAX_HINT, advice=NO_JAX_HINT, import_advice=NO_JAX_IMPORT)


def judge_predictions(predictions: list, truths: list, layouts: list, *, hidden: bool) -> None:
    """``predict_collectives`` answered each layout with a dict of XLA opcodes, and every
    answer equals what the compiled program holds (that it ran without JAX is
    ``predictions``'s)."""
    wrong = []
    for lay, got, want in zip(layouts, predictions, truths):
        where = describe_layout(lay)
        if "error" in got:
            advice = "predict_collectives receives a dict of PartitionSpecs (two entries each) and returns a dict"
            raise CheckFailed(f"predict_collectives raised {got['error']} for the layout {spec_text(lay)}",
                              measured=got["error"], expected="a dict {opcode: count}", hint=advice,
                              diagnosis=f"predict_collectives raised an error for the layout ({where})", advice=advice)
        if "form" in got:
            advice = "return a dict mapping XLA opcode names (str) to counts (int), e.g. {'all-reduce': 1}"
            raise CheckFailed(f"predict_collectives returned {got['form']} for the layout {spec_text(lay)}",
                              measured=got["form"], expected="a dict {opcode: count}", hint=advice,
                              diagnosis=f"predict_collectives returned {got['form']}, not a dict of counts", advice=advice)
        unknown = sorted(set(got["counts"]) - set(COLLECTIVE_OPCODES))
        if unknown:
            advice = ("name collectives as XLA's optimized HLO spells its opcodes: "
                      + ", ".join(repr(op) for op in COLLECTIVE_OPCODES))
            raise CheckFailed(f"predict_collectives names collectives XLA does not have: {unknown}",
                              measured=f"keys {unknown}", expected="keys among " + ", ".join(COLLECTIVE_OPCODES),
                              hint=advice, diagnosis=f"predict_collectives names opcodes XLA does not have: {unknown}",
                              advice=advice)
        if got["counts"] != want:
            wrong.append((lay, got["counts"], want))
    if not wrong:
        return
    measured = "\n".join(f"{spec_text(lay)}: predicted {_listing(g)}; compiled: {_listing(w)}" for lay, g, w in wrong)
    layouts_text = "; ".join(f"[{describe_layout(lay)}]" for lay, _, _ in wrong)
    advice = ("compile those layouts yourself with collectives_of(specs), read the ENTRY of the optimized HLO, and "
              "fix the rule your prediction used for them")
    if hidden:
        raise CheckFailed(f"predict_collectives is wrong on {len(wrong)} of {len(layouts)} layouts",
                          measured=measured, expected="the collectives of the program compiled live",
                          hint=advice, diagnosis=f"predict_collectives is wrong on {len(wrong)} of {len(layouts)} "
                                                 f"layouts of this check: {layouts_text}", advice=advice)
    raise CheckFailed(f"predict_collectives is wrong on {len(wrong)} of {len(layouts)} layouts", measured=measured,
                      expected="the collectives the compiled program holds (shown after 'compiled:')", hint=advice)


# --- part B: FSDP ----------------------------------------------------------------------------------

def mlp_reference(x, w1, w2):
    return np.maximum(x.astype(np.float64) @ w1, 0.0) @ w2


def where(mesh_shape) -> str:
    return f"on the {mesh_shape[0]}x{mesh_shape[1]} mesh"


def expect_ran(result: dict, mesh_shape, label: str) -> None:
    if "error" in result:
        advice = ("fsdp_specs() returns a PartitionSpec per input; fsdp_mlp(mesh, x, w1, w2) must trace under "
                  "jax.jit and return one array")
        _fail(f"{where(mesh_shape)}: {result['error']}", measured=result["error"],
              expected="fsdp_mlp compiled and ran on inputs placed with fsdp_specs()",
              diagnosis=f"{label}: {result['error'].split(':')[0]}", advice=advice)


def judge_fsdp_numerics(result: dict, arrays, mesh_shape, label: str) -> None:
    expect_ran(result, mesh_shape, label)
    x, w1, w2 = arrays
    out, want = result["output"], mlp_reference(x, w1, w2)
    advice = "compute relu(x @ w1) @ w2: gathering a weight must not change its values"
    if out.shape != want.shape or out.dtype != np.float32:
        _fail(f"{where(mesh_shape)}: fsdp_mlp returned {out.dtype}{list(out.shape)}",
              measured=f"{out.dtype}{list(out.shape)}", expected=f"float32{list(want.shape)}",
              diagnosis=f"{label}: fsdp_mlp does not return a float32 array of the output's shape", advice=advice)
    if not np.all(np.isfinite(out)) or not np.allclose(out, want, rtol=1e-4, atol=1e-4):
        _fail(f"{where(mesh_shape)}: fsdp_mlp does not match relu(x @ w1) @ w2",
              measured=f"largest difference {float(np.nanmax(np.abs(out - want))):.3g}",
              expected="agreement within rtol=1e-4, atol=1e-4",
              diagnosis=f"{label}: fsdp_mlp gives other numbers than relu(x @ w1) @ w2", advice=advice)


FSDP_X = ("data", None)
FSDP_WEIGHTS = (("data", None), (None, "data"))


def judge_fsdp_bytes(result: dict, arrays, mesh_shape, label: str) -> None:
    """x's rows and each weight split over 'data' (and nothing else), by the input shardings and
    by the bytes XLA hands each device."""
    expect_ran(result, mesh_shape, label)
    off = []
    for name, record in zip(NAMES, result["inputs"]):
        wanted = (FSDP_X,) if name == "x" else FSDP_WEIGHTS
        if not any(has_layout(record, axes, result) for axes in wanted):
            off.append(f"{name} has {recognise(record, result, wanted[0])}")
    d = mesh_shape[0]
    want = F32_BYTES * sum(a.size for a in arrays) // d
    got = result["argument_bytes"]
    if off or got != want:
        advice = ("x: P('data', None); each weight split over 'data' alone, by rows or by columns (P('data', None) "
                  "or P(None, 'data')), so that every device stores 1/d of it")
        what = "; ".join(off) or f"each device receives {got / want:.2f}x the bytes of its FSDP shards"
        _fail(f"{where(mesh_shape)}: the inputs are not stored the FSDP way: {what}",
              measured=f"{what}; argument_size_in_bytes {got}; specs {result.get('specs')}",
              expected=f"{want} bytes per device: 1/{d} of x, of w1 and of w2",
              diagnosis=f"{label}: the inputs are not stored the FSDP way ({'; '.join(off) or 'per-device bytes differ from 1/d of each input'})",
              advice=advice)


def judge_fsdp_gathers(result: dict, mesh_shape, label: str) -> None:
    """Each weight is gathered with ``with_sharding_constraint`` (the traced program applies one to
    w1 and one to w2 and a matrix product uses what it gives, ``result["constrained"]``: a
    constraint whose result is thrown away gathers nothing), and the compiled program communicates by
    all-gathers only (none where 'data' has one device).  A gather written another way (an
    all_gather in a shard_map, say) compiles to the same all-gathers: the statement asks for the
    constraint, which tells XLA what to do rather than doing it by hand."""
    expect_ran(result, mesh_shape, label)
    foreign = [sizes for sizes in result.get("constraint_meshes", []) if tuple(sizes) != tuple(mesh_shape)]
    if foreign:
        _fail(f"{where(mesh_shape)}: fsdp_mlp constrains with a mesh of its own ({foreign[0]}), not the mesh it is "
              f"given", measured=f"with_sharding_constraint meshes: {result.get('constraint_meshes')}",
              expected=f"every constraint on the given mesh {list(mesh_shape)}",
              diagnosis=f"{label}: a with_sharding_constraint in fsdp_mlp names a mesh fsdp_mlp built itself: the "
                        "statement asks for the mesh passed in (the grader passes meshes of other shapes too)",
              advice="build every NamedSharding inside fsdp_mlp from its `mesh` argument: "
                     "NamedSharding(mesh, P())")
    constrained = result.get("constrained") or []
    missing = [n for n in ("w1", "w2") if n not in constrained]
    if missing:
        advice = ("inside fsdp_mlp, gather each weight where it is used with "
                  "w = jax.lax.with_sharding_constraint(w, NamedSharding(mesh, P())): the constraint tells XLA the "
                  "layout you want, and XLA inserts the all-gather")
        _fail(f"{where(mesh_shape)}: fsdp_mlp does not gather {' and '.join(missing)} with with_sharding_constraint",
              measured=f"with_sharding_constraint applied to: {', '.join(constrained) or 'no input'}",
              expected="a with_sharding_constraint on w1 and one on w2, each result used by a matrix product",
              diagnosis=f"{label}: fsdp_mlp's traced program applies no with_sharding_constraint to "
                        f"{' and '.join(missing)} whose result the layer's matrix product uses: the statement asks "
                        "for the weights to be gathered that way (a constraint whose result is not used does nothing)",
              advice=advice)
    found = {op: n for op, n in collective_counts(result["hlo"]).items() if n}
    d = mesh_shape[0]
    ok = (set(found) == {"all-gather"}) if d > 1 else not found
    if ok:
        return
    listing = _listing(found)
    advice = ("gather each weight before it is used: w = jax.lax.with_sharding_constraint(w, NamedSharding(mesh, P())) "
              "inside fsdp_mlp; then every matmul is local to the device's rows of x")
    expected = ("all-gathers (the weights, gathered before use) and no other collective" if d > 1 else
                "no collective ('data' has one device: there is nothing to gather)")
    _fail(f"{where(mesh_shape)}: the compiled FSDP forward pass holds {listing}",
          measured=f"collectives in ENTRY: {listing}", expected=expected,
          diagnosis=f"{label}: the compiled forward pass holds {listing}; expected {expected}", advice=advice)


def judge_fsdp_output(result: dict, mesh_shape, label: str) -> None:
    expect_ran(result, mesh_shape, label)
    record = result["output_sharding"]
    if has_layout(record, FSDP_X, result):
        return
    what = recognise(record, result, FSDP_X)
    advice = ("keep x's rows over 'data' and gather only the weights: the output then comes out P('data', None); "
              "do not constrain it to anything else")
    _fail(f"{where(mesh_shape)}: the output has {what}", measured=f"output: {record['text']}",
          expected=f"output: {describe_axes(FSDP_X)}",
          diagnosis=f"{label}: the output has {what}, not rows split over 'data' and columns whole", advice=advice)

