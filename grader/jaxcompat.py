"""Everything the grader knows that depends on the JAX version, in one place.

Log formats, logger names, monitoring event names, HLO opcode spellings, primitive
names and API locations all moved between JAX releases.  Nothing else in the grader
spells them: it asks this module.  ``tests/test_jaxcompat.py`` checks every pattern
here against the JAX that is installed, so an upgrade that breaks one fails loudly
there instead of silently mis-grading.

Tested with: jax/jaxlib 0.10.2 (see ``TESTED_JAX``).
"""

from __future__ import annotations

import os
import re

TESTED_JAX = ("0.10.2",)

# --- compile logging (jax_log_compiles) ---------------------------------------------
#: Loggers whose records the compile counter listens to.
COMPILE_LOGGERS = ("jax._src.dispatch", "jax._src.interpreters.pxla")
#: Logger of `jax_explain_cache_misses`.
CACHE_MISS_LOGGER = "jax._src.interpreters.partial_eval"
#: A real XLA compilation finished (logged after the compile, so a failed lowering is not counted).
COMPILE_FINISHED = re.compile(r"Finished XLA compilation of (?:jit|pjit)\((?P<name>.*?)\) in (?P<secs>[0-9.e-]+) sec")
#: Logged before lowering; carries the argument signature we quote back to the learner.
COMPILE_STARTED = re.compile(r"Compiling (?:jit|pjit)\((?P<name>.*?)\) with global shapes and types (?P<sig>.*?)\. Argument mapping")
#: `jax_explain_cache_misses` messages start like this.
CACHE_MISS_PREFIX = "TRACING CACHE MISS"

# --- jax.monitoring -----------------------------------------------------------------
#: Fires once per backend compile; its `fun_name` keyword is ``jit(NAME)``.
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
MONITOR_NAME = re.compile(r"^(?:jit|pjit)\((?P<name>.*)\)$")

# --- HLO ----------------------------------------------------------------------------
COLLECTIVE_OPCODES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
COLLECTIVE_RE = re.compile(
    r"\s(?P<op>all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)(?:-start)?\("
)
ENTRY_RE = re.compile(r"^ENTRY\s", re.MULTILINE)
#: An array shape in HLO text, ``f32[8,16]{1,0}``: the element type and the dimensions.
HLO_SHAPE_RE = re.compile(r"\b(?P<dtype>[a-z]+[0-9]*)\[(?P<dims>[0-9,]*)\]")
#: A collective-permute's ``source_target_pairs={{0,1},{1,2},...}`` (partition ids) in HLO text.
PERMUTE_PAIRS_RE = re.compile(r"source_target_pairs=\{(?P<pairs>(?:\{\d{1,6},\d{1,6}\},?){0,4096})\}")
PERMUTE_PAIR_RE = re.compile(r"\{(?P<source>\d{1,6}),(?P<target>\d{1,6})\}")

# --- jaxpr --------------------------------------------------------------------------
#: Primitive names of a nested jit call inside a jaxpr, newest first.
NESTED_CALL_PRIMITIVES = ("jit", "pjit")
WHILE_PRIMITIVE = "while"
#: The primitive ``jax.shard_map`` leaves in a jaxpr (``jax.experimental.shard_map`` makes the same one).
SHARD_MAP_PRIMITIVE = "shard_map"
#: The primitive ``jax.lax.with_sharding_constraint`` leaves in a jaxpr.
SHARDING_CONSTRAINT_PRIMITIVE = "sharding_constraint"
#: Primitive names of ``jax.lax.psum`` over named mesh axes (``pmean`` is a psum and a divide):
#: ``psum_invariant`` in a shard_map with check_vma on (JAX 0.10.2), ``psum`` with it off.
#: Their ``axes`` parameter names the mesh axes summed over.
PSUM_PRIMITIVES = ("psum", "psum_invariant")
#: Primitive names of ``jax.checkpoint`` (``jax.remat``) in a jaxpr.
REMAT_PRIMITIVES = ("remat2", "checkpoint")
#: Primitive names of host callbacks: work done in Python, outside what JAX traces.
CALLBACK_PRIMITIVES = ("pure_callback", "io_callback", "callback")
SCAN_PRIMITIVE = "scan"
#: Where a jaxpr draws random bits from a key: one equation per draw (under ``vmap`` one for
#: the whole batch); ``threefry2x32`` is how older JAX spelled it without typed keys.
RANDOM_BITS_PRIMITIVES = ("random_bits", "threefry2x32")
#: A function defined with ``jax.custom_vjp``, as its jaxpr shows it (older JAX: ``..._jaxpr``).
CUSTOM_VJP_PRIMITIVES = ("custom_vjp_call", "custom_vjp_call_jaxpr")
#: A ``jax.custom_vjp`` rule in the linear program of a ``jax.vjp`` or ``jax.linearize``: the
#: tangent goes in, and the backward rule is what transposing it runs.
CUSTOM_LIN_PRIMITIVE = "custom_lin"
#: In the error ``jax.jit`` raises when an argument it treats as static is a tracer ("Non-hashable
#: static arguments are not supported"), lower-cased.
STATIC_TRACER_ERROR = "static argument"


