"""Recording XLA compilations in a worker, and telling the learner's from JAX's own -- for
feedback.

How many: the worker's trusted thread reads JAX's C++ compilation cache before and after
each request (``grader.sandbox.meter``), so every answer carries the true number of
compilations it caused, whatever the learner's code did to logging or monitoring.  That
total is what verdicts rest on, judged against the reference solution's total for the
same request (``grader.testing``): nothing in the learner's process can lower it.

Whose: ``CompileRecorder`` (used by probes, inside the sandbox) looks at every compilation
a block caused and asks where the code it traced came from: a jaxpr equation carries the
traceback of the Python code that created it, so an equation made by the learner's code
names that code, while an eagerly dispatched primitive or a ``jnp`` helper names only
JAX's own files.  A compilation whose traced code is all library code is *incidental*;
everything else is *own*, including a program that runs code no traceback describes (a
deserialized ``jax.export`` module, a host callback: ``OPAQUE_PRIMITIVES``).  This is what
feedback says ("3 look like your function `train_step`"), together with JAX's own words --
each compilation's argument signature and the reason for each cache miss (the recorder
turns on ``jax_log_compiles`` and, optionally, ``jax_explain_cache_misses`` for the block).

What: the count floor (``grader.traced_work.expect_compiled_work``) needs to know what the
programs compiled during the measured request compute, not what the function gives
``jax.make_jaxpr`` in a call of its own (a function can tell a tracer from an array and show
each call another program).  The recorder reads the primitives of every program LOWERED in
the block whose name a compilation of the block carries (the ``ClosedJaxpr`` each new key of
JAX's lowering cache holds, nested jaxprs included): ``primitives`` in the plain record, and
``programs`` ``{"read", "unread"}`` -- a lowering whose jaxpr was already garbage-collected
when the block ended (a ``jax.jit`` made and dropped inside the call) cannot be read, shows
no primitive, and is counted as unread.  A program compiled in an earlier request and only
reused here is not in this record: the checks that judge the floor draw inputs whose
signatures no earlier request compiled.  Eagerly dispatched ``jnp`` operations lower (and
compile) a one-primitive program each, and their primitives count too: NumPy beside an eager
``jnp.tanh`` passes the floor, as would any decoy program that holds the primitive -- the
floor is evidence that JAX compiled the work's essential operations during the measured
calls, not that the returned numbers came from them (that takes ``traced_run``'s one trace).

The attribution is NOT evidence: tracebacks, source-info contexts
(``source_info_util.user_context``), names and ``__wrapped__`` are all set by learner code,
which can make its compilations look like JAX's own.  It decides a verdict only where no
reference solution exists (a learner's own copy: public checks, 0 points), and there
anything it cannot classify counts as the learner's, so silencing or confusing it can only
raise the count.
"""

from __future__ import annotations

import logging
import os

from grader import ir, jaxcompat
from grader.sandbox.guard import Roots

LIBRARY = "library"  # the guard's name for the Python installation's code

#: Equations that run a program whose code has no traceback to judge (a deserialized
#: ``jax.export`` module, a host callback): whoever made one, it may hold the learner's
#: work, so a compilation that contains one is never incidental.
OPAQUE_PRIMITIVES = frozenset({"call_exported", "pure_callback", "io_callback", "ffi_call"})


