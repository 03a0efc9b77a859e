"""grader/probes/module_state.py: a module's globals compared by content, so a write made in
place (a dict's existing key, a list item, a NumPy array, an attribute of the module's own
object) shows, and nothing the learner defines runs while looking (red team 15)."""

import types

import numpy as np

from grader.probes import module_state


def _module():
    m = types.ModuleType("learner_mod")
    exec(  # noqa: S102 - a made-up learner module
        "import numpy as np\n"
        "STATE = {'steps': 0, 'lr': 0.0}\n"
        "LOG = [0, [1, 2]]\n"
        "ARR = np.zeros(3)\n"
        "class Box:\n"
        "    count = 0\n"
        "    def __init__(self):\n"
        "        self.n = 0\n"
        "BOX = Box()\n"
        "class Loud(dict):\n"
        "    def items(self):\n"
        "        raise AssertionError('learner code ran')\n"
        "class Sly:\n"
        "    @property\n"
        "    def __dict__(self):\n"
        "        raise AssertionError('learner code ran')\n"
        "LOUD = Loud(a=1)\n"
        "SLY = Sly()\n", m.__dict__)
    return m


def test_unchanged_module_has_an_equal_snapshot():
    m = _module()
    assert module_state.changed(module_state.snapshot(m), module_state.snapshot(m)) == []


def test_in_place_writes_show():
    m = _module()
    writes = {
        "STATE": lambda: m.STATE.__setitem__("steps", 1),
        "LOG": lambda: m.LOG[1].__setitem__(0, 5),
        "ARR": lambda: m.ARR.__setitem__(0, 1.0),
        "BOX": lambda: setattr(m.BOX, "n", 3),
        "Box": lambda: setattr(m.Box, "count", 1),
    }
    for name, write in writes.items():
        before = module_state.snapshot(m)
        write()
        assert module_state.changed(before, module_state.snapshot(m)) == [name], name


def test_rebinding_and_new_globals_show():
    m = _module()
    before = module_state.snapshot(m)
    m.STATE = dict(m.STATE)  # same contents, but rebound: still equal by content, so not a change
    m.NEW = 1
    assert module_state.changed(before, module_state.snapshot(m)) == ["NEW"]


def test_no_learner_code_runs_and_huge_values_are_bounded():
    m = _module()
    m.BIG = [list(range(100)) for _ in range(1000)]  # 100k items: past the budget
    snap = module_state.snapshot(m)  # Loud.items and Sly.__dict__ would raise
    assert snap["SLY"][0] == "id"  # its __dict__ is the learner's: not read
    m.LOUD["a"] = 2  # a dict subclass of the module's own: read with dict's own methods
    assert module_state.changed(snap, module_state.snapshot(m)) == ["LOUD"]
    snap = module_state.snapshot(m)
    m.BIG.append(0)
    assert "BIG" in module_state.changed(snap, module_state.snapshot(m))
    assert np.asarray(m.ARR).shape == (3,)


def _stateful_module():
    m = types.ModuleType("learner_mod")
    exec(  # noqa: S102 - a made-up learner module holding state outside its globals' values
        "import functools, re, jax, jax.numpy as jnp\n"
        "def make():\n"
        "    n = 0\n"
        "    def step(x):\n"
        "        nonlocal n\n"
        "        n += 1\n"
        "        return x\n"
        "    return step\n"
        "nonlocal_step = make()\n"
        "jitted_step = jax.jit(make())\n"
        "def tagged(x):\n"
        "    tagged.calls = getattr(tagged, 'calls', 0) + 1\n"
        "    return x\n"
        "@functools.lru_cache\n"
        "def cached(x):\n"
        "    return x\n"
        "def bump(_state=[0]):\n"
        "    _state[0] += 1\n"
        "def via_json():\n"
        "    import json\n"
        "    json._learner_counter = getattr(json, '_learner_counter', 0) + 1\n"
        "def via_environ():\n"
        "    import os\n"
        "    os.environ['LEARNER_COUNTER'] = os.environ.get('LEARNER_COUNTER', '') + '1'\n"
        "def honest(x):\n"
        "    re.match('a+b', 'aab')\n"  # re keeps its own cache, in place
        "    import json.decoder\n"  # a submodule bound on its package
        "    return cached(x)\n", m.__dict__)
    return m


def test_state_kept_outside_a_global_value_shows_and_library_bookkeeping_does_not():
    m = _stateful_module()
    writes = [
        (["nonlocal_step"], lambda: m.nonlocal_step(1)),  # a closure cell
        (["jitted_step"], lambda: m.jitted_step(1.0)),  # a closure cell of the function jax.jit wraps
        (["tagged"], lambda: m.tagged(1)),  # an attribute set on the function
        (["jax", "jnp"], lambda: setattr(m.jnp, "learner_counter", 1)),  # a data attribute added to a module
        (["jax"], lambda: setattr(m.jax.tree_util, "learner_counter_2", 1)),  # ... to a submodule of one
        (["bump"], lambda: m.bump()),  # a mutable default argument
        (["(module json)"], lambda: m.via_json()),  # a module imported inside a function: no global holds it
        (["(os.environ)"], lambda: m.via_environ()),  # the process environment
    ]
    try:
        for names, write in writes:
            before = module_state.snapshot(m)
            write()
            assert module_state.changed(before, module_state.snapshot(m)) == names, names
        before = module_state.snapshot(m)
        m.honest(3)
        m.honest(4)  # lru_cache's entries, re's cache, a submodule imported: none is the learner's state
        assert module_state.changed(before, module_state.snapshot(m)) == []
    finally:
        import json
        import os

        json.__dict__.pop("_learner_counter", None)
        os.environ.pop("LEARNER_COUNTER", None)
        m.jnp.__dict__.pop("learner_counter", None)
        m.jax.tree_util.__dict__.pop("learner_counter_2", None)


def test_an_object_rebound_after_the_old_one_is_freed_still_shows():
    m = types.ModuleType("learner_mod")
    m.X = object()
    before = module_state.snapshot(m)
    del m.X  # freed, were the snapshot not holding it: the new object could take its id
    m.X = object()
    assert module_state.changed(before, module_state.snapshot(m)) == ["X"]


def test_state_kept_in_builtins_sys_modules_or_a_global_generator_shows_and_a_lazy_import_does_not():
    import builtins
    import random
    import sys

    module = _module()
    module.RNG = np.random.default_rng(0)
    module.PY_RNG = random.Random(0)
    steps = [
        ("(builtins)", lambda: setattr(builtins, "_kept_by_a_test", [])),
        ("(builtins)", lambda: builtins._kept_by_a_test.append(1)),  # in place
        ("(sys.modules)", lambda: sys.modules.__setitem__("kept_by_a_test", {"calls": 0})),
        ("(sys.modules)", lambda: sys.modules["kept_by_a_test"].__setitem__("calls", 1)),
        ("(random)", lambda: np.random.uniform()),
        ("(random)", lambda: random.random()),
    ]
    try:
        for where, step in steps:
            before = module_state.snapshot(module)
            step()
            assert module_state.changed(before, module_state.snapshot(module)) == [where]
        before = module_state.snapshot(module)
        module.RNG.normal(), module.PY_RNG.random()  # a module's own generator: a library object, by identity
        import wave  # noqa: F401 - a module imported during a call is not state
        sys.modules.pop("wave", None)
        import wave  # noqa: F401,F811
        assert module_state.changed(before, module_state.snapshot(module)) == []
    finally:
        vars(builtins).pop("_kept_by_a_test", None)
        sys.modules.pop("kept_by_a_test", None)
