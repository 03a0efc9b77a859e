"""The grader's modules stay as they were before the learner's code loaded
(``grader.sandbox.namespaces``): any change is an accusation naming what changed.

The learner's code reaches every grader class through ``object.__subclasses__()`` and every
module namespace through a function's ``__globals__``; no audit event covers either, so the
worker compares a snapshot of those namespaces after each request.  Here the snapshot is
taken of small stand-in modules (named ``grader.*``) and changed the ways a file could."""

from __future__ import annotations

import types

import pytest

from grader.sandbox.namespaces import Watch


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, f"/grader/{name}.py", "exec"), vars(module))
    return module


PROBE = """
CACHE = {}
TABLE = {"generic": 1, "other": 2}
ORDER = [1, 2]

def helper(x, scale=2, *, shift=0):
    return x * scale + shift

def _make():
    bound = helper
    def probe(x):
        return bound(x)
    return probe

probe = _make()

class Recorder:
    limit = 3
    def run(self):
        return helper(1)
    @staticmethod
    def static():
        return 1
    @property
    def size(self):
        return self.limit

STATE = Recorder()
"""


@pytest.fixture
def watched():
    mod = _module("grader.fake_probe", PROBE)
    return mod, Watch({"grader.fake_probe": mod}, sandbox="/learner")


def _whats(changes) -> list[str]:
    import json

    return [json.loads(c)["what"] for c in changes]


def test_an_untouched_grader_and_its_caches_filling_up_accuse_no_one(watched):
    mod, watch = watched
    mod.CACHE["key"] = object()
    mod.ORDER.append(3)
    mod.STATE.count = 1  # an instance gains an attribute: allowed, as caches gain entries
    vars(mod)["__warningregistry__"] = {"version": 1}  # what `warnings` adds on its own
    assert watch.changes() == []


@pytest.mark.parametrize("change, what", [
    (lambda m: setattr(m, "helper", lambda x: x), "grader.fake_probe.helper"),
    (lambda m: vars(m).pop("ORDER"), "grader.fake_probe.ORDER"),
    (lambda m: setattr(m, "len", lambda x: 0), "grader.fake_probe.len"),  # would shadow the builtin
    (lambda m: setattr(m.Recorder, "run", lambda self: 0), "grader.fake_probe.Recorder.run"),
    (lambda m: setattr(m.Recorder, "__enter__", lambda self: 0), "grader.fake_probe.Recorder.__enter__"),
    (lambda m: setattr(m.helper, "__defaults__", (0,)), "grader.fake_probe.helper.__defaults__"),
    (lambda m: setattr(m.helper, "__kwdefaults__", {"shift": 9}), "grader.fake_probe.helper.__kwdefaults__"),
    (lambda m: setattr(m.helper, "__code__", (lambda x, scale=2, *, shift=0: 0).__code__),
     "grader.fake_probe.helper.__code__"),
    (lambda m: setattr(m.probe.__closure__[0], "cell_contents", abs), "grader.fake_probe.probe.<closure>"),
    (lambda m: m.TABLE.__setitem__("generic", 7), "grader.fake_probe.TABLE[generic]"),
    (lambda m: m.ORDER.__setitem__(0, 7), "grader.fake_probe.ORDER"),
    (lambda m: setattr(m.STATE, "limit", 9) or setattr(m.Recorder, "limit", 9), "grader.fake_probe.Recorder.limit"),
])
def test_each_change_is_an_accusation_naming_it(watched, change, what):
    mod, watch = watched
    change(mod)
    assert what in _whats(watch.changes())


def test_the_accusation_names_where_the_replacement_was_defined_and_is_made_once(watched):
    import json

    mod, watch = watched

    def fake(x):
        return x

    mod.helper = fake
    first = watch.changes()
    assert len(first) == 1 and watch.changes() == first  # sticky, not repeated
    got = json.loads(first[0])
    assert got["kind"] == "grader_rebind" and got["file"] == __file__
    assert got["line"] == fake.__code__.co_firstlineno