class CompileRecorder:
    """Record and classify the compilations made inside a ``with`` block (in a worker).

    ``roots`` is the worker's ``grader.sandbox.guard.Roots`` (a probe passes ``ctx.roots``):
    it says where a code object comes from; by default, this Python's installation."""

    def __init__(self, roots=None, explain_cache_misses: bool = False):
        if roots is None:  # nothing is imported here: inside a worker, importing grader is refused
            here = os.path.dirname(os.path.abspath(__file__))
            roots = Roots.of_this_python(sandbox=os.getcwd(), grader=here)
        self.roots = roots
        self.explain = explain_cache_misses
        self.compilations: list[dict] = []  # {"name", "own"} per new compilation (in no particular order)
        self.cache_misses: list[str] = []
        self.logged: list[dict] = []  # {"name", "signature"} per "Compiling" log line
        self.total = 0  # every compilation in the block (JAX's compilation cache misses)
        self.primitives: dict[str, int] = {}  # primitive counts of the programs lowered and compiled in the block
        self.programs_read = 0  # programs whose primitives are in ``primitives``
        self.programs_unread = 0  # programs lowered in the block whose jaxpr was gone when it ended
        self.work = 0  # elements those programs compute (``ir.elements_computed``)

    def __enter__(self) -> "CompileRecorder":
        import jax

        self._jax = jax
        self._saved = (jax.config.jax_log_compiles, jax.config.jax_explain_cache_misses)
        self._compile_cache = jaxcompat.jax_caches()["compiles"][2]
        self._lowering_cache = jaxcompat.lowering_cache()
        self._before = {id(k[0]) for k in self._compile_cache.cache_keys()}
        self._misses = self._compile_cache.cache_info().misses
        self._lowered_before = {id(k[0]) for k in self._lowering_cache.cache_keys()}
        jax.config.update("jax_log_compiles", True)
        if self.explain:
            jax.config.update("jax_explain_cache_misses", True)
        self._records: list = []
        self._handler = logging.Handler(level=logging.DEBUG)
        self._handler.emit = self._records.append  # no code of ours runs when JAX logs
        self._loggers = [logging.getLogger(n) for n in (*jaxcompat.COMPILE_LOGGERS, jaxcompat.CACHE_MISS_LOGGER)]
        self._saved_levels = [(lg.level, lg.disabled) for lg in self._loggers]
        self._saved_disable = logging.root.manager.disable
        logging.disable(logging.NOTSET)
        for lg in self._loggers:
            lg.disabled = False
            lg.setLevel(logging.DEBUG)
            lg.addHandler(self._handler)
        return self

    def __exit__(self, *exc) -> None:
        jax = self._jax
        for lg, (level, disabled) in zip(self._loggers, self._saved_levels):
            lg.removeHandler(self._handler)
            lg.setLevel(level)
            lg.disabled = disabled
        logging.disable(self._saved_disable)
        jax.config.update("jax_log_compiles", self._saved[0])
        jax.config.update("jax_explain_cache_misses", self._saved[1])
        self.total = self._compile_cache.cache_info().misses - self._misses
        self._read_log()
        self._classify()

    # -- what happened -------------------------------------------------------------------
    def _read_log(self) -> None:
        for record in self._records[:2000]:
            try:
                msg = record.getMessage()[:8000]
            except Exception:  # noqa: BLE001 - a record we cannot format says nothing
                continue
            if msg.startswith(jaxcompat.CACHE_MISS_PREFIX):
                self.cache_misses.append(msg[:4000])
                continue
            m = jaxcompat.COMPILE_STARTED.search(msg)
            if m:
                self.logged.append({"name": m.group("name"), "signature": m.group("sig")[:2000]})

    def _classify(self) -> None:
        """Each new compilation, own or incidental, judged by the lowerings of its name.

        A compilation is incidental only when a library lowering accounts for it: every
        lowering under its name is library code, and there are at least as many of them as
        compilations called incidental.  A lowering made to look like JAX's own cannot hide a
        real one of the learner's, and neither can one whose program was dropped (its entry
        leaves the lowering cache) beside a library lowering of the same name."""
        lowered: dict[str, list[bool]] = {}
        jaxprs: list = []  # (module name, ClosedJaxpr or None) of every new lowering
        for key in self._lowering_cache.cache_keys():
            if id(key[0]) in self._lowered_before:
                continue
            jaxpr = key[0]()
            name = jaxcompat.module_name(key)
            jaxprs.append((name, jaxpr))
            lowered.setdefault(name, []).append(jaxpr is None or self._own(jaxpr))
        vouched: dict[str, int] = {name: (0 if any(kinds) else len(kinds)) for name, kinds in lowered.items()}
        compiled_names: dict[str, int] = {}
        for key in self._compile_cache.cache_keys():
            if id(key[0]) in self._before:
                continue
            name = jaxcompat.module_name(key)
            compiled_names[name] = compiled_names.get(name, 0) + 1
            incidental = vouched.get(name, 0) > 0
            if incidental:
                vouched[name] -= 1  # one library lowering, one compilation
            self.compilations.append({"name": jaxcompat.backend_compile_name(name), "own": not incidental})
        self._read_programs(jaxprs, compiled_names)

    def _read_programs(self, jaxprs: list, compiled_names: dict[str, int]) -> None:
        """The primitives of the programs lowered in the block and compiled there.  Lowerings
        and compilations are matched by name only: a lowering whose name no new compilation
        carries (``jax.jit(f).lower(x)`` alone) compiled nothing the count saw and shows
        nothing, and where a name has more new lowerings than compilations nothing tells which
        were compiled -- the real program lowered but not compiled, beside a trivial one of the
        same name that was -- so none of them is read (they count as unread).  Every lowering
        counts, whoever's code made it (the attribution is not evidence): eager ``jnp``
        operations included."""
        lowered: dict[str, int] = {}
        for name, _ in jaxprs:
            lowered[name] = lowered.get(name, 0) + 1
        for name, jaxpr in jaxprs:
            if name not in compiled_names:
                continue
            if jaxpr is None or lowered[name] > compiled_names[name]:
                self.programs_unread += 1
                continue
            for primitive, n in ir.primitive_counts(jaxpr).items():
                self.primitives[primitive] = self.primitives.get(primitive, 0) + n
            self.work += ir.elements_computed(jaxpr)
            self.programs_read += 1

    def _own(self, closed) -> bool:
        """Whether code that is not the Python installation's made an equation of ``closed``."""
        kinds: dict[int, str] = {}
        stack = [getattr(closed, "jaxpr", closed)]
        saw_equation = False
        while stack:
            jaxpr = stack.pop()
            for eqn in jaxpr.eqns:
                saw_equation = True
                if ir.primitive_name(eqn.primitive) in OPAQUE_PRIMITIVES:
                    return True
                traceback = getattr(eqn.source_info, "traceback", None)
                if traceback is not None:
                    for code in traceback.raw_frames()[0]:
                        kind = kinds.get(id(code))
                        if kind is None:
                            kind = kinds[id(code)] = self.roots.kind(code.co_filename)
                        if kind != LIBRARY:
                            return True
                stack.extend(getattr(sub, "jaxpr", sub) for sub in jaxcompat.jaxprs_in_params(eqn.params))
        if saw_equation:
            return False
        # an empty program (e.g. an identity function): judge by where the function is defined
        filename = jaxcompat.traced_function_file(closed)
        return not filename or self.roots.kind(filename) != LIBRARY

    # -- queries ---------------------------------------------------------------------------
    @property
    def incidental(self) -> int:
        return sum(1 for c in self.compilations if not c["own"])

    @property
    def learner(self) -> int:
        """All compilations but the incidental ones (the attribution: feedback, or the verdict
        only where no reference solution exists): a compilation whose cache entry was gone
        before it could be classified (a function made and dropped) counts as own."""
        return max(self.total - self.incidental, 0)

    def own(self, name: str | None = None) -> int:
        return sum(1 for c in self.compilations if c["own"] and (name is None or c["name"] == name))

    def by_name(self) -> dict[str, int]:
        """Own compilations per compiled function name."""
        out: dict[str, int] = {}
        for c in self.compilations:
            if c["own"]:
                out[c["name"]] = out.get(c["name"], 0) + 1
        return out

    def count(self, names=None) -> int:
        """Own compilations, of the functions called ``names`` only when given."""
        wanted = None if names is None else set(names)
        return sum(n for name, n in self.by_name().items() if wanted is None or name in wanted)

    def events(self) -> list[dict]:
        """The "Compiling" log lines of own functions, in order: name and argument signature
        (for feedback only; empty when the learner's code silenced the log)."""
        names = set(self.by_name())
        return [e for e in self.logged if e["name"] in names]

    def to_plain(self) -> dict:
        return {
            "total": self.total,
            "incidental": self.incidental,
            "own_by_name": self.by_name(),
            "events": self.events()[:200],
            "cache_misses": list(self.cache_misses),
            "primitives": dict(self.primitives),
            "programs": {"read": self.programs_read, "unread": self.programs_unread},
            "work": self.work,
        }


def defined_function_names(source: bytes | str, filename: str = "<submission>") -> set[str]:
    """Names of every function, method and lambda defined in ``source``, nested ones included
    (Python source: bytes are decoded as Python does, coding line and BOM included)."""
    code = compile(source, filename, "exec", dont_inherit=True)
    names: set[str] = set()
    stack = [code]
    while stack:
        co = stack.pop()
        for const in co.co_consts:
            if hasattr(const, "co_code"):
                names.add(const.co_name)
                stack.append(const)
    for comprehension in ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"):
        names.discard(comprehension)
    return names
