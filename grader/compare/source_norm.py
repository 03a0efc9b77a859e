"""Normalised source: a learner's file with names, comments, docstrings and formatting removed.

Works on the ``ast``, so formatting and comments vanish by construction.  Then:

* later top-level definitions win, as in Python (a file that redefines a function is
  read as the definition that runs);
* top-level definitions identical to the stub's (the code the exercise hands out) and
  imports are left out: what remains is the *learner part*, what the learner wrote;
* docstrings and annotations are dropped; every name the file binds (functions, classes,
  arguments, variables) becomes ``_v<n>`` in order of first appearance, and an imported
  name becomes what it imports (``jnp`` -> ``jax.numpy``), so renaming anything, or
  importing under another alias, changes nothing;
* parameter names spelled as strings (``static_argnames="max_steps"``) follow the parameter.

``fingerprint`` gives the normalised text and a hash of it; ``similarity`` compares two
learner parts by the overlap of their 5-token shingles (1.0: identical after
normalisation).  ``closure_hash`` fingerprints one function together with every
module-level function it calls (the approach of a pure-Python function).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import re
import zlib

SHINGLE = 5
_ARGNAME_KEYWORDS = frozenset({"static_argnames", "donate_argnames"})
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*|\d+(?:\.\d*)?(?:e[-+]?\d+)?|\S")


@dataclasses.dataclass(frozen=True)
class SourceFingerprint:
    ok: bool  # False: the file does not parse (or is missing)
    text: str  # the normalised learner part, as code
    digest: str  # sha256 of ``text`` (16 hex digits); "" when there is no learner part
    tokens: int
    shingles: frozenset[int]
    problem: str = ""  # why not ok

    @property
    def empty(self) -> bool:
        return self.ok and not self.text


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return []


def effective_statements(tree: ast.Module) -> list[ast.stmt]:
    """Top-level statements, a redefined name keeping only its last definition."""
    last: dict[str, int] = {}
    for i, node in enumerate(tree.body):
        for name in _bound_names(node):
            last[name] = i
    keep = []
    for i, node in enumerate(tree.body):
        names = _bound_names(node)
        if names and all(last[n] != i for n in names):
            continue
        keep.append(node)
    return keep


class _Imports(ast.NodeVisitor):
    """What each imported alias stands for: ``jnp`` -> ``jax.numpy``."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                top = a.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            self.aliases[a.asname or a.name] = f"{node.module or ''}.{a.name}".lstrip(".")


class _Bound(ast.NodeVisitor):
    """Every name the file binds, and the parameter names of its functions."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.params: set[str] = set()

    def visit_FunctionDef(self, node) -> None:
        self.names.add(node.name)
        self._args(node.args)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.names.add(node.name)
        self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._args(node.args)
        self.generic_visit(node)

    def _args(self, args: ast.arguments) -> None:
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None:
                self.names.add(a.arg)
                self.params.add(a.arg)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.names.add(node.id)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.names.add(node.name)
        self.generic_visit(node)


class _Renamer(ast.NodeTransformer):
    def __init__(self, bound: _Bound, aliases: dict[str, str]) -> None:
        self.bound = bound
        self.aliases = aliases
        self.placeholders: dict[str, str] = {}

    def _name(self, name: str) -> str:
        if name in self.bound.names:
            return self.placeholders.setdefault(name, f"_v{len(self.placeholders)}")
        return self.aliases.get(name, name)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name(id=self._name(node.id), ctx=node.ctx), node)

    def visit_FunctionDef(self, node):
        node.name = self._name(node.name)
        node.returns = None
        node.body = [s for s in node.body if not _is_docstring(s)] or [ast.Pass()]
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self._name(node.name)
        node.body = [s for s in node.body if not _is_docstring(s)] or [ast.Pass()]
        return self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._name(node.arg)
        node.annotation = None
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        value = node.value if node.value is not None else ast.Constant(None)
        new = ast.Assign(targets=[node.target], value=value, lineno=node.lineno)
        return self.generic_visit(new)

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        if node.arg in _ARGNAME_KEYWORDS:  # static_argnames="max_steps" names a parameter
            for const in ast.walk(node.value):
                if isinstance(const, ast.Constant) and isinstance(const.value, str) and const.value in self.bound.params:
                    const.value = self._name(const.value)
        if node.arg is not None and node.arg in self.bound.params:
            node.arg = self._name(node.arg)
        return self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        if node.name:
            node.name = self._name(node.name)
        return self.generic_visit(node)


#: Syntax nested deeper than this is cut (``ast.unparse``/``ast.dump`` recurse once per level,
#: and a valid file can nest thousands: ``0 + 0 + ... + 0``); what is cut reads as one constant.
MAX_DEPTH = 80
CUT = "<nested too deeply to read>"


def _bounded(tree: ast.AST, limit: int = MAX_DEPTH) -> ast.AST:
    """``tree`` with every subtree below depth ``limit`` replaced by a constant, in place,
    walked with an explicit stack (never recursion)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        if depth + 1 >= limit and isinstance(item, ast.expr):
                            value[i] = ast.Constant(CUT)
                        else:
                            stack.append((item, depth + 1))
            elif isinstance(value, ast.AST):
                if depth + 1 >= limit and isinstance(value, ast.expr):
                    setattr(node, field, ast.Constant(CUT))
                else:
                    stack.append((value, depth + 1))
    return tree


