"""Counters the learner's code cannot rewrite: how many times JAX traced and compiled.

JAX keeps its lowering, compilation and tracing caches in C++ (``WeakrefLRUCache``): every
XLA compilation of the process is a miss of ``pxla._cached_compilation``, every jit trace
a miss of ``partial_eval.trace_to_jaxpr``, whatever the logging or monitoring settings.
The worker's trusted thread reads these counters before and after each request, so each
answer carries the number of compilations and traces it caused -- numbers no Python code
in the learner's process can lower.

Two ways around them stay, and both are caught here.  Clearing a cache (``jax.clear_caches()``,
an honest thing to do when timing) restarts its counters from zero and removes a sentinel
entry planted before the learner's code ran: from then on the counts are not measurable
(``unmeasured``), and every check that needs them fails and says why -- no accusation.
Rebinding the module attribute JAX calls (the object there is no longer the one captured
here) is aimed at the meter itself: an accusation (``accusations``), with the file and line
where the replacement was defined when it is a function.  What remains -- compiling through JAX's private functions
directly, bypassing its caches -- is out of reach of any counter in the process and is
listed in the README's threat model.

Everything here is called from the trusted thread and touches only C-implemented objects
(the caches, their ``cache_info()`` and ``cache_keys()``, weak references), so a learner
who monkeypatches Python classes cannot make this code run theirs.
"""

from __future__ import annotations

import types
from _json import encode_basestring_ascii as _encode

from grader import jaxcompat


class Meter:
    def __init__(self, sandbox: str = "") -> None:
        self._caches = jaxcompat.jax_caches()  # {label: (module, attribute name, cache object)}
        self._sentinels = jaxcompat.plant_sentinels()  # kept alive here, so they stay cached
        self._last = {label: cache.cache_info().misses for label, (_, _, cache) in self._caches.items()}
        self._accusations: list[bytes] = []  # JSON objects, as the guard's violations
        self._rebound: set[str] = set()
        self.unmeasured = b'""'  # JSON string: why the counts stopped being measurable ("" while they are)
        self.sandbox = sandbox.rstrip("/") + "/" if sandbox else ""  # where the learner's files are

    def read(self) -> dict[str, int]:
        """{"compiles": misses, "traces": misses} now, and note any sign of tampering."""
        out = {}
        for label, (module, attr, cache) in self._caches.items():
            misses = cache.cache_info().misses
            if misses < self._last[label] or not _holds(cache, self._sentinels[label]):
                self.unmeasured = b'"caches_cleared"'
            self._last[label] = misses
            now = module.__dict__.get(attr)
            if now is not cache and attr not in self._rebound:
                self._rebound.add(attr)
                file, line = _defined_at(now, self.sandbox)
                self._accusations.append(b'{"kind":"meter_rebind","file":%s,"line":%d}' % (
                    _encode(file).encode("ascii"), line))
            out[label] = misses
        return out

    def accusations(self) -> list[bytes]:
        return self._accusations


def _defined_at(obj, sandbox: str) -> tuple[str, int]:
    """Where a plain function was defined (file relative to the learner's folder), or
    ("", 0) for anything else -- read from C slots only, never by calling the object."""
    if _type(obj) is not _function:
        return "", 0
    code = obj.__code__
    file = code.co_filename
    if _type(file) is not _str:
        return "", 0
    if sandbox and _startswith(file, sandbox):
        file = file[_len(sandbox):]
    return file, code.co_firstlineno


def _holds(cache, targets: list) -> bool:
    """Whether one of ``targets`` still keys an entry of ``cache``."""
    wanted = {_id(t) for t in targets}
    for key in cache.cache_keys():
        ref = key[0]
        if _callable(ref) and _id(ref()) in wanted:
            return True
    return not wanted  # nothing was planted (a JAX without such entries): nothing to miss


# Bound now, before any learner code runs: the trusted thread must not look builtins up
# at run time, where the learner's code may have replaced them.
_callable, _id, _type, _str, _len, _startswith, _function = callable, id, type, str, len, str.startswith, types.FunctionType