def test_a_key_of_the_learners_never_runs_its_code():
    ran = []

    class Sly(str):
        def __eq__(self, other):
            ran.append(1)
            return True

        __hash__ = str.__hash__

    mod = _module("grader.fake_probe", PROBE)
    watch = Watch({"grader.fake_probe": mod})
    vars(mod)[Sly("extra")] = 1  # a key the snapshot never saw
    vars(mod)[Sly("helper")] = 1  # equal to `helper` by its own __eq__: replaces that name's value
    mod.TABLE[Sly("generic")] = 2
    ran.clear()
    assert sorted(_whats(watch.changes())) == ["grader.fake_probe.<a key that is not a string>",
                                               "grader.fake_probe.TABLE[generic]", "grader.fake_probe.helper"]
    assert ran == []  # the comparison ran none of the keys' code


def test_the_real_graders_modules_are_watched_with_its_probes():
    import sys

    from grader.sandbox import context

    context.preload_probes("ex03_")
    modules = {n: m for n, m in sys.modules.items() if n == "grader" or n.startswith("grader.")}
    watch = Watch(modules)
    assert watch.changes() == []
    assert {"grader.probes.generic", "grader.sandbox.context",
            "grader.exercises.ex03_grad_norms.probes"} <= set(modules)


#: Module-level containers the probes may hold, and why none is a cache of the learner's objects
#: (the snapshot sees a changed entry, not one planted before the probe adds it: so probes that run
#: beside learner code keep no cache between requests -- a jitted wrapper of the learner's
#: function is made afresh for each request).
ALLOWED_CONTAINERS = {
    ("grader.probes.module_state", "_sys_modules"): "sys.modules itself, bound before learner code: read, never written",
    ("grader.probes.fingerprint", "_NAMESPACE"): "names the compare spec's fixed sources run with",
    ("grader.probes.fingerprint", "_KINDS"): "the measurement kinds (grade compare, no verdict)",
    ("grader.probes.fingerprint", "_names_cache"): "grade compare's learner-name lookup (no verdict)",
    ("grader.exercises.ex05_loops.probes", "_forward"): "the clean worker's own jacfwd of its while loop",
    ("grader.exercises.ex06_jaxpr.probes", "_NAMESPACE"): "names the drawn functions' sources run with",
    ("grader.exercises.ex08_equinox.probes", "_sys_modules"): "the interpreter's module table",
    ("grader.exercises.ex09_lowering.probes", "_NAMESPACE"): "names the drawn functions' sources run with",
    ("grader.exercises.ex10_fusion.probes", "_NAMESPACE"): "names the drawn functions' sources run with",
    ("grader.exercises.ex11_cost.probes", "FUNCTIONS"): "the grader's functions to time, fixed at import",
    ("grader.exercises.ex11_cost.probes", "_SENTINEL"): "an empty marker",
    ("grader.exercises.ex14_control_flow.probes", "_TRUTH"): "the clean worker's measured answers",
    ("grader.exercises.ex14_control_flow.probes", "_MEASURES"): "the clean worker's measurements, fixed",
    ("grader.exercises.ex17_collectives.probes", "SIZES"): "the statement's sizes, fixed",
    ("grader.exercises.ex17_collectives.probes", "_TRUTH"): "the clean worker's compiled collectives",
}


def test_no_probe_keeps_a_container_that_is_not_declared():
    """A new module-level dict, list or set in a probe module (a cache of jitted wrappers, say)
    fails here until it is declared above with the reason learner code cannot use it."""
    import importlib
    import pkgutil

    import grader.exercises
    import grader.probes

    names = [f"grader.probes.{i.name}" for i in pkgutil.iter_modules(grader.probes.__path__)]
    names += [f"grader.exercises.{i.name}.probes" for i in pkgutil.iter_modules(grader.exercises.__path__)
              if i.ispkg and importlib.util.find_spec(f"grader.exercises.{i.name}.probes") is not None]
    found = {(name, key) for name in names for key, value in vars(importlib.import_module(name)).items()
             if type(value) in (dict, list, set, bytearray) and not key.startswith("__")}
    assert found - set(ALLOWED_CONTAINERS) == set()
    assert {("grader.exercises.ex05_loops.probes", "_forward")} <= found  # the scan sees what it should


