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
    """The trusted thread's counters.  ``read()``, ``accusations()`` and ``status()`` are
    closures made here, before any learner code runs: they look up no global, builtin or
    class attribute at run time (``tests/test_sandbox.py`` reads their bytecode), because
    the learner's code can reach this module's globals and this class through the class
    graph (``object.__subclasses__()`` and a method's ``__globals__``, which no audit event
    covers) and would otherwise run its own code in the trusted thread."""

    def __init__(self, sandbox: str = "") -> None:
        self.read, self.accusations, self.status = _closures(
            jaxcompat.jax_caches(),  # {label: (module, attribute name, cache object)}
            jaxcompat.plant_sentinels(),  # kept alive by the closures, so they stay cached
            sandbox.rstrip("/") + "/" if sandbox else "")  # where the learner's files are


def _closures(caches: dict, sentinels: dict, sandbox: str):
    callable_, id_, type_, str_, len_, startswith = callable, id, type, str, len, str.startswith
    function_type, encode = types.FunctionType, _encode
    # the planted objects ride along in each row: alive as long as the closures, so their
    # cache entries stay (a cleared cache loses them)
    rows = tuple((label, module.__dict__, attr, cache, cache.cache_info, cache.cache_keys,
                  frozenset(id(t) for t in sentinels[label]), tuple(sentinels[label]))
                 for label, (module, attr, cache) in caches.items())
    last = {row[0]: row[4]().misses for row in rows}
    accusations: list[bytes] = []  # JSON objects, as the guard's violations
    rebound: set = set()
    state = [b'""']  # JSON string: why the counts stopped being measurable ("" while they are)

    def holds(keys, wanted) -> bool:
        """Whether one of the planted objects still keys an entry of the cache."""
        if not wanted:
            return True  # nothing was planted (a JAX without such entries): nothing to miss
        for key in keys():
            ref = key[0]
            if callable_(ref) and id_(ref()) in wanted:
                return True
        return False

    def defined_at(obj) -> tuple:
        """Where a plain function was defined (file relative to the learner's folder), or
        ("", 0) for anything else -- read from C slots only, never by calling the object."""
        if type_(obj) is not function_type:
            return "", 0
        code = obj.__code__
        file = code.co_filename
        if type_(file) is not str_:
            return "", 0
        if sandbox and startswith(file, sandbox):
            file = file[len_(sandbox):]
        return file, code.co_firstlineno

    def read() -> dict:
        """{"compiles": misses, "traces": misses} now, and note any sign of tampering."""
        out = {}
        for label, namespace, attr, cache, info, keys, wanted, _planted in rows:
            misses = info().misses
            if misses < last[label] or not holds(keys, wanted):
                state[0] = b'"caches_cleared"'
            last[label] = misses
            now = namespace.get(attr)
            if now is not cache and attr not in rebound:
                rebound.add(attr)
                file, line = defined_at(now)
                accusations.append(b'{"kind":"meter_rebind","file":%s,"line":%d}' % (
                    encode(file).encode("ascii"), line))
            out[label] = misses
        return out

    def accusations_() -> list:
        return accusations

    def status() -> bytes:
        return state[0]

    return read, accusations_, status