def _parse(source: str) -> ast.Module:
    """``ast.parse`` with nesting bounded (``_bounded``); SyntaxError etc. as ``ast.parse``."""
    return _bounded(ast.parse(source))


def parse_bounded(source: str | None) -> ast.Module | None:
    """The file's syntax tree with nesting bounded, or None when it does not parse."""
    if source is None:
        return None
    try:
        return _parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _dump(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def _aliases(tree: ast.Module) -> dict[str, str]:
    imports = _Imports()
    imports.visit(tree)
    return imports.aliases


def _statement_key(node: ast.stmt, aliases: dict[str, str]) -> str:
    """One top-level statement with its local names renamed and imports resolved, its own
    and every module-level name kept: how a learner's definition is matched with the stub's."""
    copy = _copy(node)
    bound = _Bound()
    bound.visit(copy)
    bound.names -= set(_bound_names(copy))
    return _dump(_Renamer(bound, aliases).visit(copy))


@functools.lru_cache(maxsize=16)
def _stub_keys(stub_source: str | None) -> frozenset[str]:
    """The stub's top-level statements, as ``_statement_key``s (one stub for a whole class:
    computed once)."""
    if not stub_source:
        return frozenset()
    tree = parse_bounded(stub_source)
    if tree is None:
        return frozenset()
    aliases = _aliases(tree)
    return frozenset(_statement_key(node, aliases) for node in effective_statements(tree))


def learner_part(tree: ast.Module, stub_source: str | None, aliases: dict[str, str] | None = None) -> list[ast.stmt]:
    """The statements a learner wrote: effective ones, minus imports, module docstrings, the
    ``__main__`` block and statements the stub has too (up to local names and docstrings)."""
    given = _stub_keys(stub_source)
    aliases = _aliases(tree) if aliases is None else aliases
    return [node for node in effective_statements(tree)
            if not isinstance(node, (ast.Import, ast.ImportFrom)) and not _is_docstring(node)
            and not (isinstance(node, ast.If) and _is_main_guard(node)) and _statement_key(node, aliases) not in given]


def _is_main_guard(node: ast.If) -> bool:
    return "__main__" in _dump(node.test)


def normalise(statements: list[ast.stmt], tree: ast.Module, aliases: dict[str, str] | None = None) -> str:
    """``statements`` (from ``tree``) as normalised code."""
    aliases = _aliases(tree) if aliases is None else aliases
    bound = _Bound()
    for node in tree.body:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.visit(node)
    module = ast.Module(body=[_copy(s) for s in statements], type_ignores=[])
    module = _Renamer(bound, aliases).visit(module)
    ast.fix_missing_locations(module)
    return ast.unparse(module)


def _copy(node: ast.AST) -> ast.AST:
    return ast.parse(ast.unparse(node)).body[0] if isinstance(node, ast.stmt) else node


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def shingles(toks: list[str], k: int = SHINGLE) -> frozenset[int]:
    if len(toks) < k:
        return frozenset([_stable_hash(toks)]) if toks else frozenset()
    return frozenset(_stable_hash(toks[i:i + k]) for i in range(len(toks) - k + 1))


def _stable_hash(toks: list[str]) -> int:
    return zlib.crc32("\x1f".join(toks).encode())


def fingerprint(source: str | None, stub_source: str | None = None) -> SourceFingerprint:
    """The normalised learner part of ``source`` (see the module docstring)."""
    if source is None:
        return SourceFingerprint(False, "", "", 0, frozenset(), "the file is missing")
    try:
        tree = _parse(source)
    except (SyntaxError, ValueError) as exc:
        return SourceFingerprint(False, "", "", 0, frozenset(), f"syntax error: {getattr(exc, 'msg', exc)}")
    except (RecursionError, MemoryError):
        return SourceFingerprint(False, "", "", 0, frozenset(), "could not be parsed: nested too deeply")
    aliases = _aliases(tree)
    text = normalise(learner_part(tree, stub_source, aliases), tree, aliases)
    toks = tokens(text)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16] if text else ""
    return SourceFingerprint(True, text, digest, len(toks), shingles(toks))


def similarity(a: SourceFingerprint, b: SourceFingerprint) -> float:
    """Jaccard overlap of the two learner parts' shingles (1.0 when identical after normalisation)."""
    if a.digest and a.digest == b.digest:
        return 1.0
    if not a.shingles or not b.shingles:
        return 0.0
    return len(a.shingles & b.shingles) / len(a.shingles | b.shingles)


def _calls(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def closure_hash(source: str | None, function: str) -> str:
    """A hash of ``function`` and every module-level definition it uses (transitively),
    normalised; "missing" when the file has no such function, "unparsable" on a syntax error."""
    if source is None:
        return "missing"
    tree = parse_bounded(source)
    if tree is None:
        return "unparsable"
    defs = {name: node for node in effective_statements(tree) for name in _bound_names(node)}
    if function not in defs:
        return "missing"
    seen: list[str] = []
    todo = [function]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.append(name)
        todo.extend(sorted(_calls(defs[name]) - set(seen)))
    nodes = [node for node in effective_statements(tree) if any(n in seen for n in _bound_names(node))]
    text = normalise(nodes, tree)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