_FROZEN_SOURCE = """
import sys
import fakegrader_helper
TABLE = {"k": 1}
COUNT = 0

def double(x):
    return 2 * x

def bump():
    global COUNT
    COUNT += 1
    return COUNT

def reads(x):
    inner = lambda y: double(y)
    return inner(x), TABLE["k"], len([x]), fakegrader_helper.triple(x), bump()

def imports(x):
    from fakegrader_helper import triple, MODE
    import fakegrader_pkg.sub as sub
    return triple(x), sub.VALUE, MODE, fakegrader_helper.MODE

def local_modules(x):
    import fakegrader_helper
    from fakegrader_pkg import sub
    return fakegrader_helper.triple(x), sub.VALUE
"""

_HELPER_SOURCE = """
MODE = "first"

def triple(x):
    return 3 * x

def set_mode(mode):
    global MODE
    MODE = mode
"""


@pytest.mark.skipif(not __import__("grader.sandbox.freeze", fromlist=["SUPPORTED"]).SUPPORTED,
                    reason="the grader's code is frozen on CPython 3.11 only")
def test_freezing_binds_globals_builtins_containers_imports_and_module_attributes(monkeypatch):
    """What ``grader.sandbox.freeze`` makes constant (a module function, a nested lambda's
    global, a dict's binding, a builtin, an attribute of a frozen module read off an imported
    name, a name imported inside a function) no later rebinding changes -- in a module, in
    ``builtins``, in ``sys.modules``; a name assigned with ``global`` is still read afresh,
    wherever it is read."""
    import builtins
    import sys

    from grader.sandbox import freeze

    monkeypatch.setattr(freeze, "_PARSED", types.SimpleNamespace(table={}, modules={}, keep={}))
    helper = _module("fakegrader_helper", _HELPER_SOURCE)
    pkg, sub = types.ModuleType("fakegrader_pkg"), types.ModuleType("fakegrader_pkg.sub")
    pkg.__path__, pkg.sub, sub.VALUE = [], sub, 1
    for m in (helper, pkg, sub):
        monkeypatch.setitem(sys.modules, m.__name__, m)
    module = types.ModuleType("fakegrader_main")
    own_builtins = dict(vars(builtins))  # its own: replacing `len` for the whole process is unsafe
    vars(module)["__builtins__"] = own_builtins
    exec(_FROZEN_SOURCE, vars(module))
    functions = [v for v in [*vars(module).values(), *vars(helper).values()] if type(v) is types.FunctionType]
    modules = {m.__name__: m for m in (module, helper, pkg, sub)}
    assert freeze.freeze(modules, functions) >= 11
    space = vars(module)
    space["double"] = lambda x: -1
    space["TABLE"] = {"k": -1}
    vars(helper)["triple"] = lambda x: -1
    own_builtins["len"] = lambda obj: -1
    assert module.reads(5) == (10, 1, 1, 15, 1)
    space["COUNT"] = 100  # `global COUNT`: read afresh
    assert module.reads(5)[-1] == 101
    fake_pkg = types.ModuleType("fakegrader_pkg")
    fake_pkg.__path__, fake_pkg.sub = [], types.SimpleNamespace(VALUE=-1)
    monkeypatch.setitem(sys.modules, "fakegrader_pkg", fake_pkg)
    monkeypatch.setitem(sys.modules, "fakegrader_helper", types.SimpleNamespace(triple=lambda x: -1, MODE="x"))
    # MODE is assigned with `global` in its module: read afresh, from the module found now
    assert module.imports(5) == (15, 1, "x", "first")
    helper.set_mode("second")
    assert module.imports(5)[2:] == ("x", "second")
    sub.VALUE = -1  # a module an import binds to a local: read off it as off a global
    assert module.local_modules(5) == (15, 1)


@pytest.mark.skipif(not __import__("grader.sandbox.freeze", fromlist=["SUPPORTED"]).SUPPORTED,
                    reason="the grader's code is frozen on CPython 3.11 only")