#: JAX's classes whose objects the probes read after the learner's code ran (with their bases
#: and subclasses): sealed in every worker before learner code exists (``grader.sandbox.pins``).
MEASURED_CLASSES = (
    "jax._src.core:Jaxpr", "jax._src.core:ClosedJaxpr", "jax._src.core:JaxprEqn", "jax._src.core:Primitive",
    "jax._src.core:Var", "jax._src.core:Literal", "jax._src.core:ShapedArray",
    "jax._src.stages:Traced", "jax._src.stages:Lowered", "jax._src.stages:Compiled",
    "jax._src.interpreters.pxla:MeshComputation", "jax._src.interpreters.pxla:MeshExecutable",
    # what the probes read off arrays, shardings and meshes (``block_until_ready``, ``nbytes``,
    # ``devices_indices_map``, ``shard_shape``) and off a Pallas call's parameters
    "jax._src.array:ArrayImpl", "jax._src.sharding:Sharding", "jax._src.mesh:Mesh", "jax._src.mesh:AbstractMesh",
    "jax._src.pallas.core:GridMapping", "jax._src.pallas.core:BlockMapping", "jax._src.pallas.core:BlockSpec",
    # a jax.vjp pull-back, whose linear program ``vjp_linear_jaxpr`` reads
    "jax._src.api:VJP",
)

_JAXPR_TYPES: tuple = ()  # (Jaxpr, ClosedJaxpr): bound in a worker before learner code (grader.sandbox.pins)


def jaxpr_types() -> tuple:
    """``(Jaxpr, ClosedJaxpr)``, JAX's classes."""
    from jax.extend.core import ClosedJaxpr, Jaxpr  # jax >= 0.5

    return Jaxpr, ClosedJaxpr


def literal_class() -> type:
    """JAX's class of a jaxpr's literal operands."""
    from jax.extend.core import Literal

    return Literal


def primitive_class() -> type:
    from jax.extend.core import Primitive

    return Primitive


def jaxprs_in_params(params) -> list:
    """Sub-jaxprs held in an equation's params (jit, scan, cond branches, custom_jvp...): what
    ``jax.extend.core.jaxprs_in_params`` gives, computed here with JAX's classes bound before
    any learner code (that function is looked up in a module the learner's code can change)."""
    jaxpr, closed = _JAXPR_TYPES or jaxpr_types()
    out = []
    for val in params.values():
        for v in (val if isinstance(val, tuple) else (val,)):
            if isinstance(v, jaxpr):
                out.append(v)
            elif isinstance(v, closed):
                out.append(v.jaxpr)
    return out


def vjp_linear_jaxpr(pullback):
    """The linear program a ``jax.vjp`` pull-back transposes when it is called (tangents in,
    tangents out, residuals as its constants), or None where it cannot be found.  JAX 0.10.2's
    pull-back is a ``VJP`` object whose ``fun`` is a ``functools.partial`` holding that ``Jaxpr``
    among its arguments: internal, so read here only."""
    jaxpr, closed = _JAXPR_TYPES or jaxpr_types()
    for arg in getattr(getattr(pullback, "fun", None), "args", ()):
        if isinstance(arg, closed):
            return arg.jaxpr
        if isinstance(arg, jaxpr):
            return arg
    return None


_KEY_TEST: tuple = ()  # (issubdtype, prng_key): bound in a worker before learner code (grader.sandbox.pins)


def key_test() -> tuple:
    """``(jax.dtypes.issubdtype, jax.dtypes.prng_key)``: what tells a typed key's dtype."""
    import jax

    return jax.dtypes.issubdtype, jax.dtypes.prng_key


