"""What a solution is made of, as features a strategy can be read from.

``grade compare`` groups a class first by **strategy** (what an instructor calls the
approach: vmap of grad, a loop over the batch, backprop by hand) and only then by
**variant** (the exact fingerprint).  A strategy must survive everything that does not
change the approach -- a ``tree_map`` instead of a list, where ``jit`` sits, one extra
reshape, any name -- so it is read from measured structure, never from names:

``forms``       how automatic differentiation is composed with vmap and loops, read from
                the transformations JAX records on every equation (``vmap``, ``jvp``,
                ``transpose``; ``grader.compare.jaxpr_canon.structure``): ``vmap·grad``
                is an equation made by vmap of a reverse-mode gradient, ``vmap·grad·vmap``
                one made by jacrev of a vmapped function, ``scan·grad`` a gradient taken
                inside a loop, ``vmap·vmap·jvp`` forward mode per example.  ``transpose``
                then ``jvp`` is reverse mode (``grad``); a ``jvp`` on its own is forward mode.
``constructs``  loops, branches and checkpoints, where they sit, and whether a loop's
                length follows the size (``scan``, ``scan~size``, ``cond in scan``).
``grows``       whether the program has more equations at a larger size (a batch, a number
                of steps): a Python loop unrolls into the program, vmap and scan do not.
``families``    the share of each primitive family (matmul, elementwise, transcendental,
                reduction, layout, ...), and ``ngrams``: families three at a time in
                program order, so the order of an optimizer's stages counts.
``compiles``    compile behaviour on the spec's calls: "once", or "again" when a later call
                compiles (a function jitted afresh each time).
``python``      for pure-Python functions (no jaxpr): the shape of their syntax tree --
                recursion, an explicit stack, a generator, a class, reading the printed
                text, ... and the share of each kind of syntax node.  Identifiers never count.

``features_of`` builds them from a fingerprint (and the source, for pure-Python
functions); ``distance`` compares two (0: the same structure, 1: nothing in common);
``tokens`` lists them as words for labels and diffs.  All of it is plain, bounded and
iterative: a hostile file costs no more than any other.
"""

from __future__ import annotations

import ast
import dataclasses
from collections import Counter
from typing import Any

import numpy as np

from grader.compare.fingerprint import measurement_state

LOOPS = ("scan", "while")
#: Primitive families: what kind of work a primitive does, whatever JAX calls it.
_FAMILIES = {
    "matmul": ("dot_general", "conv_general_dilated", "ragged_dot_general", "scaled_dot", "scaled_matmul"),
    "transcendental": ("exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "sqrt",
                       "rsqrt", "cbrt", "erf", "erfc", "erf_inv", "pow", "sinh", "cosh", "asin", "acos", "atan",
                       "atan2", "asinh", "acosh", "atanh", "lgamma", "digamma", "igamma", "cumlogsumexp"),
    "reduction": ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "reduce_xor",
                  "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "reduce", "reduce_precision",
                  "reduce_window_sum", "reduce_window_max", "reduce_window_min", "top_k", "sort"),
    "layout": ("reshape", "broadcast_in_dim", "transpose", "squeeze", "expand_dims", "concatenate", "pad", "slice",
               "dynamic_slice", "dynamic_update_slice", "gather", "scatter", "scatter-add", "scatter-mul",
               "scatter-min", "scatter-max", "scatter-sub", "rev", "iota", "split", "tile", "select_and_scatter_add"),
    "convert": ("convert_element_type", "copy", "copy_p", "bitcast_convert_type", "stop_gradient", "device_put"),
    "call": ("jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call", "custom_lin",
             "custom_vmap_call", "remat", "checkpoint", "name", "optimization_barrier"),
    "control": ("scan", "while", "cond", "shard_map", "xla_pmap"),
    "random": ("random_bits", "random_seed", "random_split", "random_fold_in", "random_wrap", "random_unwrap",
               "threefry2x32", "rng_bit_generator", "rng_uniform"),
    "callback": ("pure_callback", "io_callback", "debug_callback", "debug_print", "ffi_call"),
    "collective": ("psum", "pmax", "pmin", "all_gather", "all_to_all", "ppermute", "reduce_scatter", "axis_index"),
    "elementwise": ("add", "add_any", "sub", "mul", "div", "rem", "neg", "abs", "sign", "max", "min", "integer_pow",
                    "square", "select_n", "clamp", "floor", "ceil", "round", "is_finite", "nextafter", "and", "or",
                    "not", "xor", "eq", "ne", "lt", "le", "gt", "ge", "shift_left", "shift_right_logical",
                    "shift_right_arithmetic", "population_count", "clz", "real", "imag", "conj", "complex"),
}
FAMILY_OF = {p: family for family, prims in _FAMILIES.items() for p in prims}


