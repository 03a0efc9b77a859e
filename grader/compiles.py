"""Counting XLA compilations through JAX's own compile log.

``CompileRecorder`` turns on ``jax_log_compiles`` (and, optionally,
``jax_explain_cache_misses``) for the length of a ``with`` block and records every
compilation JAX reports, with the function's name and argument signature.  It is the
same log a learner sees with ``JAX_LOG_COMPILES=1``, so feedback can quote it.

Compiles are attributed by *name*: callers ask ``recorder.count(names)`` for the
functions they care about, so incidental compiles (``jnp.ones`` becomes
``jit(broadcast_in_dim)``, ``.astype`` becomes ``jit(convert_element_type)``...) never
count.  A second, independent signal -- ``jax.monitoring``'s backend-compile events --
is recorded beside the log; ``count`` takes the larger of the two, so silencing the
logging module cannot hide a compile.

Runs inside the sandbox (the learner's process) and in trusted code alike; it returns
plain data only.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from typing import Iterable

from grader import jaxcompat


@dataclasses.dataclass(frozen=True)
class CompileEvent:
    name: str
    signature: str  # "(ShapedArray(float32[2,3]), ...)" from the "Compiling" line; "" if unseen
    log_line: str

    def to_plain(self) -> dict:
        return dataclasses.asdict(self)


class _ListHandler(logging.Handler):
    def __init__(self, sink: list):
        super().__init__(level=logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:  # pragma: no cover - trivial
        try:
            self.sink.append((record.name, record.getMessage()))
        except Exception:
            pass


class CompileRecorder:
    """Record compilations (log + monitoring) made inside a ``with`` block."""

    def __init__(self, explain_cache_misses: bool = False):
        self.explain = explain_cache_misses
        self._records: list[tuple[str, str]] = []
        self._monitor_names: list[str] = []
        self.events: list[CompileEvent] = []
        self.cache_misses: list[str] = []

    # -- context management -------------------------------------------------------
    def __enter__(self) -> "CompileRecorder":
        import jax
        from jax import monitoring

        self._jax = jax
        self._saved = (jax.config.jax_log_compiles, jax.config.jax_explain_cache_misses)
        jax.config.update("jax_log_compiles", True)
        if self.explain:
            jax.config.update("jax_explain_cache_misses", True)
        self._handler = _ListHandler(self._records)
        self._loggers = [logging.getLogger(n) for n in (*jaxcompat.COMPILE_LOGGERS, jaxcompat.CACHE_MISS_LOGGER)]
        self._saved_levels = []
        self._saved_disable = logging.root.manager.disable
        logging.disable(logging.NOTSET)
        for lg in self._loggers:
            self._saved_levels.append((lg.level, lg.disabled))
            lg.disabled = False
            lg.setLevel(logging.DEBUG)
            lg.addHandler(self._handler)

        def listener(event, duration, **kw):
            if event == jaxcompat.BACKEND_COMPILE_EVENT:
                self._monitor_names.append(jaxcompat.backend_compile_name(str(kw.get("fun_name", ""))))

        self._listener = listener
        monitoring.register_event_duration_secs_listener(listener)
        return self

    def __exit__(self, *exc) -> None:
        jax = self._jax
        jaxcompat.unregister_duration_listener(self._listener)
        for lg, (level, disabled) in zip(self._loggers, self._saved_levels):
            lg.removeHandler(self._handler)
            lg.setLevel(level)
            lg.disabled = disabled
        logging.disable(self._saved_disable)
        jax.config.update("jax_log_compiles", self._saved[0])
        jax.config.update("jax_explain_cache_misses", self._saved[1])
        self._parse()

    # -- parsing ------------------------------------------------------------------
    def _parse(self) -> None:
        pending_sig: dict[str, list[str]] = {}
        events = []
        misses = []
        for logger, msg in self._records:
            if msg.startswith(jaxcompat.CACHE_MISS_PREFIX):
                misses.append(msg)
                continue
            m = jaxcompat.COMPILE_STARTED.search(msg)
            if m:
                pending_sig.setdefault(m.group("name"), []).append(m.group("sig"))
                continue
            m = jaxcompat.COMPILE_FINISHED.search(msg)
            if m:
                name = m.group("name")
                sigs = pending_sig.get(name) or [""]
                sig = sigs.pop(0) if pending_sig.get(name) else ""
                events.append(CompileEvent(name=name, signature=sig, log_line=msg))
        self.events = events
        self.cache_misses = misses

    # -- queries ------------------------------------------------------------------
    @property
    def monitored(self) -> Counter:
        return Counter(self._monitor_names)

    def by_name(self) -> Counter:
        """Compiles per function name: the larger of the log count and the monitoring count."""
        logged = Counter(e.name for e in self.events)
        out = Counter()
        for name in set(logged) | set(self.monitored):
            out[name] = max(logged[name], self.monitored[name])
        return out

    def count(self, names: Iterable[str]) -> int:
        counts = self.by_name()
        return sum(counts[n] for n in set(names))

    def to_plain(self) -> dict:
        return {
            "events": [e.to_plain() for e in self.events],
            "by_name": dict(self.by_name()),
            "cache_misses": list(self.cache_misses),
        }


def defined_function_names(source: str, filename: str = "<submission>") -> set[str]:
    """Names of every function, method and lambda defined in ``source``, nested ones included.

    A compile is attributed to the learner's code when its name is one of these: JAX logs a
    jitted function under ``__name__`` (``partial(f)`` -> ``f``, a lambda -> ``<lambda>``).
    """
    code = compile(source, filename, "exec", dont_inherit=True)
    names: set[str] = set()
    stack = [code]
    while stack:
        co = stack.pop()
        for const in co.co_consts:
            if hasattr(const, "co_code"):
                names.add(const.co_name)
                stack.append(const)
    # Callable instances and some wrappers log as "<unnamed function>"; comprehension
    # scopes are not functions a learner jits.
    names.discard("<listcomp>")
    names.discard("<dictcomp>")
    names.discard("<setcomp>")
    names.discard("<genexpr>")
    return names
