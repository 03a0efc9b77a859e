"""Reading JAX's and XLA's intermediate forms: jaxprs and (optimized) HLO text.

The jaxpr helpers run where the jaxpr is (usually the sandbox) and return plain data;
the HLO helpers work on text, so the trusted side can apply them to what a probe sent
back.  Version-sensitive spellings come from ``grader.jaxcompat``.
"""

from __future__ import annotations

import sys
import types

from grader import jaxcompat

#: id(primitive) -> (primitive, its name), for every primitive JAX's (and Equinox's) modules held
#: before learner code existed, and those names: bound in a worker by ``grader.sandbox.pins``
#: (empty elsewhere), with the ids of the library modules loaded then, the libraries' folders
#: and their package prefixes (what ``_library_defined`` recognises a module imported later by)
_PINNED_NAMES: dict = {}
_PINNED_NAME_SET: frozenset = frozenset()
_PINNED_MODULES: frozenset = frozenset()
_LIBRARY_DIRS: tuple = ()
_LIBRARY_PREFIXES: tuple = ((), ())
#: id(primitive) -> primitive: primitives a library module imported later defines, once found
_LATE = types.SimpleNamespace(known={})


class ForeignPrimitive(Exception):
    """A jaxpr holds a primitive no library defined: the learner's code made it (with
    ``jax.extend.core.Primitive``), and what it does inside cannot be seen."""


def primitive_name(primitive) -> str:
    """A primitive's name as JAX gave it, read from the table pinned before learner code (so
    renaming ``scan_p`` changes nothing).  A primitive that a library module imported later
    defines keeps its own name; one that no library defined -- the learner's code made it, and
    could hide a loop or a whole computation inside it behind one equation -- raises
    ``ForeignPrimitive``: every structural reading of the program fails, saying why."""
    entry = _PINNED_NAMES.get(id(primitive))  # the table holds each primitive: its id is its own
    if entry is not None:
        return entry[1]
    name = primitive.name
    name = name if type(name) is str else "?"
    if not _PINNED_NAMES:  # not in a worker (the trusted side, a test): no table to judge by
        return name
    if _LATE.known.get(id(primitive)) is not primitive and not _library_defined(primitive):
        raise ForeignPrimitive(
            f"the program holds the primitive `{name[:60]}`, which your code made (jax.extend.core.Primitive): "
            f"what it does inside cannot be seen, so the program's structure cannot be judged; write it "
            f"with JAX's own operations")
    return f"{name} (not JAX's own)" if name in _PINNED_NAME_SET else name


def _library_defined(primitive) -> bool:
    """Whether a library module imported after the pin (``jax.experimental.sparse``, say) holds
    ``primitive`` as one of its globals, that module being a library file's: one of its
    functions, whose globals are that module's, comes from the library's folder (a module the
    learner's code put together has none -- making one is an accusation of the guard)."""
    exact, prefixes = _LIBRARY_PREFIXES
    for name, module in list(sys.modules.items()):
        if id(module) in _PINNED_MODULES or not (name in exact or name.startswith(prefixes)):
            continue
        space = getattr(module, "__dict__", None)
        if type(space) is not dict or not any(value is primitive for value in list(space.values())):
            continue
        for value in list(space.values()):
            if type(value) is types.FunctionType and value.__globals__ is space:
                file = value.__code__.co_filename
                if type(file) is str and file.startswith(_LIBRARY_DIRS):
                    _LATE.known[id(primitive)] = primitive
                    return True
    return False


def tally(items) -> dict:
    """How many times each item occurs: ``collections.Counter``'s count, with a plain dict
    (``Counter``'s methods are a library class's, which the learner's code could replace)."""
    counts: dict = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


def _inner(jaxpr):
    """A ``Jaxpr`` from a ``Jaxpr`` or a ``ClosedJaxpr``."""
    return getattr(jaxpr, "jaxpr", jaxpr)


def walk_equations(jaxpr):
    """Every equation of ``jaxpr`` and of all sub-jaxprs (jit, scan, cond, custom_jvp...)."""
    stack = [_inner(jaxpr)]
    while stack:
        j = stack.pop()
        for eqn in j.eqns:
            primitive_name(eqn.primitive)  # a primitive of the learner's: ForeignPrimitive
            yield eqn
            for sub in jaxcompat.jaxprs_in_params(eqn.params):
                stack.append(_inner(sub))