def family(primitive: str) -> str:
    """A primitive's family (``other`` when not listed); a version number after a name
    (``remat2``) does not matter."""
    return FAMILY_OF.get(primitive) or FAMILY_OF.get(primitive.rstrip("0123456789"), "other")


# --- one measured function ------------------------------------------------------------------

def form(path: str) -> str:
    """A nesting path (``"vmap/transpose/jvp"``) as a composition of transformations and
    constructs, outermost first (``"vmap·grad"``): ``transpose`` followed by ``jvp`` is one
    reverse-mode gradient, a ``jvp`` alone forward mode."""
    parts = [p for p in path.split("/") if p]
    words: list[str] = []
    i = 0
    while i < len(parts):
        if parts[i] == "transpose" and i + 1 < len(parts) and parts[i + 1] == "jvp":
            words.append("grad")
            i += 2
            continue
        words.append(parts[i])
        i += 1
    return "·".join(words)


def _is_ad(form_text: str) -> bool:
    words = form_text.split("·")
    return "grad" in words or "jvp" in words or "transpose" in words


@dataclasses.dataclass(frozen=True)
class Part:
    """The features of one measured function (one structural measurement of the spec)."""

    state: str  # "ok", or what stopped the measurement
    forms: frozenset[str] = frozenset()  # compositions that made equations, AD or not ("vmap·grad", "vmap", "")
    constructs: frozenset[str] = frozenset()  # "scan", "scan~size", "cond in scan", "remat", ...
    grows: bool | None = None  # more equations at the larger size (None: not measured there)
    families: tuple[tuple[str, float], ...] = ()  # share of equations per family
    ngrams: frozenset[str] = frozenset()  # primitives three at a time, in program order
    order: tuple[tuple[str, float], ...] = ()  # where each family's work sits (0 first, 1 last)
    compiles: str | None = None  # "once", or "again" when later calls compile (see _compile_behaviour)
    eqns: int = 0
    primitives: frozenset[str] = frozenset()  # JAX's names of the primitives it uses (for predicates)

    @property
    def reverse(self) -> frozenset[str]:
        """Forms with a reverse-mode gradient in them."""
        return frozenset(f for f in self.forms if "grad" in f.split("·"))

    @property
    def forward(self) -> frozenset[str]:
        """Forms of forward-mode derivatives, when nothing is reverse mode (a reverse-mode
        gradient's own forward pass is a ``jvp`` too: it is not forward mode)."""
        if self.reverse:
            return frozenset()
        return frozenset(f for f in self.forms if "jvp" in f.split("·"))

    @property
    def autodiff(self) -> bool:
        return any(_is_ad(f) for f in self.forms)

    def has_loop(self) -> bool:
        return any(c.split("~")[0].split(" ")[0] in LOOPS for c in self.constructs)


def _compile_behaviour(facts: dict[str, Any]) -> str | None:
    """"once" when nothing compiled after the first of the spec's calls, "again" when
    something did (a function jitted afresh on every call, a retrace), whoever's name it
    bears; None when the calls were not run."""
    later = facts.get("later_compiles")
    if type(later) is not int:
        return None
    return "once" if later == 0 else "again"


