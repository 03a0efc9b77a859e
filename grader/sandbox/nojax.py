"""A sandbox without JAX: for code that must be a formula, not a measurement.

Some answers must come from reasoning alone -- exercise 11's predictions of what XLA's
cost analysis will say are formulas of the shapes.  Watching for JAX inside the learner's
usual sandbox cannot prove that: the process has JAX loaded, and a prediction can reach
XLA without moving any counter (a program written as text and handed to the PJRT client,
or work handed to another thread).  So such functions run in a worker where JAX does not
exist at all: a fresh Python (never forked from a zygote that imported JAX) that imports
NumPy but neither ``jax`` nor ``jaxlib``, whatever the learner's code does (threads
included: there is no XLA in the process to hand work to).

The learner's module still imports as it is: ``import jax``, ``from jax import numpy as
jnp``, ``@jax.jit`` and the like at module level give *stand-ins* (``Absent``) that can
be passed around, called and decorated with, but that raise ``JAXNotAvailable`` the
moment a value is needed from them (a number, a truth value, an iteration, arithmetic).
A function that needs JAX therefore fails, and says so; one that is a formula of its
inputs runs unchanged.

A layout is data, not JAX: ``PartitionSpec`` (``jax.sharding.PartitionSpec``, ``jax.P``) is
the one class of the family that exists here for real (``DATA_CLASSES``), as plain Python that
compares, hashes, indexes and prints like JAX's own (measured on JAX 0.10.2: a spec equals a
spec with the same entries and never a tuple; an entry that is a one-name tuple is that name).
Exercise 17's predictions receive such specs and may compare them with ``P(...)`` of their
own, at module level or inside the function.

The finder installed here answers every import of the JAX family (``STUBBED``) with such a
stand-in module; the integrity guard (``guard.install(..., no_native=...)``) refuses to
load any module from the real packages' folders, so removing the finder or loading
``jaxlib``'s native library by file name does not bring XLA back either.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types

#: Top-level packages that are JAX or need it: each is a stand-in in a worker without JAX.
STUBBED = frozenset({"jax", "jaxlib", "jax_plugins", "optax", "equinox", "flax", "chex", "jaxtyping", "orbax"})


class JAXNotAvailable(RuntimeError):
    """A value was needed from JAX in a process that has none."""


def _refuse(self, *args, **kwargs):
    raise JAXNotAvailable(f"`{object.__getattribute__(self, '_what')}` is JAX, and this code runs where JAX is "
                          f"not available (it must be plain Python arithmetic on its inputs)")


class Absent:
    """Stands for any object of a JAX package in a process without JAX."""

    __slots__ = ("_what",)

    def __init__(self, what: str):
        object.__setattr__(self, "_what", what[:200])

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stand_in(f"{object.__getattribute__(self, '_what')}.{name}")

    def __call__(self, *args, **kwargs):
        return Absent(f"{object.__getattribute__(self, '_what')}(...)")

    def __getitem__(self, key):
        return Absent(f"{object.__getattribute__(self, '_what')}[...]")

    def __mro_entries__(self, bases):
        return (object,)  # `class M(eqx.Module)` at module level still defines a class

    def __repr__(self) -> str:
        return f"<{object.__getattribute__(self, '_what')}: JAX is not available here>"

    __str__ = __repr__
    __setattr__ = __delattr__ = __setitem__ = __delitem__ = _refuse
    __bool__ = __len__ = __iter__ = __contains__ = __index__ = __int__ = __float__ = __complex__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __matmul__ = __rmatmul__ = _refuse
    __neg__ = __pos__ = __abs__ = __lt__ = __le__ = __gt__ = __ge__ = __round__ = __array__ = _refuse
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __lshift__ = __rshift__ = __invert__ = _refuse
    __enter__ = __exit__ = __fspath__ = _refuse


class PartitionSpec:
    """JAX's ``PartitionSpec`` as plain data: per dimension of an array, the mesh axis (or
    tuple of axes, or None) that splits it.  Equality, hashing, indexing, iteration and
    ``repr`` follow JAX 0.10.2's (``tests/test_sandbox.py`` compares the two live)."""

    __slots__ = ("_partitions",)

    def __init__(self, *partitions):
        object.__setattr__(self, "_partitions", tuple(
            p[0] if isinstance(p, tuple) and len(p) == 1 else p for p in partitions))

    def __setattr__(self, name, value):
        raise AttributeError("a PartitionSpec cannot be changed")

    @property
    def partitions(self) -> tuple:
        return self._partitions

    def __eq__(self, other):
        return isinstance(other, PartitionSpec) and self._partitions == other._partitions

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self._partitions)

    def __len__(self):
        return len(self._partitions)

    def __iter__(self):
        return iter(self._partitions)

    def __getitem__(self, index):
        return self._partitions[index]

    def index(self, value):
        return self._partitions.index(value)

    def count(self, value):
        return self._partitions.count(value)

    def __repr__(self) -> str:
        return "P" + repr(self._partitions)

    __str__ = __repr__


#: The classes of the JAX family that are plain data, real here: full dotted name -> class.
DATA_CLASSES = {"jax.sharding.PartitionSpec": PartitionSpec, "jax.P": PartitionSpec}


def _stand_in(what: str):
    return DATA_CLASSES.get(what) or Absent(what)


class AbsentModule(types.ModuleType):
    """A stand-in module: every attribute is ``Absent`` (or one of ``DATA_CLASSES``);
    submodules import as stand-ins too."""

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stand_in(f"{self.__name__}.{name}")


class AbsentFinder:
    """Answers imports of the JAX family with stand-in modules (first on ``sys.meta_path``)."""

    def __init__(self, versions: dict[str, str]):
        self.versions = versions

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = AbsentModule(spec.name)
        module.__path__ = []
        if spec.name in self.versions:
            module.__version__ = self.versions[spec.name]
        return module

    def exec_module(self, module) -> None:
        pass


def installed_versions() -> dict[str, str]:
    """The installed version of each stubbed package that has one (read from metadata: no
    import), so ``jax.__version__`` still answers."""
    from importlib import metadata

    out = {}
    for name in STUBBED:
        try:
            out[name] = metadata.version(name)
        except Exception:  # noqa: BLE001 - not installed: no version to show
            pass
    return out


def real_package_folders() -> list[str]:
    """Where the real packages of the JAX family are installed (found without importing them)."""
    import importlib.util
    import os

    folders = []
    for name in sorted(STUBBED):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for folder in (spec.submodule_search_locations or []) if spec else []:
            folders.append(os.path.realpath(folder))
            folders.append(os.path.abspath(folder))
    return sorted(set(folders))


def install() -> None:
    """Stand-ins for the JAX family from now on (the real packages were never imported)."""
    leaked = sorted(n for n in sys.modules if n.partition(".")[0] in STUBBED)
    if leaked:
        raise RuntimeError(f"JAX is already loaded in this process ({', '.join(leaked[:3])}): it cannot run "
                           f"code without JAX")
    sys.meta_path.insert(0, AbsentFinder(installed_versions()))
