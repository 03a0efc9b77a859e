"""Probes for exercise 9 (lowering and export).

In the learner's sandbox:

``stats_in_source(ctx, source, fn_name, arg_specs)``
    Runs the learner's ``ir_stats`` on a function the learner has never seen: ``source``
    (written by the trusted test from the run's seed) is executed in a fresh namespace
    holding only ``jax``, ``jnp`` and ``lax`` (bound when this module was imported, before
    the learner's module), and ``ir_stats(fn, *args)`` gets ``jax.ShapeDtypeStruct``
    arguments built from ``arg_specs`` (``[[shape, dtype], ...]``).  Returns
    ``{"type": <name of the returned type>, "stats": {key: value} or None, "problems":
    [what is wrong with the returned value's form]}``; a count table comes back only when it
    maps ``str`` to exact ``int``.

``export_bytes(ctx, features)``
    Calls the learner's ``export_gelu(features)`` and serializes the ``Exported`` it
    returns (only the bytes leave the learner's process).

``answers(ctx)``
    ``{"answers": <what the learner's answers() returned>}``.

In the clean worker (the truth, no learner code):

``truth_stats(ctx, source, fn_name, arg_specs)``
    What ``ir_stats`` should return for that function, from the module's *structure*
    (``grader.xla_structure``: the MLIR walk and the HLO protos), plus the counts
    of the usual mistakes (every jaxpr equation at any depth, only ENTRY of the HLO, the
    whole optimized module) so the trusted side can name a mistake.

``run_serialized(ctx, blob, batches)``
    Deserializes the learner's export and reads it: avals, symbolic dimensions, platforms,
    the module's main signature, and ``call(x)`` at each of ``batches``.

``gelu_truth(ctx, source)``
    The answers to the reading questions, measured on ``gelu`` (its source) at f32[4, 8].
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as _export_mod
from jax import lax

from grader import ir
from grader import xla_structure as xs

_make_jaxpr = jax.make_jaxpr
_jit = jax.jit
_ShapeDtypeStruct = jax.ShapeDtypeStruct
_Exported = _export_mod.Exported
_device_put = jax.device_put
_asarray = np.asarray
_NAMESPACE = {"jax": jax, "jnp": jnp, "lax": lax}

STATS_KEYS = ("jaxpr_eqns", "stablehlo_ops", "hlo_opcodes", "optimized_entry_opcodes")
_MAIN_SIGNATURE = re.compile(r"func\.func\s+public\s+@main\((?P<args>[^)]*)\)")


def _function(source: str, fn_name: str):
    namespace = dict(_NAMESPACE)
    namespace["__name__"] = "ex09_unseen"
    exec(compile(source, "<grader-generated>", "exec"), namespace)  # source written by the trusted test
    return namespace[fn_name]


def _specs(arg_specs: list) -> list:
    return [_ShapeDtypeStruct(tuple(shape), dtype) for shape, dtype in arg_specs]


def _count_table(value, key: str, problems: list):
    """A mapping of str to int as a plain dict, or None (with the reason in ``problems``)."""
    if not isinstance(value, Mapping):
        problems.append(f"{key} is a {type(value).__name__}, not a dict")
        return None
    items = list(value.items())
    if not all(type(k) is str for k, _ in items):
        problems.append(f"{key} has keys that are not str ({sorted({type(k).__name__ for k, _ in items})})")
        return None
    if not all(type(v) is int for _, v in items):
        problems.append(f"{key} has counts that are not Python ints "
                        f"({sorted({type(v).__name__ for _, v in items if type(v) is not int})})")
        return None
    return dict(items)


def stats_in_source(ctx, source: str, fn_name: str, arg_specs: list) -> dict:
    fn = _function(source, fn_name)
    result = ctx.function("ir_stats")(fn, *_specs(arg_specs))
    out = {"type": type(result).__name__, "stats": None, "problems": []}
    if not isinstance(result, Mapping):
        return out
    stats, problems = {}, out["problems"]
    missing = [k for k in STATS_KEYS if k not in result]
    if missing:
        problems.append(f"missing keys {missing}")
    for key in STATS_KEYS:
        if key not in result:
            continue
        value = result[key]
        if key == "jaxpr_eqns":
            if type(value) is int:
                stats[key] = value
            else:
                problems.append(f"jaxpr_eqns is a {type(value).__name__}, not an int")
        else:
            table = _count_table(value, key, problems)
            if table is not None:
                stats[key] = table
    out["stats"] = stats
    return out


def truth_stats(ctx, source: str, fn_name: str, arg_specs: list) -> dict:
    fn = _function(source, fn_name)
    args = _specs(arg_specs)
    closed = _make_jaxpr(fn)(*args)
    lowered = _jit(fn).lower(*args)
    before = xs.hlo_module(lowered)
    compiled = lowered.compile()
    after = xs.optimized_module(compiled)
    after_root = set(xs.entry_names_after_root(compiled.as_text()))
    before_after_root = set(xs.names_after_root(lowered.as_text(dialect="hlo")))
    return {
        "jaxpr_eqns": len(closed.jaxpr.eqns),
        "stablehlo_ops": xs.stablehlo_op_counts(lowered),
        "hlo_opcodes": before.opcode_counts(),
        "optimized_entry_opcodes": after.opcode_counts(entry_only=True),
        # the counts of usual mistakes, for a diagnosis
        "mistakes": {
            "jaxpr_every_depth": sum(1 for _ in ir.walk_equations(closed)),
            "hlo_entry_only": before.opcode_counts(entry_only=True),
            "optimized_whole_module": after.opcode_counts(),
            "optimized_entry_but_fused": _entry_but_fused(after),
            "optimized_entry_to_root": ir.tally((i.opcode for i in after.entry().instructions
                                                    if i.name not in after_root)),
            "hlo_to_root": ir.tally(i.opcode for i in before.instructions() if i.name not in before_after_root),
        },
        # not a count: how many instructions the printed ENTRY holds after its ROOT line (a
        # coverage guard: the draw must show a reader that stops at ROOT)
        "entry_after_root": len(after_root),
        # likewise, every computation of the module before XLA's passes (hlo_opcode_counts' guard)
        "module_after_root": len(before_after_root),
    }


def _entry_but_fused(module) -> dict:
    """ENTRY's opcodes with each fusion replaced by what its fused computation holds."""
    counts: dict[str, int] = {}
    for inst in module.entry().instructions:
        inner = module.computation(inst.called_ids[0]).instructions if inst.opcode == "fusion" else (inst,)
        for i in inner:
            counts[i.opcode] = counts.get(i.opcode, 0) + 1
    return counts


