"""Counters the learner's code cannot rewrite: how many times JAX traced and compiled.

JAX keeps its lowering, compilation and tracing caches in C++ (``WeakrefLRUCache``): every
XLA compilation of the process is a miss of ``pxla._cached_compilation``, every jit trace
a miss of ``partial_eval.trace_to_jaxpr``, whatever the logging or monitoring settings.
The worker's trusted thread reads these counters before and after each request, so each
answer carries the number of compilations and traces it caused -- numbers no Python code
in the learner's process can lower.

Two ways around them stay, and both are caught here (``problems``): clearing a cache
(its counters restart from zero; a sentinel entry planted before the learner's code ran
disappears) and rebinding the module attribute JAX calls (the object there is no longer
the one captured here).  What remains -- compiling through JAX's private functions
directly, bypassing its caches -- is out of reach of any counter in the process and is
listed in the README's threat model.

Everything here is called from the trusted thread and touches only C-implemented objects
(the caches, their ``cache_info()`` and ``cache_keys()``, weak references), so a learner
who monkeypatches Python classes cannot make this code run theirs.
"""

from __future__ import annotations

from grader import jaxcompat


class Meter:
    def __init__(self) -> None:
        self._caches = jaxcompat.jax_caches()  # {label: (module, attribute name, cache object)}
        self._sentinels = jaxcompat.plant_sentinels()  # kept alive here, so they stay cached
        self._last = {label: cache.cache_info().misses for label, (_, _, cache) in self._caches.items()}
        self._problems: list[str] = []

    def read(self) -> dict[str, int]:
        """{"compiles": misses, "traces": misses} now, and note any sign of tampering."""
        out = {}
        for label, (module, attr, cache) in self._caches.items():
            misses = cache.cache_info().misses
            if misses < self._last[label]:
                self._note(f"cleared JAX's {label} cache (its counters went back)")
            self._last[label] = misses
            if module.__dict__.get(attr) is not cache:
                self._note(f"replaced JAX's {label} cache function ({attr})")
            if not _holds(cache, self._sentinels[label]):
                self._note(f"cleared JAX's {label} cache")
            out[label] = misses
        return out

    def problems(self) -> list[str]:
        return self._problems

    def _note(self, reason: str) -> None:
        if reason not in self._problems:
            self._problems.append(reason)


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
_callable, _id = callable, id
