"""What a probe sees inside the sandbox: the learner's module and a few helpers.

A *probe* is a measuring function that runs next to the learner's code, e.g. "call
``train_step`` on these 12 batches and record every compilation".  An exercise's probes
live in ``grader/exercises/exNN_<topic>/probes.py`` and are named ``"exNN_<topic>:<function>"``;
shared ones live in ``grader/probes/<module>.py`` and are named ``"<module>:<function>"``.
They receive a ``Context`` first and return plain data.  They measure; they never decide a
verdict.
"""

from __future__ import annotations

import difflib
import importlib
import re
import sys
from typing import Any, Callable

import numpy as np

_PROBE_NAME = re.compile(r"^[a-z_][a-z0-9_]*:[a-z_][a-z0-9_]*$")


_PROBES: dict[str, object] = {}  # probe-name prefix ("ex07_training", "generic") -> its module


def preload_probes(wanted: str = "all", *, jax: bool = True) -> None:
    """Import probe modules now, before the learner's module can rebind JAX names.

    ``wanted`` (the ``GRADER_PROBES`` variable): ``"all"``, or comma-separated exercise
    prefixes (``"ex07_"``): the probes of the exercise packages starting with one of them
    (``grader/exercises/ex07_training/probes.py``, named ``"ex07_training:..."``), and every
    shared module (``grader/probes/*.py``).  A worker that grades one exercise imports what
    that exercise's checks use (exercise 7's optax only where it is needed); a zygote that
    serves many imports them all once.  Already imported modules cost nothing.  An exercise
    package without a ``probes.py`` is skipped; nothing else of it is imported.

    ``jax=False`` (a worker without JAX, ``grader.sandbox.nojax``): only the exercises'
    ``nojax_probes.py``, probes that import no JAX and call functions that must be
    formulas; the shared probes and every ``probes.py`` are JAX and stay out (``nojax.install``
    refuses to start if one slipped in)."""
    import importlib.util
    import pkgutil

    import grader.exercises

    if jax:
        import grader.probes

        for info in pkgutil.iter_modules(grader.probes.__path__):
            if info.name not in _PROBES:
                _PROBES[info.name] = importlib.import_module(f"grader.probes.{info.name}")
    prefixes = None if wanted == "all" else tuple(p for p in wanted.split(",") if p)
    for info in pkgutil.iter_modules(grader.exercises.__path__):
        if not info.ispkg or info.name in _PROBES or (prefixes is not None and not info.name.startswith(prefixes)):
            continue
        module = f"grader.exercises.{info.name}.{'probes' if jax else 'nojax_probes'}"
        if importlib.util.find_spec(module) is not None:
            _PROBES[info.name] = importlib.import_module(module)


def seal_grader() -> None:
    """Take the grader's modules out of ``sys.modules`` before the learner's code loads.

    The harness already holds every module it needs (probes included).  Importing
    ``grader`` again is refused by the integrity guard (``grader.sandbox.guard``), so,
    e.g., ``grader.ir``'s jaxpr walker stays out of reach of an exercise that asks the
    learner to write one; nothing of the grader is left where the learner's code can
    look it up.
    """
    for name in [n for n in sys.modules if n == "grader" or n.startswith("grader.")]:
        del sys.modules[name]


class MissingFunction(LookupError):
    pass


def to_jax(tree: Any) -> Any:
    """numpy arrays -> JAX arrays, recursively (lists stay lists, tuples stay tuples).

    ``device_put`` rather than ``jnp.asarray``: the latter compiles a helper per new shape.
    """
    import jax

    if isinstance(tree, np.ndarray):
        return jax.device_put(tree)
    if isinstance(tree, list):
        return [to_jax(x) for x in tree]
    if isinstance(tree, tuple):
        return tuple(to_jax(x) for x in tree)
    if isinstance(tree, dict):
        return {k: to_jax(v) for k, v in tree.items()}
    return tree


class Context:
    def __init__(self, module, module_path: str, roots=None, jax_arrays: bool = True):
        self.module = module
        self.module_path = module_path
        self.roots = roots  # grader.sandbox.guard.Roots: where code comes from (compile attribution)
        self.jax_arrays = jax_arrays  # False in a worker without JAX: arguments stay NumPy
        #: objects one request prepares for a later one (a model, an optimizer state, padded
        #: batches), so a measured request runs the graded function alone: what preparing
        #: them compiles stays out of its count
        self.slots: dict[str, Any] = {}

    def function(self, name: str) -> Callable:
        """The learner's ``name``, which must exist and be callable."""
        if self.module is None:
            raise RuntimeError("this worker runs no learner code")
        if not hasattr(self.module, name):
            raise MissingFunction(f"`{name}` is not defined in {self.module_path.rsplit('/', 1)[-1]}"
                                  f"{self._did_you_mean(name)}; keep the name the stub gives it")
        fn = getattr(self.module, name)
        if not callable(fn):
            raise MissingFunction(f"`{name}` should be a function, but it is a {type(fn).__name__}")
        return fn

    def attribute(self, name: str) -> Any:
        if not hasattr(self.module, name):
            raise MissingFunction(f"`{name}` is not defined in {self.module_path.rsplit('/', 1)[-1]}"
                                  f"{self._did_you_mean(name)}")
        return getattr(self.module, name)

    def _did_you_mean(self, name: str) -> str:
        """``; did you mean `predict_compile`?`` when the file defines a close name."""
        try:
            names = [n for n, v in vars(self.module).items() if callable(v) and not n.startswith("_")]
        except Exception:  # noqa: BLE001 - a module whose namespace cannot be listed suggests nothing
            return ""
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        return f" (did you mean `{close[0]}`? your file defines that)" if close else ""

    def dispatch(self, op: str, target: str, args: list, kwargs: dict) -> Any:
        if op == "call":
            convert = to_jax if self.jax_arrays else (lambda tree: tree)
            return self.function(target)(*convert(args), **convert(kwargs))
        if op == "probe":
            if not _PROBE_NAME.match(target):
                raise ValueError(f"bad probe name {target!r}")
            mod_name, fn_name = target.split(":")
            if mod_name not in _PROBES:  # a worker without JAX holds only nojax_probes modules
                raise ValueError(f"unknown probe module {mod_name!r}"
                                 + ("" if self.jax_arrays else " (a worker without JAX runs only nojax_probes)"))
            probe = getattr(_PROBES[mod_name], fn_name)
            return probe(self, *args, **kwargs)
        raise ValueError(f"unknown op {op!r}")