MAX_EXPORT_BYTES = 1 << 20  # a serialized GELU is a few kilobytes


def export_bytes(ctx, features: int) -> dict:
    """The learner's ``export_gelu(features)``, serialized here (``Exported.serialize``):
    only the bytes leave the learner's process, and the clean worker judges the program they
    hold (``run_serialized``), so nothing about the object the learner returned -- a subclass,
    a replaced ``call`` or ``in_avals`` -- can stand in for a real export."""
    exported = ctx.function("export_gelu")(features)
    out = {"type": type(exported).__name__, "is_exported": type(exported) is _Exported}
    if not out["is_exported"]:
        return out
    try:
        blob = bytes(exported.serialize())
    except Exception as exc:  # e.g. an export of a host callback cannot be serialized
        out["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        return out
    if len(blob) > MAX_EXPORT_BYTES:
        out["error"] = f"the serialized export is {len(blob)} bytes; a GELU takes a few thousand"
        return out
    out["blob"] = np.frombuffer(blob, dtype=np.uint8).copy()
    return out


def run_serialized(ctx, blob, batches: list) -> dict:
    """(Clean worker.)  Deserialize the learner's export and read it: input and output avals
    (as strings, and which dimensions are symbolic), platforms, the main function's
    signature in its StableHLO module, and ``call(x)`` for each array of ``batches`` (or the
    error it raised)."""
    try:
        exported = _export_mod.deserialize(bytearray(_asarray(blob, dtype=np.uint8).tobytes()))
    except Exception as exc:
        return {"type": "bytes", "is_exported": True, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    out = {"type": type(exported).__name__, "is_exported": True}
    out["in_avals"] = [str(a) for a in exported.in_avals]
    out["out_avals"] = [str(a) for a in exported.out_avals]
    out["in_symbolic"] = [[type(d) is not int for d in a.shape] for a in exported.in_avals]
    out["out_symbolic"] = [[type(d) is not int for d in a.shape] for a in exported.out_avals]
    out["in_dtypes"] = [str(a.dtype) for a in exported.in_avals]
    out["platforms"] = [str(p) for p in exported.platforms]
    m = _MAIN_SIGNATURE.search(exported.mlir_module())
    out["main_args"] = m.group("args") if m else ""
    results = []
    for x in batches:
        try:
            y = _asarray(exported.call(_device_put(x)))
            results.append({"ok": True, "value": y.astype(np.float32) if y.dtype != np.float32 else y,
                            "dtype": str(y.dtype)})
        except Exception as exc:  # what the learner's export does at this batch size
            first = (str(exc).strip().splitlines() or [""])[0]  # not the grader's own locations after it
            results.append({"ok": False, "error": f"{type(exc).__name__}: {first[:300]}"})
    out["results"] = results
    return out


def answers(ctx) -> dict:
    return {"answers": ctx.function("answers")()}


def gelu_truth(ctx, source: str) -> dict:
    gelu = _function(source, "gelu")
    x = _ShapeDtypeStruct((4, 8), jnp.float32)
    lowered = _jit(gelu).lower(x)
    shlo = xs.stablehlo_op_counts(lowered)
    before = xs.hlo_module(lowered)
    after = xs.optimized_module(lowered.compile())

    def has_sqrt(names):
        return any(n.rsplit(".", 1)[-1] in ("sqrt", "rsqrt") for n in names)

    stages = [stage for stage, names in (("stablehlo", shlo), ("hlo", before.opcode_counts()),
                                         ("optimized_hlo", after.opcode_counts())) if has_sqrt(names)]
    erf = next(i for i in after.instructions() if i.opcode == "erf")
    return {
        "gelu_jaxpr_eqns": len(_make_jaxpr(gelu)(x).jaxpr.eqns),
        "gelu_stablehlo_ops": sum(shlo.values()),
        "erf_in_stablehlo": next(n for n in sorted(shlo) if n.rsplit(".", 1)[-1] == "erf"),
        "stages_with_sqrt": stages,
        "erf_operand_in_optimized": after.instruction(erf.operand_ids[0]).opcode,
        "optimized_fusion_kinds": sorted(i.fusion_kind for i in after.entry().instructions if i.opcode == "fusion"),
    }
