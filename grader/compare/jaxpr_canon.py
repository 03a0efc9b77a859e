"""A jaxpr as canonical text: what a function computes, without the names it was written with.

Two functions that trace to the same program get the same text, whatever their variable
and function names, comments or formatting: variables are numbered in order of first
appearance in each (sub-)jaxpr, names of jitted functions (the ``name`` param) and
callables held in params are dropped, shapes come from the fixed inputs the spec gives,
and literals are *bucketed* (``0``, ``1``, ``-1``, ``0.5``, ``2`` stay exact; any other
number becomes its sign and order of magnitude), so ``tol = 1e-3`` and ``tol = 2e-3``
read the same while ``x * 2`` and ``x * 1000`` do not.

``structure`` reads what the canonical text leaves out and ``grade compare``'s strategies are
made of (``grader.compare.features``): under which transformations each equation was made
(JAX records ``vmap``, ``jvp`` and ``transpose`` in every equation's name stack), inside which
loops, branches and checkpoints it sits, the order of primitives, and each loop's length.

Runs in the sandbox (imported by ``grader/probes/fingerprint.py`` before learner code)
and needs only the standard library: it reads jaxpr objects by duck typing.  Every walk
is iterative with a bound on nesting, so a deeply nested program costs nothing more.
"""

from __future__ import annotations

import math
import re
from typing import Any

#: Params that name things (functions, source locations) rather than say what is computed.
_NAMING_PARAMS = frozenset({"name", "debug_info", "source_info", "ctx_mesh"})
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_EXACT = (0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0)


def bucket(value: Any) -> str:
    """A literal's bucket: exact for a few small values, sign and order of magnitude otherwise."""
    try:
        if hasattr(value, "item"):
            value = value.item()
    except (TypeError, ValueError):
        return "array"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value) if abs(value) <= 2 else f"{'-' if value < 0 else ''}int~1e{len(str(abs(value))) - 1}"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value) or value in _EXACT:
            return repr(value)
        return f"{'-' if value < 0 else ''}~1e{round(math.log10(abs(value)))}"
    return type(value).__name__


def _aval(atom: Any) -> str:
    aval = getattr(atom, "aval", None)
    if aval is None:
        return "?"
    text = aval.str_short() if hasattr(aval, "str_short") else str(aval)
    return text.replace(" ", "")


def _is_jaxpr(value: Any) -> bool:
    return hasattr(value, "eqns") or (hasattr(value, "jaxpr") and hasattr(getattr(value, "jaxpr"), "eqns"))


class _Namer:
    """Numbers variables in order of first appearance; literals become buckets."""

    def __init__(self) -> None:
        self.ids: dict[int, int] = {}

    def bind(self, var: Any) -> str:
        if type(var).__name__ == "DropVar":
            return "_"
        self.ids.setdefault(id(var), len(self.ids))
        return f"%{self.ids[id(var)]}:{_aval(var)}"

    def use(self, atom: Any) -> str:
        if type(atom).__name__ == "Literal":
            return f"lit({bucket(getattr(atom, 'val', None))}):{_aval(atom)}"
        if id(atom) not in self.ids:
            return self.bind(atom)
        return f"%{self.ids[id(atom)]}"


def _param(value: Any, depth: int) -> str:
    if _is_jaxpr(value) and depth >= MAX_NESTING:
        return "{...}"
    if _is_jaxpr(value):
        return "{" + "; ".join(_lines(value, depth + 1)) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_param(v, depth) for v in value) + ")"
    if callable(value) and not isinstance(value, type):
        return "<fn>"
    return _ADDRESS.sub("", repr(value))


def _lines(jaxpr: Any, depth: int = 0) -> list[str]:
    consts = list(getattr(jaxpr, "consts", []) or [])
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    namer = _Namer()
    head = [namer.bind(v) for v in list(inner.constvars) + list(inner.invars)]
    out = [f"in {' '.join(head)}" + (f" consts {len(consts)}" if consts else "")]
    for eqn in inner.eqns:
        args = " ".join(namer.use(a) for a in eqn.invars)
        params = ",".join(f"{k}={_param(v, depth)}" for k, v in sorted(eqn.params.items())
                          if k not in _NAMING_PARAMS)
        results = " ".join(namer.bind(v) for v in eqn.outvars)
        out.append(f"{results} = {eqn.primitive.name}[{params}] {args}")
    out.append("out " + " ".join(namer.use(v) for v in inner.outvars))
    return out


def canonical_text(jaxpr: Any) -> str:
    """The canonical text of a ``ClosedJaxpr`` (or ``Jaxpr``), one equation per line."""
    return "\n".join(_lines(jaxpr))


def sub_jaxprs(params: dict) -> list[Any]:
    """The jaxprs an equation's params hold (jit, scan, while, cond branches, custom_jvp...)."""
    found = []
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if _is_jaxpr(item):
                found.append(item)
    return found


