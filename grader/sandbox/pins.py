"""Pin the library objects the grader's measurements read, before learner code exists.

The probes read JAX's objects *after* the learner's code ran in the same process: a jaxpr's
equations (``Jaxpr.eqns``, ``eqn.primitive``, ``eqn.params``), a primitive's name, a
compiled program's cost analysis and HLO text (``Compiled.cost_analysis`` ->
``MeshExecutable.cost_analysis``).  Those are Python objects of JAX's, and JAX's modules are
not watched (honest code may monkeypatch JAX), so a file could rename ``scan_p`` to hide a
loop, or replace ``MeshExecutable.cost_analysis`` to report another program's flops -- for
good, or only until the probe has read it.  So, in each worker, before the freeze (which then
folds what is bound here into the grader's code as constants):

* **classes**: every class ``grader.jaxcompat.MEASURED_CLASSES`` names, with its bases and its
  subclasses, is sealed (``grader.sandbox.freeze.seal``): none of their attributes or methods
  can be set or deleted any more, so neither a method nor a data descriptor (a ``property``
  named ``name`` on ``Primitive``) can be put in front of what the probe reads;
* **primitive names**: ``grader.ir.primitive_name`` reads a primitive's name from a table of
  every primitive the libraries' modules hold when the worker starts (read-only: a
  ``mappingproxy``), keyed by the object, so ``scan_p.name = "mapped"`` changes nothing the
  grader reads; a primitive no library module defines (the learner's own) fails every
  structural reading (``grader.ir.ForeignPrimitive``);
* **rules**: JAX's rule tables for those primitives and the primitives' own attributes
  (``rule_tables``), which the namespace watch compares after every request: a lowering,
  differentiation or batching rule of JAX's replaced, removed or added, or a primitive
  renamed, is an accusation;
* **the jaxpr walk**: ``grader.jaxcompat.jaxprs_in_params`` uses JAX's ``Jaxpr`` and
  ``ClosedJaxpr`` classes bound here, not a function looked up in ``jax.extend.core`` (a
  module attribute and a ``sys.modules`` entry the learner's code can replace).

The primitives and rule tables are read once in the zygote, after every probe module is
imported (``prepare``); each worker then seals and binds (``pin``: a few milliseconds).
What JAX's own functions call through their modules' globals is frozen earlier, in the
zygote too (``grader.sandbox.freeze``).
"""

from __future__ import annotations

import os
import sys
import types

from grader.sandbox.frames import resolve_object
from grader.sandbox.freeze import LIBRARIES, library_modules


_PREFIXES = tuple(p + "." for p in LIBRARIES)  # for grader.ir, which recognises a module imported later


def _family(classes) -> list:
    """``classes``, their bases (but ``object``) and every subclass of theirs, each once."""
    out, seen = [], set()
    todo = [c for cls in classes for c in cls.__mro__ if c is not object]
    while todo:
        cls = todo.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        out.append(cls)
        todo.extend(type.__subclasses__(cls))
    return out


#: ``.taken``: (loaded library modules, primitive table, rule tables), taken once in a zygote
#: before it forks (``prepare``) for all its workers; ``None`` where no zygote took them.
_PREPARED = types.SimpleNamespace(taken=None)


def prepare() -> None:
    """In a zygote, before it forks: what ``pin`` reads of JAX (its primitives and rule tables,
    a scan of every library module's namespace), taken once instead of in every worker."""
    _PREPARED.taken = _take()


def _take() -> tuple:
    from grader import jaxcompat

    primitive = jaxcompat.primitive_class()
    names = {}
    loaded = list(library_modules().items())
    for _, module in loaded:
        for value in list(vars(module).values()):
            if isinstance(value, primitive):
                names[id(value)] = (value, value.name)
    return loaded, names, rule_tables(names)


def pin(modules: dict) -> dict:
    """Seal the measured classes and bind the primitive table and the jaxpr classes into the
    grader's modules ``modules`` (name -> module: the worker's, taken before they left
    ``sys.modules``) as module globals, which the freeze that follows makes constants.
    Returns what was pinned, and JAX's rule tables for the namespace watch."""
    jaxcompat, freeze = modules["grader.jaxcompat"], modules["grader.sandbox.freeze"]
    loaded, names, rules = _PREPARED.taken or _take()
    _PREPARED.taken = None
    classes = _family(c for c in (resolve_object(*s.split(":")) for s in jaxcompat.MEASURED_CLASSES
                                  if s.split(":")[0] in sys.modules)  # not Pallas's where no probe loaded it
                      if isinstance(c, type))
    if "grader.ir" in modules:  # loaded with every probe that reads a jaxpr
        dirs = tuple(os.path.dirname(m.__file__) + os.sep for n, m in loaded
                     if n in LIBRARIES and type(getattr(m, "__file__", None)) is str)
        vars(modules["grader.ir"]).update(_PINNED_NAMES=types.MappingProxyType(names),
                                          _PINNED_NAME_SET=frozenset(name for _, name in names.values()),
                                          _PINNED_MODULES=frozenset(id(m) for _, m in loaded),
                                          _LIBRARY_DIRS=dirs, _LIBRARY_PREFIXES=(LIBRARIES, _PREFIXES))
    vars(jaxcompat).update(_JAXPR_TYPES=jaxcompat.jaxpr_types(), _KEY_TEST=jaxcompat.key_test())
    return {"primitives": len(names), "classes": freeze.seal(classes), "rules": rules}


def rule_tables(names: dict) -> list:
    """What JAX registered for its own primitives, for ``grader.sandbox.namespaces.Watch`` to
    hold fixed: ``(label, table, key names, snapshot, strict)`` for every dict a JAX module holds
    (or dict of dicts: ``mlir._platform_specific_lowerings``) whose keys include primitives of
    ``names`` (the pinned ones: id -> (primitive, name)) -- the lowering, differentiation,
    batching, partial-evaluation and discharge rules, found by what they hold, not from a list --
    and, for each pinned primitive, its own attributes (``impl``, ``abstract_eval``, ...).  JAX
    fills the tables when its modules are imported.  No honest file replaces, removes or *adds*
    (``strict``) a rule of a primitive JAX defined -- a primitive of its own, or one a module
    imported later defines, is not held -- while ``register_lowering(pallas_call_p, ...)``
    showed a probe one program and compiled another."""
    prim_names = {k: name for k, (_, name) in names.items()}
    tables, seen = [], set()

    def add(label: str, table) -> None:
        if id(table) in seen or not isinstance(table, dict):
            return
        snapshot = {id(k): v for k, v in list(table.items()) if id(k) in prim_names}
        if snapshot:
            seen.add(id(table))
            tables.append((label, table, prim_names, snapshot, True))

    for name, module in library_modules().items():
        for key, value in list(vars(module).items()):
            if isinstance(value, dict) and value:
                add(f"{name}.{key}", value)
                for inner_key, inner in list(value.items()):
                    if isinstance(inner, dict):
                        add(f"{name}.{key}[{inner_key!r}]", inner)
    for prim, name in names.values():
        space = getattr(prim, "__dict__", None)
        if type(space) is dict:
            tables.append((f"the primitive {name}", space, {id(k): k for k in space},
                           {id(k): v for k, v in space.items()}, False))
    return tables