def equations_with_trips(jaxpr):
    """Every equation of ``jaxpr`` and its sub-jaxprs with how many times it runs per run of
    ``jaxpr`` -- the product of the lengths of the ``scan``s it sits in -- and whether it sits in
    a ``while`` loop (whose trip count the program does not state: counted once):
    ``(equation, primitive name, times, in_while)``."""
    stack = [(_inner(jaxpr), 1, False)]
    while stack:
        j, times, looped = stack.pop()
        for eqn in j.eqns:
            name = primitive_name(eqn.primitive)  # a primitive of the learner's: ForeignPrimitive
            yield eqn, name, times, looped
            inner = times * max(int(eqn.params.get("length", 1)), 1) if name == "scan" else times
            for sub in jaxcompat.jaxprs_in_params(eqn.params):
                stack.append((_inner(sub), inner, looped or name == "while"))


def random_draws(jaxpr) -> tuple[dict, bool]:
    """The random draws of a program by size: ``({elements one draw gives: how many such draws},
    in_while)``.  A ``random_bits`` equation's shape parameter is one draw's size (another random
    primitive counts its outputs as one draw); a batch of keys, and the scans it sits in, say how
    many it makes; a draw in a while loop, whose trips the program does not state, counts once and
    sets ``in_while``."""
    draws: dict = {}
    in_while = False
    for eqn, name, times, looped in equations_with_trips(jaxpr):
        if name not in jaxcompat.RANDOM_BITS_PRIMITIVES:
            continue
        made = sum(_elements(v) for v in eqn.outvars)
        shape = eqn.params.get("shape")
        size = max(_size(shape) if type(shape) is tuple and name == "random_bits" else made, 1)
        draws[size] = draws.get(size, 0) + times * max(made // size, 1)
        in_while = in_while or looped
    return draws, in_while


def elements_computed(jaxpr) -> int:
    """How many elements the equations of ``jaxpr`` compute when it runs: each equation's
    outputs' elements, times the length of every ``scan`` it sits in (a while loop's body
    counts once: its trip count is not in the program; every branch of a ``cond`` counts).
    A measure of a program's work, to tell a program that does a computation from a token
    one compiled beside it (``grader.traced_work.expect_compiled_work``)."""
    return sum(times * sum(_elements(v) for v in eqn.outvars) for eqn, _, times, _ in equations_with_trips(jaxpr))


#: Primitives that move, reshape or re-type a value without computing anything from it.
LAYOUT_PRIMITIVES = frozenset({"reshape", "convert_element_type", "squeeze", "expand_dims", "broadcast_in_dim",
                               "transpose", "copy", "copy_p", "device_put"})
#: Primitives that choose or repeat: their sub-programs run only when chosen, or once per trip, so
#: a flattened program keeps them whole (``flat_equations``).
CONTROL_FLOW_PRIMITIVES = frozenset({"cond", "while", "scan"})


def flat_equations(jaxpr, keep: bool = False) -> tuple[list, list, list]:
    """``jaxpr`` with its nested calls (``jit``, ``closed_call``, ``checkpoint``, ``custom_jvp``,
    ``custom_vjp``, ``shard_map``: any equation but control flow whose one sub-program takes the
    equation's inputs in order) inlined: ``(equations, inputs, outputs)``, each equation a
    ``(name, input keys, output keys)`` and each value named by a key (the ``id`` of the variable
    that holds it at the outermost level it reaches; ``None`` for a literal).
    Control flow (``CONTROL_FLOW_PRIMITIVES``) stays one equation, so a value computed inside a
    branch is not one of the flattened program's: what runs on every path is what is listed.
    ``keep``: each equation carries the equation object too, ``(name, ins, outs, eqn)``."""
    literal = jaxcompat.literal_class()
    eqns: list = []
    root = _inner(jaxpr)

    def key(atom, names):
        return None if type(atom) is literal else names.get(id(atom), id(atom))

    def walk(j, names):
        for eqn in j.eqns:
            name = primitive_name(eqn.primitive)  # a primitive of the learner's: ForeignPrimitive
            ins = [key(a, names) for a in eqn.invars]
            subs = jaxcompat.jaxprs_in_params(eqn.params)
            body = _inner(subs[0]) if len(subs) == 1 else None
            if (name not in CONTROL_FLOW_PRIMITIVES and body is not None and len(body.invars) == len(eqn.invars)
                    and len(body.outvars) == len(eqn.outvars)):
                inner = {id(b): k for b, k in zip(body.invars, ins) if k is not None}
                walk(body, inner)
                for out, res in zip(eqn.outvars, body.outvars):
                    names[id(out)] = key(res, inner)
                continue
            outs = [id(out) for out in eqn.outvars]
            eqns.append((name, ins, outs, eqn) if keep else (name, ins, outs))

    top: dict = {}  # the outermost level's own names (its outputs that an inlined call returned)
    walk(root, top)
    outputs = [key(v, top) for v in root.outvars]
    return eqns, [id(v) for v in root.invars], outputs


def inputs_reaching(jaxpr, primitive: str, then: str | None = None) -> list[int]:
    """The positions of the program's inputs that reach an equation of ``primitive`` as they are,
    or only moved or re-typed on the way (``LAYOUT_PRIMITIVES``; nested calls followed), where
    that equation's result is used: it reaches the program's outputs, and with ``then``, it is
    an operand of an equation of ``then``, moved or re-typed only.  Which inputs a
    ``with_sharding_constraint``, say, is applied to before a ``dot_general`` uses them -- one
    whose result is thrown away, or used for something else, does nothing."""
    eqns, inputs, outputs = flat_equations(jaxpr)
    live = _live(eqns, outputs)
    carried = {k: i for i, k in enumerate(inputs)}  # value key -> the input it is a copy of
    made: dict = {}  # value key -> the inputs whose primitive equation it is the result of, moved
    found = set()
    for n, (name, ins, outs) in enumerate(eqns):
        if name == primitive and live[n]:
            reached = {carried[k] for k in ins if k in carried}
            if then is None:
                found.update(reached)
            else:
                made.update((k, reached) for k in outs)
        if then is not None and name == then:
            for k in ins:
                found.update(made.get(k, ()))
        if name in LAYOUT_PRIMITIVES and ins and ins[0] in carried:
            carried.update((k, carried[ins[0]]) for k in outs)
        if name in LAYOUT_PRIMITIVES and ins and ins[0] in made:
            made.update((k, made[ins[0]]) for k in outs)
    return sorted(found)


def _live(eqns: list, outputs: list) -> list[bool]:
    """For each equation of a flattened program (``flat_equations``), whether any of its results
    reaches the program's outputs."""
    needed = {k for k in outputs if k is not None}
    live = [False] * len(eqns)
    for n in range(len(eqns) - 1, -1, -1):
        _, ins, outs = eqns[n][:3]
        if any(k in needed for k in outs):
            live[n] = True
            needed.update(k for k in ins if k is not None)
    return live


def bypassing(jaxpr, primitive: str) -> list[str]:
    """The primitives through which the program's outputs depend on its inputs along a path that
    passes no equation of ``primitive`` (nested calls inlined; inside control flow, a sub-program
    whose outputs depend on any of its inputs that way counts as such a path): empty when every
    dependence of an output on an input goes through ``primitive``.  Applied to the linear
    program of a ``jax.vjp`` with ``custom_lin``, it says whether a derivative comes from a
    ``jax.custom_vjp`` rule alone or also from JAX's own derivative of other operations."""
    eqns, inputs, outputs = flat_equations(jaxpr, keep=True)
    tainted, path = set(inputs), []
    for name, ins, outs, eqn in eqns:
        if name == primitive or not any(k in tainted for k in ins):
            continue
        if name in CONTROL_FLOW_PRIMITIVES:
            inner = [n for sub in jaxcompat.jaxprs_in_params(eqn.params) for n in bypassing(sub, primitive)]
            if not inner:
                continue
            path.extend(inner)
        else:
            path.append(name)
        tainted.update(outs)
    if not any(k in tainted for k in outputs):
        return []
    return path or ["the input itself"]  # an output that is an input, moved by nothing


#: Primitives whose result is the very key they were given, copied or re-typed: a key's data
#: unwrapped, or wrapped again, or ``jax.random.clone``'s copy, which JAX's own key-reuse checker
#: treats as a fresh key by design.
KEY_COPIES = frozenset({"random_clone", "random_wrap", "random_unwrap", "copy", "copy_p", "convert_element_type",
                        "device_put"})
#: Primitives that take keys apart or put them in another shape without making new ones: what
#: they give is part (or an arrangement) of the keys they were given.
KEY_PARTS = frozenset({"slice", "squeeze", "reshape", "expand_dims", "transpose", "split", "broadcast_in_dim"})
#: Primitives that use a key up: a draw or a split (``fold_in`` does not, as JAX's checker says).
KEY_CONSUMERS = frozenset({"random_bits", "random_split"})


def keys_used_twice(jaxpr) -> list[str]:
    """Keys that the program uses up more than once, following copies of a key: each value is
    traced back to where it was made (an input, or an equation that computed it), through
    ``KEY_COPIES`` (the same key) and ``KEY_PARTS`` (a part of it, named by the operation and its
    parameters, so ``keys[1]`` taken twice is one key and ``keys[0]`` another); a draw or a split
    (``KEY_CONSUMERS``), a loop or cond given a key, and returning it use a key up.  Two uses of
    one key, or of a key and a part of it, are listed (``"random_bits and random_split of input 0"``).
    JAX's checker follows none of the copies (a clone is a fresh key to it)."""
    eqns, inputs, outputs = flat_equations(jaxpr, keep=True)
    made = {k: (("input", i),) for i, k in enumerate(inputs)}  # value -> (where it was made, *parts taken)
    uses: list = []  # (identity, what used it)
    for n, (name, ins, outs, eqn) in enumerate(eqns):
        first = made.get(ins[0]) if ins else None
        if name in KEY_COPIES and first is not None:
            for k in outs:
                made[k] = first
            continue
        if name in KEY_PARTS and first is not None:
            params = tuple(sorted((key, repr(_unit_strides(key, value))) for key, value in eqn.params.items()
                                  if key != "sharding"))
            for j, k in enumerate(outs):
                made[k] = first + ((name, params, j),)
            continue
        if name in KEY_CONSUMERS and first is not None:
            uses.append((first, name))
        elif name in CONTROL_FLOW_PRIMITIVES:
            uses.extend((made[k], name) for k, var in zip(ins, eqn.invars)
                        if k in made and jaxcompat.is_key(getattr(var, "aval", None)))
        for j, k in enumerate(outs):  # a new value: its own key, from here on
            made[k] = (("made", name, n, j),)
    # a key the program returns is used by whoever called it: the next epoch splits it
    uses.extend((made[k], "returning it") for k, var in zip(outputs, _inner(jaxpr).outvars)
                if k in made and jaxcompat.is_key(getattr(var, "aval", None)))
    found = []
    for a in range(len(uses)):
        for b in range(a + 1, len(uses)):
            (x, used_x), (y, used_y) = uses[a], uses[b]
            short, long_ = (x, y) if len(x) <= len(y) else (y, x)
            if long_[:len(short)] == short:
                found.append(f"{_USE_WORDS.get(used_x, used_x)} and {_USE_WORDS.get(used_y, used_y)}, both of "
                             f"{_describe_key(short)}")
    return found


#: What each use of a key is, in words.
_USE_WORDS = {"random_bits": "a draw", "random_split": "a split", "returning it": "returning it",
              "scan": "a scan given it", "while": "a loop given it", "cond": "a cond given it"}


def _unit_strides(name: str, value):
    """A slice's strides, ``None`` and all ones alike (``keys[1]`` and ``a, b = keys`` slice alike)."""
    if name == "strides" and (value is None or all(int(s) == 1 for s in value)):
        return "ones"
    return value


def _describe_key(identity: tuple) -> str:
    root = identity[0]
    where = f"the key given as input {root[1]}" if root[0] == "input" else f"a key that {root[1]} made"
    return where + (" (one part of it, picked out by " + " then ".join(step[0] for step in identity[1:]) + ")"
                    if len(identity) > 1 else "")


def work_outside_control_flow(jaxpr, data: tuple[int, ...]) -> list[str]:
    """What a program computes from its inputs at positions ``data`` on every path: the
    primitives, outside every ``cond`` (its branches run only when chosen), that take such a
    value and whose result reaches something other than a ``cond``'s predicate or index --
    the program's outputs, a branch's operands, another computation.  Moving and re-typing
    (``LAYOUT_PRIMITIVES``) is not work, nor is what only decides which branch runs
    (``jnp.sum(x) > 0``).  Branches computed beside a ``cond`` and then picked (``jnp.where``,
    arithmetic on the predicate), or fed to it ready-made, are listed; a program that only
    chooses lists nothing."""
    eqns, inputs, outputs = flat_equations(jaxpr)
    tainted = {inputs[i] for i in data if i < len(inputs)}
    flows = []  # per equation: does it take a value computed from the data?
    for _, ins, outs in eqns:
        hit = any(k in tainted for k in ins)
        flows.append(hit)
        if hit:
            tainted.update(outs)
    # which values only decide a choice: used solely as a cond's predicate or index (operand 0),
    # or by equations that themselves only decide one (walked from the end)
    uses: dict = {}
    for i, (name, ins, _) in enumerate(eqns):
        for pos, k in enumerate(ins):
            if k is not None:
                uses.setdefault(k, []).append((i, pos))
    escapes = set(outputs)
    deciding = [False] * len(eqns)
    for i in range(len(eqns) - 1, -1, -1):
        name, _, outs = eqns[i]
        if name == "cond":
            continue
        deciding[i] = all(k not in escapes and all((eqns[j][0] == "cond" and pos == 0) or deciding[j]
                                                  for j, pos in uses.get(k, ())) for k in outs)
    return [name for i, (name, _, _) in enumerate(eqns)
            if flows[i] and not deciding[i] and name != "cond" and name not in LAYOUT_PRIMITIVES]


def live_work(jaxpr) -> int:
    """The work ``jaxpr`` does when it runs, each operation counted once and loops by their trip
    counts: the elements its equations compute, a ``dot_general`` counting one per multiply-add
    (its output's elements times the contracted size: a matrix-vector product is n x n, not n).
    A measure to compare two programs that compute the same thing (a Hessian-vector product
    against the Hessian formed row by row; forward against reverse mode), where XLA's cost
    analysis counts a loop's body once.  Unlike ``elements_computed``:

    * an equation that holds sub-jaxprs (a nested ``jit``, ``custom_jvp``/``custom_vjp``,
      ``remat``, ``cond``, ``scan``) counts the equations inside it, not its own outputs again:
      wrapping the same work in ``jax.jit`` changes nothing;
    * an equation no output of its jaxpr needs, and without effects, counts nothing (XLA drops
      it): a value traced and never used is no work; a write into a ``Ref`` (an effect) counts.

    A ``scan`` body counts ``length`` times; every branch of a ``cond`` counts; a ``while`` body
    counts once (its trip count is not in the program: a check that relies on this measure must
    refuse while loops itself, as it must refuse host callbacks and kernels, whose work is not
    in the jaxpr)."""
    total = 0
    stack = [(_inner(jaxpr), 1)]
    while stack:
        j, times = stack.pop()
        live = {id(v) for v in j.outvars}
        for eqn in reversed(j.eqns):
            name = primitive_name(eqn.primitive)  # a primitive of the learner's: ForeignPrimitive
            if not eqn.effects and not any(id(v) in live for v in eqn.outvars):
                continue  # an equation with effects (a write into a Ref, a callback) is live whatever it returns
            live.update(id(v) for v in eqn.invars)
            subs = jaxcompat.jaxprs_in_params(eqn.params)
            if not subs:
                total += times * sum(_elements(v) for v in eqn.outvars) * _contracted(eqn, name)
                continue
            inner_times = times * max(int(eqn.params.get("length", 1)), 1) if name == jaxcompat.SCAN_PRIMITIVE \
                else times
            stack.extend((_inner(sub), inner_times) for sub in subs)
    return total


def _contracted(eqn, name: str) -> int:
    """How many products make each output element of ``eqn``: a ``dot_general``'s contracted size
    (1 for any other equation)."""
    if name != "dot_general":
        return 1
    (contract, _), _ = eqn.params["dimension_numbers"]
    shape = eqn.invars[0].aval.shape
    k = 1
    for d in contract:
        k *= int(shape[d])
    return max(k, 1)


def primitive_counts(jaxpr) -> dict[str, int]:
    """How many times each primitive appears, nested sub-jaxprs included."""
    return tally(primitive_name(eqn.primitive) for eqn in walk_equations(jaxpr))


def largest_value(jaxpr) -> dict:
    """The value with the most elements anywhere in ``jaxpr`` (inputs, constants and every
    equation's outputs, sub-jaxprs included): ``{"elements", "aval", "avals"}``.  What a program
    materialises at least once, e.g. an ``n x n`` Hessian.  ``avals`` lists the distinct types
    of that largest size, floating-point ones first (``jax.hessian`` also builds an integer
    ``n x n`` basis; the float Hessian is the one a reader looks for); ``aval`` is the first."""
    elements, avals = 0, []
    stack = [_inner(jaxpr)]
    while stack:
        j = stack.pop()
        values = list(j.invars) + list(j.constvars) + [v for eqn in j.eqns for v in eqn.outvars]
        for var in values:
            aval = getattr(var, "aval", None)
            if getattr(aval, "shape", None) is None:
                continue
            size = _elements(var)
            if size > elements:
                elements, avals = size, []
            if size == elements and size > 0:
                dtype = str(getattr(aval, "dtype", ""))  # float*, bfloat16, complex*: by name
                inexact = dtype.startswith(("float", "bfloat", "complex"))
                entry = (not inexact, str(aval))
                if entry not in avals:
                    avals.append(entry)
        for eqn in j.eqns:
            primitive_name(eqn.primitive)  # a primitive of the learner's could hide any value: ForeignPrimitive
            stack.extend(_inner(sub) for sub in jaxcompat.jaxprs_in_params(eqn.params))
    names = [name for _, name in sorted(avals, key=lambda e: e[0])]  # stable: floats first, else first seen
    return {"elements": elements, "aval": names[0] if names else "", "avals": names}


def identity(program) -> tuple:
    """Who is who in a traced program: the identity of every object that makes up ``program``
    (a ``ClosedJaxpr`` or ``Jaxpr``) and its nested jaxprs -- equations, their primitives,
    parameter dicts and values, variables.  JAX never changes these objects once made (it makes
    new ones: ``replace``), so two reads that differ mean the program was rewritten in place
    between them (``grader.probes.generic.traced_run``)."""
    jaxpr_type, closed_type = jaxcompat._JAXPR_TYPES or jaxcompat.jaxpr_types()
    out = []
    todo = [program]
    while todo:
        item = todo.pop()
        if isinstance(item, closed_type):
            inner = item.jaxpr
            out.append((id(item), id(inner), id(item.consts)))
            todo.append(inner)
            continue
        eqns = item.eqns
        out.append((id(item), id(eqns), len(eqns), id(item.invars), id(item.outvars)))
        for eqn in eqns:
            params = eqn.params
            values = tuple(params.values())
            out.append((id(eqn), id(eqn.primitive), id(params), tuple(map(id, values)),
                        tuple(_content(v, jaxpr_type, closed_type) for v in values),
                        tuple(map(id, eqn.invars)), tuple(map(id, eqn.outvars))))
            for value in values:
                for sub in value if isinstance(value, tuple) else (value,):
                    if isinstance(sub, (jaxpr_type, closed_type)):
                        todo.append(sub)
    return tuple(out)


def _content(value, jaxpr_type, closed_type):
    """A parameter's hash: JAX's parameters are hashable values (a frozen dataclass such as a
    Pallas call's ``GridMapping`` hashes its fields), so one changed in place under its identity
    (``object.__setattr__``) shows; jaxprs are walked instead, unhashable values count by identity."""
    if isinstance(value, (jaxpr_type, closed_type)):
        return None
    try:
        return hash(value)
    except Exception:  # noqa: BLE001 - unhashable: its identity above is all there is
        return None


def jaxpr_summary(jaxpr) -> dict:
    """Plain-data facts about a (closed) jaxpr, for the trusted side to judge."""
    inner = _inner(jaxpr)
    return {
        "top_level_eqns": len(inner.eqns),
        "total_eqns": sum(1 for _ in walk_equations(jaxpr)),
        "primitives": primitive_counts(jaxpr),
        "top_level_primitives": [primitive_name(e.primitive) for e in inner.eqns],
        "out_avals": [str(v.aval) for v in inner.outvars],
        "text": str(jaxpr)[:20000],
    }


def kernel_calls(jaxpr) -> dict:
    """The Pallas kernels a (closed) jaxpr calls, at any depth, and what it computes outside them.

    ``{"calls": [jaxcompat.pallas_call_facts(...), ...], "outside": {primitive: count}}``:
    ``outside`` counts every equation that is not inside a kernel's body (nested ``jit``,
    ``cond`` or ``scan`` bodies included), so work done around a kernel shows there."""
    calls, outside = [], {}
    stack = [_inner(jaxpr)]
    while stack:
        for eqn in stack.pop().eqns:
            name = primitive_name(eqn.primitive)
            if name == jaxcompat.PALLAS_CALL_PRIMITIVE:
                calls.append(jaxcompat.pallas_call_facts(eqn.params))
                continue  # its body is the kernel: what runs inside it is the kernel's business
            outside[name] = outside.get(name, 0) + 1
            stack.extend(_inner(sub) for sub in jaxcompat.jaxprs_in_params(eqn.params))
    return {"calls": calls, "outside": outside}


def entry_computation(hlo_text: str) -> str:
    """The ENTRY computation of an HLO module's text (optimized HLO starts with tables)."""
    m = jaxcompat.ENTRY_RE.search(hlo_text)
    if not m:
        raise ValueError("no ENTRY computation in this HLO text")
    rest = hlo_text[m.start():]
    end = rest.find("\n}\n")
    return rest if end < 0 else rest[: end + 3]


def collective_counts(hlo_text: str) -> dict[str, int]:
    """Collectives by opcode (``all-reduce``, ``all-gather``, ...) in the ENTRY computation."""
    text = entry_computation(hlo_text)
    counts = tally(m.group("op") for m in jaxcompat.COLLECTIVE_RE.finditer(text))
    return {op: counts.get(op, 0) for op in jaxcompat.COLLECTIVE_OPCODES}


def collective_shapes(hlo_text: str, opcode: str) -> list[list[tuple[int, ...]]]:
    """The result shapes of every ``opcode`` collective in the ENTRY computation, in program
    order: one list per instruction (a tuple result, several collectives combined, lists each
    array's dimensions)."""
    out = []
    for line in entry_computation(hlo_text).splitlines():
        m = jaxcompat.COLLECTIVE_RE.search(line)
        if not m or m.group("op") != opcode or "=" not in line[:m.start()]:
            continue
        result = line[line.index("=", 0, m.start()) + 1:m.start()]
        out.append([tuple(int(d) for d in shape.group("dims").split(",") if d)
                    for shape in jaxcompat.HLO_SHAPE_RE.finditer(result)])
    return out


def collective_permute_pairs(hlo_text: str) -> list[list[tuple[int, int]]]:
    """The ``(source, target)`` partition pairs of every collective-permute in the ENTRY
    computation, in program order (one list per collective-permute)."""
    out = []
    for line in entry_computation(hlo_text).splitlines():
        op = jaxcompat.COLLECTIVE_RE.search(line)
        if not op or op.group("op") != "collective-permute":
            continue
        found = jaxcompat.PERMUTE_PAIRS_RE.search(line)
        pairs = [] if not found else [(int(m.group("source")), int(m.group("target")))
                                      for m in jaxcompat.PERMUTE_PAIR_RE.finditer(found.group("pairs"))]
        out.append(pairs)
    return out


def shard_maps(jaxpr) -> list[dict]:
    """Every ``shard_map`` of a (closed) jaxpr, nested ones included, as plain facts:
    ``{"check_vma": bool, "in_specs": str, "out_specs": str, "sums_over": [axis, ...],
    "primitives": {name: count}}``: what its body (nested calls included) sums over with a
    psum or pmean, and which primitives it holds, so a check can ask that the collective and
    the work were written *inside* the shard_map."""
    out = []
    for eqn in walk_equations(jaxpr):
        if primitive_name(eqn.primitive) != jaxcompat.SHARD_MAP_PRIMITIVE:
            continue
        body = eqn.params.get("jaxpr")
        inner = list(walk_equations(body)) if body is not None else []
        sums = sorted({str(axis) for e in inner if primitive_name(e.primitive) in jaxcompat.PSUM_PRIMITIVES
                       for axis in _axes(e.params.get("axes")) if isinstance(axis, str)})
        out.append({"check_vma": jaxcompat.shard_map_checks_vma(eqn.params), "in_specs": str(eqn.params.get("in_specs")),
                    "out_specs": str(eqn.params.get("out_specs")), "sums_over": sums,
                    "primitives": tally(primitive_name(e.primitive) for e in inner)})
    return out


def _product_flops(eqn, name: str) -> int:
    """The multiply-adds of an equation that contracts, twice: a ``dot_general``'s (2 x its output's
    elements x the contracted size); a ``conv_general_dilated``'s (2 x output elements x the kernel's
    elements per output feature: a matrix product can be written as a 1-wide convolution); and a
    ``mul`` that broadcasts its operands into an output larger than each (2 x output elements: the
    products of a matrix product written as a broadcast multiply, to be summed).  0 otherwise."""
    if name == "dot_general":
        return 2 * _elements(eqn.outvars[0]) * _contracted(eqn, "dot_general")
    if name == "conv_general_dilated":
        rhs = eqn.invars[1].aval.shape
        out_features = int(rhs[eqn.params["dimension_numbers"].rhs_spec[0]]) or 1
        return 2 * _elements(eqn.outvars[0]) * max(_elements(eqn.invars[1]) // out_features, 1)
    if name == "mul":
        out = _elements(eqn.outvars[0])
        if all(out > _elements(v) for v in eqn.invars):
            return 2 * out
    return 0


def shard_map_matmul_flops(jaxpr) -> dict:
    """The matrix-product work one device does in the ``shard_map`` bodies of a program: a body
    sees each device's own blocks, so its products' flops (``_product_flops``: ``dot_general``,
    and the same work spelled as a convolution or a broadcast multiply) are per device; a product
    inside a ``scan`` counts once per trip.  ``{"flops",
    "in_while"}``: the second counts the products inside a ``while`` loop, whose trip count the
    program does not state -- work a loop could hide from any count.  What one device computes
    when it gathers a whole batch or a whole weight (by any collective) and works on it shows
    here as a multiple of the work of its own share."""
    flops = in_while = 0
    for eqn in walk_equations(jaxpr):
        if primitive_name(eqn.primitive) != jaxcompat.SHARD_MAP_PRIMITIVE:
            continue
        for inner, name, times, looped in equations_with_trips(eqn.params["jaxpr"]):
            work = _product_flops(inner, name)
            if work:
                flops += times * work
                in_while += looped
    return {"flops": flops, "in_while": in_while}


def _axes(axes) -> tuple:
    return tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)


def _elements(var) -> int:
    """How many elements a jaxpr variable's value holds (0 for one without a shape)."""
    shape = getattr(getattr(var, "aval", None), "shape", None)
    return _size(shape) if shape is not None else 0


def _size(shape) -> int:
    """How many elements an array of ``shape`` holds."""
    size = 1
    for d in shape:
        size *= int(d)
    return size


def largest_outside_shard_maps(jaxpr) -> dict:
    """The largest value an equation makes *outside* every ``shard_map`` body (nested calls
    included, ``{"elements", "primitive"}``), beside the largest input or output of the program
    (``"io"``): a value larger than every input and output, made in global view, is work --
    a matmul spelled as a broadcast product and a sum, say -- that no shard_map does."""
    top = _inner(jaxpr)
    io = max([_elements(v) for v in list(top.invars) + list(top.outvars)] or [0])
    elements, primitive = 0, ""
    stack = [top]
    while stack:
        j = stack.pop()
        for eqn in j.eqns:
            name = primitive_name(eqn.primitive)
            if name == jaxcompat.SHARD_MAP_PRIMITIVE:
                continue
            for var in eqn.outvars:
                size = _elements(var)
                if size > elements:
                    elements, primitive = size, name
            stack.extend(_inner(sub) for sub in jaxcompat.jaxprs_in_params(eqn.params))
    return {"elements": elements, "primitive": primitive, "io": io}


def outside_shard_maps(jaxpr) -> dict[str, int]:
    """How many times each primitive appears *outside* every ``shard_map`` body (nested calls
    included, shard_map bodies skipped): the work a program does in global view."""
    counts: dict = {}
    stack = [_inner(jaxpr)]
    while stack:
        j = stack.pop()
        for eqn in j.eqns:
            name = primitive_name(eqn.primitive)
            counts[name] = counts.get(name, 0) + 1
            if name == jaxcompat.SHARD_MAP_PRIMITIVE:
                continue
            for sub in jaxcompat.jaxprs_in_params(eqn.params):
                stack.append(_inner(sub))
    return dict(counts)