def equations(jaxpr: Any):
    """Every equation of ``jaxpr`` and of all its sub-jaxprs."""
    stack = [getattr(jaxpr, "jaxpr", jaxpr)]
    while stack:
        inner = stack.pop()
        for eqn in inner.eqns:
            yield eqn
            stack.extend(getattr(s, "jaxpr", s) for s in sub_jaxprs(eqn.params))


def primitive_counts(jaxpr: Any) -> dict[str, int]:
    """How many times each primitive occurs, nested sub-jaxprs included."""
    counts: dict[str, int] = {}
    for eqn in equations(jaxpr):
        counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
    return counts


#: Collective operations in optimized HLO text (``all-reduce(`` or its async ``-start(`` form).
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_COLLECTIVE = re.compile(r"\s(?P<op>" + "|".join(COLLECTIVES) + r")(?:-start)?\(")


def collective_counts(hlo_text: str) -> dict[str, int]:
    """Collectives by opcode in an HLO module's text (every computation)."""
    counts = {op: 0 for op in COLLECTIVES}
    for m in _COLLECTIVE.finditer(hlo_text):
        counts[m.group("op")] += 1
    return counts


# --- structure: transformations, control flow, order ------------------------------------

#: Sub-jaxpr holders that are constructs of their own: an equation inside one is marked by it.
#: Calls (``jit``, ``custom_jvp_call``, ...) are transparent: they change nothing a strategy is.
CONSTRUCTS = {"scan": "scan", "while": "while", "cond": "cond", "remat": "remat", "checkpoint": "remat",
              "shard_map": "shard_map", "xla_pmap": "pmap", "pmap": "pmap"}
MAX_NESTING = 64  # sub-jaxpr levels walked; deeper ones are counted, not read
MAX_SEQUENCE = 3000  # primitives kept in order
MAX_LOOPS = 400  # constructs listed (a program unrolled into thousands of scans lists the first ones)
MAX_PATHS = 400  # distinct nesting paths; the rest are counted under "(more)"


def _construct(name: str) -> str | None:
    return CONSTRUCTS.get(name.rstrip("0123456789"))


def transforms_of(eqn: Any) -> tuple[str, ...]:
    """The transformations JAX was applying when it made ``eqn``, outermost first
    (``("vmap", "transpose", "jvp")`` for an equation of ``vmap(grad(f))``'s backward pass).
    Read from the name stack's ``Transform`` entries only: scopes carry names from the source."""
    stack = getattr(getattr(getattr(eqn, "source_info", None), "name_stack", None), "stack", ()) or ()
    return tuple(str(getattr(item, "name", "")) for item in stack if type(item).__name__ == "Transform")


def structure(jaxpr: Any) -> dict[str, Any]:
    """What a program is made of, names aside (see the module docstring)::

        {"paths": {"vmap/transpose/jvp": 18, "": 3, "scan/jvp": 5},   # equations per nesting path
         "sequence": ["dot_general", "add", ...],  # primitives in program order, sub-jaxprs inline
         "loops": [{"kind": "scan", "path": "", "length": 6}],        # every construct met
         "deepest": 3, "truncated": 0}

    A path joins, outermost first, the transformations of each equation (relative to its
    enclosing jaxpr, so nested ones add up) and the construct (``scan``, ``while``, ``cond``,
    ``remat``, ...) of each loop, branch or checkpoint it sits in.  Everything is capped
    (``MAX_SEQUENCE``, ``MAX_LOOPS``, ``MAX_PATHS``): the answer stays far below the
    sandbox's answer budget (``plaindata.MAX_ANSWER_ELEMENTS``) whatever the program.
    """
    paths: dict[str, int] = {}
    sequence: list[str] = []
    loops: list[dict[str, Any]] = []
    deepest = truncated = 0
    # frames of an explicit depth-first walk: (equations, next index, path prefix, depth)
    stack: list[list[Any]] = [[list(getattr(jaxpr, "jaxpr", jaxpr).eqns), 0, (), 0]]
    while stack:
        frame = stack[-1]
        eqns, i, prefix, depth = frame
        if i >= len(eqns):
            stack.pop()
            continue
        frame[1] = i + 1
        eqn = eqns[i]
        deepest = max(deepest, depth)
        name = eqn.primitive.name
        path = prefix + transforms_of(eqn)
        key = "/".join(path)
        if key not in paths and len(paths) >= MAX_PATHS:
            key = "(more)"
        paths[key] = paths.get(key, 0) + 1
        if len(sequence) < MAX_SEQUENCE:
            sequence.append(name)
        construct = _construct(name)
        if construct is not None and len(loops) < MAX_LOOPS:
            length = eqn.params.get("length") if construct == "scan" else None
            loops.append({"kind": construct, "path": key, "length": length if isinstance(length, int) else None})
        children = sub_jaxprs(eqn.params)
        if children and depth >= MAX_NESTING:
            truncated += 1
            continue
        inner = path + ((construct,) if construct else ())
        for child in reversed(children):
            stack.append([list(getattr(child, "jaxpr", child).eqns), 0, inner, depth + 1])
    return {"paths": paths, "sequence": sequence, "loops": loops, "deepest": deepest, "truncated": truncated}