def is_key(aval) -> bool:
    """Whether an abstract value is a typed PRNG key array (``key<fry>``)."""
    dtype = getattr(aval, "dtype", None)
    issubdtype, prng_key = _KEY_TEST or key_test()
    try:
        return dtype is not None and bool(issubdtype(dtype, prng_key))
    except TypeError:
        return False


def shard_map_checks_vma(params) -> bool:
    """Whether a ``shard_map`` equation (its ``params``) checks varying manual axes: the
    ``check_vma`` parameter (``check_rep`` before JAX 0.6, where the idea was called replication
    checking)."""
    for name in ("check_vma", "check_rep"):
        if name in params:  # exactly True: an object of the learner's could answer bool() as it likes
            return params[name] is True
    raise KeyError("a shard_map equation without check_vma or check_rep: update grader.jaxcompat")


def key_reuse_checker():
    """JAX's key-reuse checker as a static check: ``checker(fun, *args)`` traces ``fun`` (compiling
    nothing) and raises ``jax.errors.KeyReuseError`` where a typed key is consumed twice -- the
    analysis ``jax.debug_key_reuse(True)`` applies to every jitted function.  Legacy
    ``uint32[2]`` keys are not tracked.  Returned (not called) so a probe binds it at import."""
    from jax.experimental.key_reuse._core import check_key_reuse  # no public spelling in jax 0.10

    return check_key_reuse


def unregister_duration_listener(listener) -> None:
    """Remove a ``jax.monitoring`` duration listener (no public API for this yet)."""
    from jax._src import monitoring

    try:
        monitoring.unregister_event_duration_listener(listener)
    except (AssertionError, ValueError):  # already gone (e.g. the listeners were cleared)
        pass


#: Environment variable giving the number of simulated CPU devices; read when JAX starts.
CPU_DEVICES_ENV = "JAX_NUM_CPU_DEVICES"


def compile_cache_env(directory: str | None, max_bytes: int = 64 << 20) -> dict[str, str]:
    """Environment turning JAX's persistent compilation cache on in ``directory`` (off for None).

    Thresholds are zero so even millisecond compiles are cached; the size cap needs the
    ``filelock`` package, without which JAX silently disables the cache.  ``max_bytes=-1``:
    no cap, so no lock file and no access-time files (a folder that workers of several
    users write, ``grader.course.verify``'s, where one user's lock file would shut out the
    others).
    """
    if directory is None:
        return {"JAX_ENABLE_COMPILATION_CACHE": "false"}
    return {
        "JAX_ENABLE_COMPILATION_CACHE": "true",
        "JAX_COMPILATION_CACHE_DIR": directory,
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
        "JAX_COMPILATION_CACHE_MAX_SIZE": str(max_bytes),  # least recently used entries go first
    }


def atomic_compile_cache_writes() -> None:
    """Make JAX's persistent cache write each entry whole: to a private name, then renamed.

    Without a size cap JAX writes an entry in place (``LRUCache.put``), so a worker of
    another grading reading the same entry at that moment reads part of it (JAX then warns
    and compiles).  With a cap, JAX's file lock already orders the two: left as it is."""
    from jax._src import lru_cache

    original = lru_cache.LRUCache.put
    if getattr(original, "_grader_atomic", False):
        return

    def put(self, key: str, value: bytes) -> None:
        if self.eviction_enabled or not key:
            return original(self, key, value)
        path = self.path / f"{key}{lru_cache._CACHE_SUFFIX}"
        if path.exists():
            return
        part = path.with_name(f".{path.name}.{os.getpid()}.part")
        try:
            part.write_bytes(value)
            os.replace(part, path)
        finally:
            if part.exists():
                part.unlink()

    put._grader_atomic = True
    lru_cache.LRUCache.put = put


def backend_compile_name(fun_name: str) -> str:
    """Name of the function in a monitoring event's ``fun_name`` (``jit(f)`` -> ``f``)."""
    m = MONITOR_NAME.match(fun_name)
    return m.group("name") if m else fun_name


# --- the C++ caches that count traces and compilations (grader.sandbox.meter) ----------
def jax_caches() -> dict:
    """{label: (module, attribute, cache)}: JAX's C++ ``WeakrefLRUCache``s whose misses count,
    respectively, every XLA compilation and every jit trace of the process."""
    from jax._src.interpreters import partial_eval, pxla

    return {"compiles": (pxla, "_cached_compilation", pxla._cached_compilation),
            "traces": (partial_eval, "trace_to_jaxpr", partial_eval.trace_to_jaxpr)}