def _constructs(structure: dict[str, Any], grown: dict[str, Any] | None) -> frozenset[str]:
    found: set[str] = set()
    loops = structure.get("loops") or []
    for loop in loops:
        kind = str(loop.get("kind", ""))
        outer = [w for w in form(str(loop.get("path", ""))).split("·") if w in ("scan", "while", "cond", "remat")]
        found.add(kind + (f" in {outer[-1]}" if outer else ""))
    if grown:
        before = sorted(x["length"] for x in loops if isinstance(x.get("length"), int))
        after = sorted(x["length"] for x in grown.get("loops") or [] if isinstance(x.get("length"), int))
        if before and after and len(before) == len(after) and before != after:
            found.add("scan~size")  # a loop as long as the size: a loop over the examples or steps
    return frozenset(found)


def _work(sequence: list[str]) -> list[str]:
    """The primitives that do work, in program order (calls and conversions left out)."""
    return [p for p in sequence if family(p) not in ("call", "convert")]


def _ngrams(work: list[str], n: int = 3) -> frozenset[str]:
    """Primitives ``n`` at a time in program order: what follows what (JAX's primitive names)."""
    return frozenset("|".join(work[i:i + n]) for i in range(max(0, len(work) - n + 1)))


def _order(work: list[str]) -> tuple[tuple[str, float], ...]:
    """Where in the program each family's work happens: the mean of its relative positions
    (0 first, 1 last).  Clipping a gradient before Adam puts the reductions first; after
    Adam, last."""
    spots: dict[str, list[float]] = {}
    last = max(1, len(work) - 1)
    for i, p in enumerate(work):
        spots.setdefault(family(p), []).append(i / last)
    return tuple(sorted((f, round(sum(v) / len(v), 3)) for f, v in spots.items()))


def part_of(entry: dict[str, Any]) -> Part:
    """The features of one measurement entry of a fingerprint."""
    state = measurement_state(entry)
    facts = entry.get("facts") or {}
    structure = facts.get("structure")
    if "failed" in entry or not isinstance(structure, dict):
        return Part(state)
    paths = {str(k): int(v) for k, v in (structure.get("paths") or {}).items() if isinstance(v, int)}
    total = sum(paths.values()) or 1
    forms = frozenset(form(p) for p, n in paths.items() if n)
    grown = facts.get("grown") if isinstance(facts.get("grown"), dict) else None
    grows = None if grown is None else int(grown.get("eqns", 0)) > total
    sequence = [str(p) for p in structure.get("sequence") or []]
    counts = Counter(family(p) for p in sequence)
    n = sum(counts.values()) or 1
    families = tuple(sorted((f, round(c / n, 4)) for f, c in counts.items()))
    work = _work(sequence)
    return Part(state, forms, _constructs(structure, grown), grows, families, _ngrams(work), _order(work),
                _compile_behaviour(facts), total, frozenset(sequence))


# --- pure-Python functions --------------------------------------------------------------------

MAX_AST_NODES = 20_000  # a closure larger than this is read up to here