def test_the_bytecode_search_agrees_with_dis_on_jaxs_code():
    """``freeze`` finds what it rewrites by searching a code object's opcodes (fast enough to
    freeze all of JAX in every zygote); on every fifth code object of JAX's it finds exactly the
    global reads, imports, ``global`` assignments and jump targets that ``dis`` does."""
    import dis

    import jax  # noqa: F401

    from grader.sandbox import freeze

    codes, seen = [], set()

    def walk(code):
        if id(code) not in seen:
            seen.add(id(code))
            codes.append(code)
            for const in code.co_consts:
                if isinstance(const, types.CodeType):
                    walk(const)

    for fn in freeze.library(("jax",))[1]:
        walk(fn.__code__)
    assert len(codes) > 5000
    for code in codes[::5]:
        parsed = freeze._parsed(code)
        found = list(dis.get_instructions(code))
        assert list(parsed.sites) == [i.offset // 2 for i in found if i.opname in ("LOAD_GLOBAL", "IMPORT_NAME")]
        assert parsed.globals_stored == {i.argval for i in found if i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL")}
        labels = {x // 2 for x in dis.findlabels(code.co_code)} | {e.target // 2 for e in dis._parse_exception_table(code)}
        assert freeze._targets(code, parsed) == labels
    freeze._PARSED.table.clear()


_LIBRARY_ATTACK = """
import sys, types
import jax, jax.numpy as jnp
from grader.sandbox import freeze
modules, functions = freeze.library(("jax", "jaxlib"))
lengths = {id(f): len(f.__code__.co_code) for f in functions}
assert freeze.freeze(modules, functions) > 10000
assert all(len(f.__code__.co_code) == lengths[id(f)] for f in functions)  # every instruction kept its place
calls = []
import jax._src.pjit as pjit
from jax._src.interpreters import mlir, pxla
real_trace, real_lower = pjit.jit_trace, pjit._resolve_and_lower
def fake(real, label):
    def f(*a, **k):
        calls.append(label)
        return real(*a, **k)
    return f
pjit.jit_trace, pjit._resolve_and_lower = fake(real_trace, "trace"), fake(real_lower, "lower")
mlir.lower_jaxpr_to_module = fake(mlir.lower_jaxpr_to_module, "module")
pxla._dce_jaxpr = fake(pxla._dce_jaxpr, "dce")
swapped = types.ModuleType("jax._src.pjit")
vars(swapped).update(vars(pjit), _resolve_and_lower=fake(real_lower, "imported"))
sys.modules["jax._src.pjit"] = swapped
f = jax.jit(lambda x: jnp.sin(x) * 2)
traced = f.trace(jnp.ones(3))
print(traced.lower().compile()(jnp.ones(3))[0] > 0, jax.make_jaxpr(f)(1.0).eqns[0].primitive.name, calls)
"""


@pytest.mark.skipif(not __import__("grader.sandbox.freeze", fromlist=["SUPPORTED"]).SUPPORTED,
                    reason="the grader's code is frozen on CPython 3.11 only")
def test_jaxs_own_code_frozen_calls_the_functions_jax_defined():
    """A JAX worker's zygote freezes JAX's code too (``grader.sandbox.worker.import_harness``):
    rebinding the module functions JAX calls to trace, lower and compile a jit (the route a
    file took to show the probes a decoy jaxpr), or swapping ``sys.modules`` for a function
    JAX imports at call time, changes nothing JAX calls.  Run in a fresh interpreter: this
    process's JAX stays as it is."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _LIBRARY_ATTACK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "jit", "[]"]


def test_sealed_grader_classes_refuse_every_change_to_their_attributes():
    """``grader.sandbox.freeze.seal`` makes the grader's classes immutable types: a method (read
    off the class at every call) cannot be replaced even for a moment, nor an object's class
    swapped; objects keep their own attributes."""
    from grader.sandbox import freeze, namespaces

    module = _module("grader.fake_sealed", "class Recorder:\n    def to_plain(self):\n        return 'real'\n\n"
                                           "    class Inner:\n        pass\n\nrec = Recorder()\n")
    functions, classes = namespaces.grader_code({"grader.fake_sealed": module})
    assert set(classes) == {module.Recorder, module.Recorder.Inner}
    assert module.Recorder.to_plain in functions
    assert freeze.seal(classes) == 2
    assert freeze.seal(classes) == 0  # sealed once
    for cls, attr in ((module.Recorder, "to_plain"), (module.Recorder, "new"), (module.Recorder.Inner, "x")):
        with pytest.raises(TypeError, match="immutable type"):
            setattr(cls, attr, lambda self: "forged")
        with pytest.raises(TypeError, match="immutable type"):
            type.__setattr__(cls, attr, 1)
    with pytest.raises(TypeError, match="immutable type"):
        del module.Recorder.to_plain

    class Fake:
        def to_plain(self):
            return "forged"

    with pytest.raises(TypeError, match="mutable types"):
        module.rec.__class__ = Fake
    module.rec.note = 1
    assert module.rec.to_plain() == "real" and module.rec.note == 1


def test_a_primitive_is_named_as_jax_named_it_and_one_of_the_learners_hides_nothing(monkeypatch):
    """``grader.ir.primitive_name`` reads the table ``grader.sandbox.pins`` binds: a renamed
    pinned primitive keeps its name; a primitive a library module imported later defines keeps
    its own; one that no library module defines (the learner's code made it, and could hide a
    loop behind one equation) raises ``ForeignPrimitive``, in every walk of a jaxpr."""
    import sys
    import types as _types

    import jax
    from jax.extend.core import Primitive

    from grader import ir

    pinned, own = Primitive("scan"), Primitive("learners_op")
    late = Primitive("late_op")
    module = _types.ModuleType("jax._fake_late_module")  # imported after the pin, from JAX's folder
    exec(compile("def helper():\n    return 1\n", jax.__file__, "exec"), vars(module))
    module.late_p = late
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(ir, "_PINNED_NAMES", _types.MappingProxyType({id(pinned): (pinned, "scan")}))
    monkeypatch.setattr(ir, "_PINNED_NAME_SET", frozenset({"scan"}))
    monkeypatch.setattr(ir, "_LIBRARY_DIRS", (jax.__file__.rsplit("/", 1)[0] + "/",))
    monkeypatch.setattr(ir, "_LIBRARY_PREFIXES", (("jax",), ("jax.",)))
    monkeypatch.setattr(ir, "_LATE", _types.SimpleNamespace(known={}))
    pinned.name = "mapped"
    assert ir.primitive_name(pinned) == "scan"
    assert ir.primitive_name(late) == "late_op"
    with pytest.raises(ir.ForeignPrimitive, match="learners_op"):
        ir.primitive_name(own)
    vars(module)["late_p"] = own  # a learner's primitive put into a module whose functions are not its own
    del vars(module)["helper"]
    with pytest.raises(ir.ForeignPrimitive):
        ir.primitive_name(own)
    own.def_abstract_eval(lambda x: x)
    closed = jax.make_jaxpr(lambda x: own.bind(x) + 1.0)(1.0)
    for walk in (ir.primitive_counts, ir.largest_value, ir.jaxpr_summary):
        with pytest.raises(ir.ForeignPrimitive):
            walk(closed)
    assert ir.tally(["a", "b", "a"]) == {"a": 2, "b": 1}


def test_a_program_rewritten_in_place_shows_in_its_identity():
    """``grader.ir.identity`` (what ``traced_run`` compares before and after compiling) changes
    when a ``ClosedJaxpr``'s slots are swapped for another program's, or when an equation's
    parameters are written in place -- and not when the same program is read twice."""
    import jax
    import jax.numpy as jnp

    from grader import ir

    real = jax.make_jaxpr(lambda x: jax.lax.scan(lambda c, y: (c + y, c), 0.0, x))(jnp.ones(3))
    decoy = jax.make_jaxpr(lambda x: (jnp.tanh(x).sum(), x))(jnp.ones(3))
    before = ir.identity(real)
    assert ir.identity(real) == before
    eqn = real.jaxpr.eqns[-1]
    body = eqn.params["jaxpr"]
    eqn.params["jaxpr"] = decoy  # in place: the same dict
    assert ir.identity(real) != before
    eqn.params["jaxpr"] = body
    assert ir.identity(real) == before
    real._jaxpr, real._consts = decoy._jaxpr, decoy._consts
    assert ir.identity(real) != before