def lowering_cache():
    """JAX's cache of lowered modules: keys hold a weak reference to each lowered
    ``ClosedJaxpr`` and, in ``key[2]``, the module name (``"jit(f)"``) and input avals."""
    from jax._src.interpreters import pxla

    return pxla._cached_lowering_to_hlo


def plant_sentinels() -> dict[str, list]:
    """Trace and compile a trusted function now; returns, per cache of ``jax_caches``, the
    objects its new entries are keyed on.  Whoever keeps them alive keeps those entries
    in the caches, so an entry that later disappears means the cache was cleared."""
    import jax
    import numpy as np

    caches = jax_caches()
    before = {label: {id(k[0]) for k in cache.cache_keys()} for label, (_, _, cache) in caches.items()}

    def grader_sentinel(x):
        return x + 1

    jax.block_until_ready(jax.jit(grader_sentinel)(jax.device_put(np.zeros(1, np.float32))))
    out = {}
    for label, (_, _, cache) in caches.items():
        out[label] = [k[0]() for k in cache.cache_keys() if id(k[0]) not in before[label] and k[0]() is not None]
    return out


def module_name(cache_key) -> str:
    """The module name (``"jit(f)"``) in a key of the lowering or the compilation cache."""
    args = cache_key[2] if len(cache_key) > 2 else ()
    return str(args[0]) if args else ""


def lowering_signature(cache_key) -> str:
    """The input avals of a lowering cache key, as JAX prints them (``(float32[3],)``)."""
    args = cache_key[2] if len(cache_key) > 2 else ()
    return str(args[3])[:2000] if len(args) > 3 else ""


def traced_function_file(closed_jaxpr) -> str:
    """The file of the function a jaxpr was traced from (``debug_info.func_src_info`` is
    ``"f at /path/file.py:12"``), or "" when JAX does not say."""
    info = getattr(getattr(closed_jaxpr, "jaxpr", closed_jaxpr), "debug_info", None)
    text = getattr(info, "func_src_info", "") or ""
    if " at " not in text:
        return ""
    return text.rsplit(" at ", 1)[1].rsplit(":", 1)[0]


# --- donation ---------------------------------------------------------------------------
def deleted_flags():
    """A function ``leaves -> [bool]``: which leaves are JAX arrays whose buffer is gone
    (donated to a jitted call, or deleted).  ``ArrayImpl`` is private; it lives in
    ``jax._src.array`` in the tested versions."""
    from jax._src.array import ArrayImpl

    is_deleted = ArrayImpl.is_deleted
    return lambda leaves: [bool(is_deleted(leaf)) if isinstance(leaf, ArrayImpl) else False for leaf in leaves]


# --- Pallas ---------------------------------------------------------------------------------
#: The primitive ``pl.pallas_call`` leaves in a jaxpr.
PALLAS_CALL_PRIMITIVE = "pallas_call"


def pallas_call_facts(params) -> dict:
    """What a ``pallas_call`` equation (its ``params``) asks for, as plain data:
    ``{"grid": [int, ...], "blocks": [[dim, ...] per operand], "num_inputs", "num_outputs",
    "interpret": bool}``.  ``blocks`` lists the inputs' block shapes, then the outputs'; a
    dimension is an int (``Blocked(block_size=n)``, or a bare int), ``None`` for a squeezed one
    (a ``None`` in the ``BlockSpec``, or the axis ``jax.vmap`` added), and its text otherwise.

    All of it is internal: ``grid_mapping`` (a ``GridMapping`` whose ``block_mappings`` hold
    each operand's ``block_shape``) is how JAX 0.10.2 stores the grid and the ``BlockSpec``s;
    a dynamic grid dimension is reported as its text."""
    from jax._src.pallas import core as pallas_core

    mapping = params["grid_mapping"]

    def dim(d):
        if isinstance(d, int) and not isinstance(d, bool):
            return int(d)
        if isinstance(d, pallas_core.Blocked):
            return int(d.block_size)
        if isinstance(d, pallas_core.Squeezed) or d is None:
            return None
        return str(d)[:100]

    grid = [int(g) if isinstance(g, int) and not isinstance(g, bool) else str(g)[:100] for g in mapping.grid]
    blocks = [[dim(d) for d in bm.block_shape] for bm in mapping.block_mappings]
    return {"grid": grid, "blocks": blocks, "num_inputs": int(mapping.num_inputs),
            "num_outputs": int(mapping.num_outputs), "interpret": bool(params.get("interpret", False))}