def _closure_nodes(tree: ast.Module, function: str) -> list[ast.AST]:
    """The syntax nodes of ``function`` and every module-level definition it uses, walked
    iteratively (``ast.walk``), at most MAX_AST_NODES."""
    from grader.compare.source_norm import effective_statements

    defs: dict[str, ast.stmt] = {}
    for node in effective_statements(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    defs[t.id] = node
    if function not in defs:
        return []
    seen, todo, nodes = set(), [function], []
    while todo and len(nodes) < MAX_AST_NODES:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        for node in ast.walk(defs[name]):
            nodes.append(node)
            if isinstance(node, ast.Name) and node.id in defs and node.id not in seen:
                todo.append(node.id)
            if len(nodes) >= MAX_AST_NODES:
                break
    return nodes


def _recursive(nodes: list[ast.AST]) -> tuple[bool, bool]:
    """(a function calls itself, directly or through others; a generator does), over the
    functions and methods (``self.method``) of ``nodes``."""
    graph: dict[str, set[str]] = {}
    generators: set[str] = set()
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            calls = set()
            for n in ast.walk(node):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                    calls.add(n.func.id)
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                        isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
                    calls.add(n.func.attr)
                elif isinstance(n, (ast.Yield, ast.YieldFrom)):
                    generators.add(node.name)
            graph.setdefault(node.name, set()).update(calls)
    cyclic = set()
    for start in graph:
        todo, seen = list(graph[start]), set()
        while todo:
            name = todo.pop()
            if name == start:
                cyclic.add(start)
                break
            if name in seen or name not in graph:
                continue
            seen.add(name)
            todo.extend(graph[name])
    return bool(cyclic - generators), bool(cyclic & generators)


#: Functions and methods that parse text (regular expressions, splitting, a jaxpr's printout):
#: a walker built on them reads the printed program rather than its objects.
_TEXT_CALLS = frozenset({"split", "splitlines", "rsplit", "partition", "startswith", "endswith", "findall",
                         "finditer", "match", "search", "fullmatch", "pretty_print"})
#: The tokens that say how a walk goes (the others are style: classes, comprehensions, ...).
CORE_PYTHON = frozenset({"recursion", "recursive generator", "explicit stack", "reads text"})


def python_tokens(nodes: list[ast.AST]) -> frozenset[str]:
    """How a pure-Python function is built, from the shape of its syntax tree."""
    tokens: set[str] = set()
    plain, generator = _recursive(nodes)
    if plain:
        tokens.add("recursion")
    if generator:
        tokens.add("recursive generator")
    for node in nodes:
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            tokens.add("generator")
        elif isinstance(node, ast.ClassDef):
            tokens.add("class")
        elif isinstance(node, ast.While):
            tokens.add("while loop")
            if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("pop", "popleft")
                   for n in ast.walk(node)):
                tokens.add("explicit stack")
        elif isinstance(node, ast.For):
            tokens.add("for loop")
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            tokens.add("comprehension")
        elif isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if name in _TEXT_CALLS:
                tokens.add("reads text")
            elif name in ("isinstance", "type"):
                tokens.add("type tests")
            elif name in ("getattr", "hasattr", "vars"):
                tokens.add("attribute probing")
    return frozenset(tokens)


def _node_shares(nodes: list[ast.AST]) -> tuple[tuple[str, float], ...]:
    counts = Counter(type(n).__name__ for n in nodes if not isinstance(n, (ast.Load, ast.Store, ast.Del)))
    total = sum(counts.values()) or 1
    return tuple(sorted((k, round(v / total, 4)) for k, v in counts.items()))


@dataclasses.dataclass(frozen=True)
class PythonPart:
    state: str  # "ok", "missing", "unparsable"
    tokens: frozenset[str] = frozenset()
    nodes: tuple[tuple[str, float], ...] = ()


def python_part(tree: ast.Module | None, function: str) -> PythonPart:
    if tree is None:
        return PythonPart("unparsable")
    nodes = _closure_nodes(tree, function)
    if not nodes:
        return PythonPart("missing")
    return PythonPart("ok", python_tokens(nodes), _node_shares(nodes))


# --- a whole solution ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Features:
    parts: tuple[tuple[str, Part], ...]  # structural measurements, in spec order
    python: tuple[tuple[str, PythonPart], ...] = ()  # the spec's source functions

    def part(self, name: str | None = None) -> Part:
        """A measurement's features (the first structural one when ``name`` is None)."""
        for n, p in self.parts:
            if name is None or n == name:
                return p
        return Part("missing")

    def py(self, name: str | None = None) -> PythonPart:
        for n, p in self.python:
            if name is None or n == name:
                return p
        return PythonPart("missing")

    @property
    def measured(self) -> bool:
        """Anything to read a strategy from."""
        return any(p.state == "ok" or p.forms for _, p in self.parts) or any(p.state == "ok" for _, p in self.python)


def _parse(source: str | None) -> ast.Module | None:
    from grader.compare.source_norm import parse_bounded

    return parse_bounded(source)


