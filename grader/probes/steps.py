"""What a learner's jitted training step really is and really did (exercises 7 and 12).

Helpers for the probes, not probes themselves.  A learner's module controls the objects it
hands over, so nothing here reads an attribute the learner could have set:

* ``is_jitted``: the step is exactly the type ``jax.jit`` returns (a Python wrapper with a
  ``.lower`` of some other function is not);
* ``lower``: that type's own ``lower``, bound before the learner's module loaded (an
  instance attribute ``train_step.lower = ...`` is never called);
* ``reused_bytes``: the bytes of the outputs that live in the input buffers the call
  consumed -- what donation does, read from the buffers' addresses (a step that is exactly
  a ``jax.jit`` function cannot delete its inputs by hand, and this corroborates it);
* ``runs_as_lowered``: the compiled program from ``lower`` gives the outputs the call
  gives on the same inputs (a ``.lower`` of another program does not);
* ``donated_args``: which positional arguments the lowered step donates, from JAX's own
  record (``Lowered.args_info``).  A donated input that no output can reuse (a batch) only
  makes JAX warn and stays alive, so ``is_deleted()`` cannot show that it was donated.
"""

from __future__ import annotations

import jax
import numpy as np
from jax import stages as _stages
from jax._src.array import ArrayImpl as _ArrayImpl  # the type of every jax.Array (no backend started here)

_JIT_TYPE = type(jax.jit(lambda: None))  # wrapping compiles nothing and starts no backend
_jit_lower = _JIT_TYPE.lower  # JAX sets lower on the type; bound now, before any learner code
_Lowered = _stages.Lowered
_args_info = _stages.Lowered.args_info  # the slot's own descriptor, bound before any learner code
_pointer = _ArrayImpl.unsafe_buffer_pointer
_is_deleted = _ArrayImpl.is_deleted
_leaves = jax.tree.leaves
_structure = jax.tree.structure
_device_put = jax.device_put
_block = jax.block_until_ready
_asarray = np.asarray
_array_equal = np.array_equal


def is_jitted(fn) -> bool:
    return type(fn) is _JIT_TYPE


def lower(fn, args: tuple):
    """``jax.jit``'s own ``lower`` of ``fn`` on ``args``, or None when ``fn`` is not exactly
    what ``jax.jit`` returns."""
    if not is_jitted(fn):
        return None
    lowered = _jit_lower(fn, *args)
    return lowered if type(lowered) is _Lowered else None


def donated_args(lowered) -> list[bool]:
    """For each positional argument of ``lowered`` (from ``lower``), whether any of its
    buffers is donated."""
    args, _ = _args_info.__get__(lowered)
    return [any(bool(info.donated) for info in _leaves(arg)) for arg in args]


def pointers(tree) -> set[int]:
    """The buffer addresses of the live arrays of ``tree``."""
    return {_pointer(leaf) for leaf in _leaves(tree) if type(leaf) is _ArrayImpl and not _is_deleted(leaf)}


def reused_bytes(outputs, before: set[int]) -> int:
    """Bytes of ``outputs``' arrays that live at one of the addresses ``before``."""
    return int(sum(leaf.nbytes for leaf in _leaves(outputs)
                   if type(leaf) is _ArrayImpl and not _is_deleted(leaf) and _pointer(leaf) in before))


def copies(tree):
    """Fresh device copies of ``tree``'s arrays (a call that donates consumes its inputs)."""
    return jax.tree.map(lambda a: _device_put(_asarray(a)) if isinstance(a, jax.Array) else a, tree)


def runs_as_lowered(fn, compiled, args: tuple) -> bool:
    """The compiled program and a call of ``fn`` give the same outputs on copies of ``args``."""
    try:
        want = _block(compiled(*copies(args)))
        got = _block(fn(*copies(args)))
    except Exception:  # noqa: BLE001 - a program that cannot take the call's inputs is another program
        return False
    if _structure(want) != _structure(got):
        return False
    return all(_array_equal(_asarray(a), _asarray(b)) for a, b in zip(_leaves(want), _leaves(got)))
