"""Probes for exercise 10 (reading fusion and simplification).

In the clean worker (the truth, no learner code):

The trusted side (``grader.exercises.ex10_fusion.judges``) owns the data these probes use -- the
compile options of each pipeline, the elementwise opcodes, the rewrite cases and their
rules -- and passes it with each request.

``compile_module(ctx, source, fn_name, arg_specs, compiler_options, elementwise)``
    Compiles the function ``source`` defines (written by the trusted test from the run's
    seed; ``jax``, ``jnp`` and ``lax`` in scope) for ``arg_specs`` (``[[shape, dtype], ...]``)
    with ``lowered.compile(compiler_options=...)``, and returns its optimized HLO text together with what the
    module's *structure* (its ``HloModuleProto``, ``grader.xla_structure``) says:
    ``fusions`` (name, kind, opcodes of the called computation) and ``unfused``
    (elementwise opcodes in ENTRY); for naming a learner's mistake, the fusions outside
    ENTRY (``outside_entry``), the opcode tables of a walk that also follows a fused
    computation's own calls (``with_called``) and the elementwise counts of every
    computation, and of every computation but the fused ones
    (``unfused_every_computation``, ``unfused_outside_fusions``), the names printed after
    ENTRY's ROOT line (``after_root``: a side effect's custom-call and what only it reads) and
    the elementwise counts of ENTRY up to that line (``unfused_to_root``); every opcode of the
    module (``all_opcodes``); and the ``labels`` of what the module holds (for the coverage of
    the draw: fusion kinds, fusions and elementwise work outside ENTRY or after ROOT, a module
    without tables, a tuple-shaped instruction inside a fusion...).

``rewrite_applied(ctx, source, fn_name, arg_kind, rule, shape)``
    Compiles the rewrite case ``fn_name`` of ``source`` for its inputs (``arg_kind``: "f32",
    "i32" or "scalars", around a 2-D ``shape``) and says whether ``rule`` holds in the
    optimized module (rules: ``grader.exercises.ex10_fusion.judges.CASES``).

In the learner's sandbox:

``read_text(ctx, text)``
    ``{"fusions": fusions(text), "unfused": unfused(text)}`` from the learner's functions;
    a mapping comes back as a plain dict, anything else as its type's name.

``rewrites(ctx)``
    ``{"answers": <what the learner's rewrites() returned>}``.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
from jax import lax

from grader import ir
from grader import xla_structure as xs

_jit = jax.jit
_ShapeDtypeStruct = jax.ShapeDtypeStruct
_NAMESPACE = {"jax": jax, "jnp": jnp, "lax": lax}


def _define(source: str) -> dict:
    namespace = dict(_NAMESPACE)
    namespace["__name__"] = "ex10_unseen"
    exec(compile(source, "<grader-generated>", "exec"), namespace)  # source written by the trusted side
    return namespace


def _compile(fn, args, compiler_options: dict):
    return _jit(fn).lower(*args).compile(compiler_options=dict(compiler_options))


def _labels(module, elementwise: frozenset, text: str, after_root: set) -> list[str]:
    entry = module.entry()
    fused = module.fused_computation_ids()
    labels = {f"fusion_{f['kind']}" for f in module.fusions()}
    late = [i for i in entry.instructions if i.name in after_root]
    if any(i.opcode == "fusion" for i in late):
        labels.add("fusion_after_root")
    if any(i.opcode in elementwise for i in late):
        labels.add("elementwise_after_root")
    if "\nFileNames\n" not in text:  # no source locations: no tables before the computations
        labels.add("no_tables")
    if any(i.dims is None for c in module.computations if c.id in fused for i in c.instructions):
        labels.add("tuple_shaped_in_fusion")  # e.g. the variadic reduce of an argmax
    if any(i.opcode == "fusion" for c in module.computations if c.id != entry.id and c.id not in fused
           for i in c.instructions):
        labels.add("fusion_outside_entry")
    if any(i.called_ids for c in module.computations if c.id in fused for i in c.instructions):
        labels.add("fused_computation_calls")  # e.g. a reduce's to_apply inside a fusion
    if any(i.opcode in elementwise for i in entry.instructions):
        labels.add("unfused_elementwise")
    else:
        labels.add("no_unfused_elementwise")
    if any(i.opcode not in elementwise and i.opcode not in ("parameter", "constant", "fusion", "tuple",
                                                             "get-tuple-element", "copy", "bitcast")
           for i in entry.instructions):
        labels.add("bare_non_elementwise")
    if any(i.opcode in elementwise for c in module.computations if c.id != entry.id and c.id not in fused
           for i in c.instructions):
        labels.add("elementwise_outside_entry")
    return sorted(labels)


def _with_called(module) -> dict:
    """Per fusion, the opcodes of its computation plus those of every computation it calls."""
    out = {}
    for inst in module.instructions():
        if inst.opcode != "fusion":
            continue
        counts, stack = {}, [inst.called_ids[0]]
        while stack:
            comp = module.computation(stack.pop())
            for i in comp.instructions:
                counts[i.opcode] = counts.get(i.opcode, 0) + 1
                stack.extend(i.called_ids)
        out[inst.name] = counts
    return out


def compile_module(ctx, source: str, fn_name: str, arg_specs: list, compiler_options: dict,
                   elementwise: list) -> dict:
    elementwise = frozenset(elementwise)
    fn = _define(source)[fn_name]
    args = [_ShapeDtypeStruct(tuple(shape), dtype) for shape, dtype in arg_specs]
    compiled = _compile(fn, args, compiler_options)
    module = xs.optimized_module(compiled)
    text = compiled.as_text()
    after_root = set(xs.entry_names_after_root(text))
    entry = module.entry()
    fused = module.fused_computation_ids()
    return {
        "text": text,
        "fusions": module.fusions(),
        "unfused": ir.tally((i.opcode for i in entry.instructions if i.opcode in elementwise)),
        "outside_entry": sorted(i.name for c in module.computations if c.id != entry.id
                                for i in c.instructions if i.opcode == "fusion"),
        "with_called": _with_called(module),
        "unfused_every_computation": ir.tally((i.opcode for i in module.instructions()
                                                  if i.opcode in elementwise)),
        "unfused_outside_fusions": ir.tally((i.opcode for c in module.computations if c.id not in fused
                                                for i in c.instructions if i.opcode in elementwise)),
        # what a reader that stops at ENTRY's ROOT line finds (for a diagnosis)
        "unfused_to_root": ir.tally((i.opcode for i in entry.instructions
                                        if i.opcode in elementwise and i.name not in after_root)),
        "after_root": sorted(after_root),
        "all_opcodes": sorted({i.opcode for i in module.instructions()}),
        "labels": _labels(module, elementwise, text, after_root),
    }


def _rule_holds(module, rule) -> bool:
    kind, ops = rule[0], tuple(rule[1])
    left = [i for i in module.instructions() if i.opcode in ops]
    if kind == "none":
        return not left
    if kind == "at_most_one":
        return len(left) <= 1
    if kind == "scalar_add":
        return all(i.dims == () for i in module.instructions() if i.opcode == "add")
    raise ValueError(kind)


def rewrite_applied(ctx, source: str, fn_name: str, arg_kind: str, rule: list, shape: list) -> dict:
    fn = _define(source)[fn_name]
    if arg_kind == "scalars":
        args = [_ShapeDtypeStruct((), jnp.float32), _ShapeDtypeStruct((), jnp.float32),
                _ShapeDtypeStruct(tuple(shape), jnp.float32)]
    else:
        args = [_ShapeDtypeStruct(tuple(shape), jnp.float32 if arg_kind == "f32" else jnp.int32)]
    module = xs.optimized_module(_compile(fn, args, {}))
    return {"applied": _rule_holds(module, rule), "opcodes": module.opcode_counts()}


def _plain(value):
    """Mappings (a Counter, say) become plain dicts, recursively through lists; the rest is
    returned as it is (plain data crosses, anything else is refused on the way out)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()} if all(type(k) is str for k in value) else \
            f"<a {type(value).__name__} with keys that are not all str>"
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or type(value) in (str, int, bool, float):
        return value
    return f"<a {type(value).__name__}>"


def read_text(ctx, text: str) -> dict:
    return {"fusions": _plain(ctx.function("fusions")(text)), "unfused": _plain(ctx.function("unfused")(text))}


def rewrites(ctx) -> dict:
    return {"answers": _plain(ctx.function("rewrites")())}