def features_of(spec: Any, fingerprint: dict[str, Any] | None, source: str | None) -> Features:
    """A solution's features: its structural measurements and its pure-Python functions."""
    parts = tuple((e["name"], part_of(e)) for e in (fingerprint or {}).get("measurements", [])
                  if e.get("structural"))
    python: tuple[tuple[str, PythonPart], ...] = ()
    if spec is not None and spec.source_functions:
        tree = _parse(source)
        python = tuple((name, python_part(tree, name)) for name in spec.source_functions)
    return Features(parts, python)


# --- distance -----------------------------------------------------------------------------------

#: How much each kind of feature weighs in the distance between two solutions.
WEIGHTS = {"state": 2.0, "forms": 3.0, "constructs": 2.0, "grows": 2.0, "families": 1.0, "ngrams": 1.0,
           "order": 1.0, "compiles": 1.0, "python_core": 3.0, "python_detail": 0.5, "python_nodes": 0.5}


def _jaccard(sets: list[frozenset[str]]) -> np.ndarray:
    """1 - |A & B| / |A | B| for every pair (0 when both are empty)."""
    vocab: dict[str, int] = {}
    for x in sets:
        for t in x:
            vocab.setdefault(t, len(vocab))
    n = len(sets)
    if not vocab:
        return np.zeros((n, n))
    m = np.zeros((n, len(vocab)), dtype=np.float32)
    for i, x in enumerate(sets):
        m[i, [vocab[t] for t in x]] = 1.0
    inter = m @ m.T
    size = m.sum(axis=1)
    union = size[:, None] + size[None, :] - inter
    return np.where(union > 0, 1.0 - inter / np.maximum(union, 1.0), 0.0)


def _vectors(rows: list[tuple[tuple[str, float], ...]]) -> tuple[np.ndarray, np.ndarray]:
    """Keyed values as a matrix, and which keys each row has."""
    keys: dict[str, int] = {}
    for r in rows:
        for k, _ in r:
            keys.setdefault(k, len(keys))
    values = np.zeros((len(rows), max(1, len(keys))))
    present = np.zeros_like(values, dtype=bool)
    for i, r in enumerate(rows):
        for k, v in r:
            values[i, keys[k]] = v
            present[i, keys[k]] = True
    return values, present


def _l1(rows: list[tuple[tuple[str, float], ...]]) -> np.ndarray:
    """Half the L1 distance of two shares (0: the same mix, 1: nothing in common)."""
    v, _ = _vectors(rows)
    return 0.5 * np.abs(v[:, None, :] - v[None, :, :]).sum(axis=-1)


def _shift(rows: list[tuple[tuple[str, float], ...]]) -> np.ndarray:
    """How far each family's work moved (a family on one side only: 1), averaged."""
    v, p = _vectors(rows)
    both = p[:, None, :] & p[None, :, :]
    either = p[:, None, :] | p[None, :, :]
    moved = np.where(both, np.abs(v[:, None, :] - v[None, :, :]), 0.0) + (either & ~both)
    count = either.sum(axis=-1)
    return np.where(count > 0, moved.sum(axis=-1) / np.maximum(count, 1), 0.0)


def _same(values: list[Any]) -> np.ndarray:
    codes = {v: k for k, v in enumerate(dict.fromkeys(values))}
    c = np.asarray([codes[v] for v in values])
    return c[:, None] == c[None, :]


def _part_distances(parts: list[Part]) -> np.ndarray:
    """Every pairwise distance between measurements of one function (0..1)."""
    state_differs = (~_same([p.state for p in parts])).astype(float)
    total = (WEIGHTS["forms"] * _jaccard([p.forms for p in parts])
             + WEIGHTS["constructs"] * _jaccard([p.constructs for p in parts])
             + WEIGHTS["families"] * _l1([p.families for p in parts])
             + WEIGHTS["ngrams"] * _jaccard([p.ngrams for p in parts])
             + WEIGHTS["order"] * _shift([p.order for p in parts])
             + WEIGHTS["state"] * state_differs)
    weight = np.full(total.shape, sum(WEIGHTS[k] for k in ("forms", "constructs", "families", "ngrams", "order",
                                                            "state")))
    for key, values in (("grows", [p.grows for p in parts]), ("compiles", [p.compiles for p in parts])):
        known = np.asarray([v is not None for v in values])
        both = known[:, None] & known[None, :]
        total += np.where(both, WEIGHTS[key] * (~_same(values)), 0.0)
        weight += np.where(both, WEIGHTS[key], 0.0)
    d = total / weight
    # nothing measured on one side (a stub, a crash): only the state compares
    bare = np.asarray([p.state != "ok" and not p.forms for p in parts])
    return np.where(bare[:, None] | bare[None, :], state_differs, d)


def _python_distances(parts: list[PythonPart]) -> np.ndarray:
    state_differs = (~_same([p.state for p in parts])).astype(float)
    core = [p.tokens & CORE_PYTHON for p in parts]
    detail = [p.tokens - CORE_PYTHON for p in parts]
    total = (WEIGHTS["python_core"] * _jaccard(core) + WEIGHTS["python_detail"] * _jaccard(detail)
             + WEIGHTS["python_nodes"] * _l1([p.nodes for p in parts]))
    d = total / (WEIGHTS["python_core"] + WEIGHTS["python_detail"] + WEIGHTS["python_nodes"])
    bare = np.asarray([p.state != "ok" for p in parts])
    return np.where(bare[:, None] | bare[None, :], state_differs, d)


def distance_matrix(items: list[Features]) -> np.ndarray:
    """Every pairwise distance: 0 when two solutions are built the same way, up to 1 when
    they share nothing.

    Each measured function (and each pure-Python one) is compared on its own; the
    largest difference counts, since solutions that take another approach to any one
    function take another approach to the exercise.  Computed a feature at a time over
    the whole class (matrix products), so hundreds of solutions cost moments."""
    n = len(items)
    worst = np.zeros((n, n))
    if n < 2:
        return worst
    for k in range(max((len(f.parts) for f in items), default=0)):
        worst = np.maximum(worst, _part_distances([f.parts[k][1] if k < len(f.parts) else Part("missing")
                                                   for f in items]))
    for k in range(max((len(f.python) for f in items), default=0)):
        worst = np.maximum(worst, _python_distances([f.python[k][1] if k < len(f.python) else PythonPart("missing")
                                                     for f in items]))
    np.fill_diagonal(worst, 0.0)
    return worst


def distance(a: Features, b: Features) -> float:
    """The distance of two solutions (``distance_matrix`` of the pair)."""
    return float(distance_matrix([a, b])[0, 1])


# --- words ----------------------------------------------------------------------------------------

def _form_words(f: str) -> str:
    return f.replace("·", " of ") if f else "plain"


def tokens(feats: Features, *, prefix_parts: bool = False) -> list[str]:
    """The features as short phrases (for labels, diffs and the JSON), most telling first."""
    out: list[str] = []
    many = len(feats.parts) > 1 and prefix_parts
    for name, p in feats.parts:
        pre = f"{name}: " if many else ""
        if p.state != "ok" and not p.forms:
            out.append(f"{pre}{p.state.replace('_', ' ')}")
            continue
        for f in sorted(p.reverse, key=lambda x: (-len(x), x)):
            out.append(f"{pre}{_form_words(f)}")
        for f in sorted(p.forward, key=lambda x: (-len(x), x)):
            out.append(f"{pre}{_form_words(f)} (forward mode)")
        if not p.autodiff and any("vmap" in f.split("·") for f in p.forms):
            out.append(f"{pre}vmap, no autodiff")
        for c in sorted(p.constructs):
            out.append(f"{pre}{'loop as long as the size' if c == 'scan~size' else c}")
        if p.grows:
            out.append(f"{pre}grows with the size (unrolled)")
        if p.compiles == "again":
            out.append(f"{pre}compiles again on later calls")
        if p.state != "ok":
            out.append(f"{pre}{p.state.replace('_', ' ')}")
    for name, p in feats.python:
        pre = f"{name}: " if len(feats.python) > 1 or feats.parts else ""
        if p.state != "ok":
            out.append(f"{pre}{p.state}")
        else:
            out.extend(f"{pre}{t}" for t in sorted(p.tokens))
    return out

