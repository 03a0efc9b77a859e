"""Honest variants of the reference solutions: everyday Python a learner writes, none of it
cheating, built at test time (``tests/test_honest_corpus.py`` grades them).

A variant is an exercise's reference solution, unchanged, followed by a few **idioms**
(``IDIOMS``) and a harness.  Each idiom runs twice:

* at **import** time: module-level statements, as a learner's file runs them when the
  grader imports it under the guard;
* **inside the graded calls**: every public function of the file (a module-level ``def``
  whose name does not start with ``_``) is wrapped so that each call first runs the
  idioms' per-call code.  Functions the learner's jitted code calls by global name are
  wrapped too, so that code also runs while JAX traces them.

The per-call code sees ``_hv_fn`` (the function's name), ``_hv_args``/``_hv_kwargs``
(opaque: they may be tracers), ``_hv_first`` (first call of that function) and ``_hv_top``
(JAX may be used without changing what is graded: not inside a trace, and not one of the
functions whose exercise forbids JAX while predicting).  Rules that keep a variant a right
solution: never change a value the functions return or receive; no new JAX compilation
inside a call; files only next to the learner's file or under ``tempfile.gettempdir()``;
heavy work (matplotlib, the profiler, timeit) only on a function's first call.

The harness prints ``HV-CALLED <name> <top>`` on the first call of each function in and
out of a trace, so a test can see that the graded calls really ran the idioms.  The
idioms were collected by a helper that graded every one of them against every reference
solution (see the README's threat model: "honest code accused").
"""

from __future__ import annotations

import dataclasses
import textwrap
import tomllib
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Idiom:
    name: str
    imports: str = ""
    at_import: str = ""
    in_call: str = ""
    around: str = ""  # a context manager expression the real call runs inside (may use _hv_fn)
    files: tuple[tuple[str, str], ...] = ()  # (name, text) written next to the learner's file

    @property
    def uses_jax(self) -> bool:
        """A JAX idiom: inside a function the statement says runs where JAX does not exist
        (``NO_JAX_FUNCTIONS``) an honest learner does not use it, so it is left out there."""
        return self.name.startswith("jax_")


def _for_this_function(idiom: Idiom, code: str) -> str:
    if not idiom.uses_jax:
        return code
    return "if _hv_fn not in _HV_NO_JAX:\n" + textwrap.indent(code, "    ")


def _i(name, imports="", at_import="", in_call="", around="", files=()):
    return Idiom(name, textwrap.dedent(imports).strip(), textwrap.dedent(at_import).strip(),
                 textwrap.dedent(in_call).strip(), around, files)


IDIOMS: tuple[Idiom, ...] = (
    _i("namedtuple", "import collections as _hv_collections", """
        HvPoint = _hv_collections.namedtuple("HvPoint", ["x", "y"])
        _HV_ORIGIN = HvPoint(0, 0)
        """, """
        _hv_p = HvPoint(1, 2)._replace(y=3)
        assert _hv_p.x + _hv_p.y == 4 and _HV_ORIGIN._asdict() == {"x": 0, "y": 0}
        HvCall = _hv_collections.namedtuple("HvCall", "name nargs")
        _hv_c = HvCall(_hv_fn, len(_hv_args))
        _hv_cnt = _hv_collections.Counter([_hv_fn]); _hv_dq = _hv_collections.deque([1], maxlen=4)
        """),
    _i("typing", "import typing as _hv_typing", """
        HvT = _hv_typing.TypeVar("HvT")
        HvSeconds = _hv_typing.NewType("HvSeconds", float)
        HvMetrics = _hv_typing.TypedDict("HvMetrics", {"loss": float, "acc": float})

        class HvBox(_hv_typing.Generic[HvT]):
            def __init__(self, item: HvT):
                self.item = item

        @_hv_typing.runtime_checkable
        class HvHasShape(_hv_typing.Protocol):
            shape: tuple

        class HvBatch(_hv_typing.NamedTuple):
            x: _hv_typing.Any
            y: _hv_typing.Any = None
        """, """
        _hv_box: HvBox[int] = HvBox(3)
        _hv_m: HvMetrics = {"loss": 1.0, "acc": 0.5}
        assert _hv_box.item == 3 and HvSeconds(0.5) == 0.5 and HvBatch(1).y is None
        _hv_shaped = [isinstance(a, HvHasShape) for a in _hv_args]
        _hv_U = _hv_typing.TypeVar("_hv_U", bound=int)
        """),
    _i("enum", "import enum as _hv_enum", """
        HvColor = _hv_enum.Enum("HvColor", "RED GREEN BLUE")

        class HvStage(_hv_enum.Enum):
            JAXPR = _hv_enum.auto()
            HLO = _hv_enum.auto()

        class HvLevel(_hv_enum.IntEnum):
            LOW = 1
            HIGH = 2
        """, """
        assert HvColor.RED.name == "RED" and HvStage.HLO.value == 2 and HvLevel.HIGH > HvLevel.LOW
        HvPhase = _hv_enum.Enum("HvPhase", ["WARMUP", "TIMED"])
        assert len(HvPhase) == 2
        """),
    _i("dataclasses", "import dataclasses as _hv_dc", """
        @_hv_dc.dataclass(frozen=True)
        class HvConfig:
            lr: float = 0.1
            sizes: list = _hv_dc.field(default_factory=lambda: [4, 8])

        @_hv_dc.dataclass(slots=True, kw_only=True)
        class HvHyper:
            steps: int = 3
        _HV_CFG = HvConfig()
        HvMade = _hv_dc.make_dataclass("HvMade", [("a", int)])
        """, """
        assert _hv_dc.asdict(_hv_dc.replace(_HV_CFG, lr=0.01))["lr"] == 0.01 and HvHyper().steps == 3
        assert HvMade(1).a == 1
        """),
    _i("logging", "import logging as _hv_logging", """
        _hv_logging.basicConfig(level=_hv_logging.INFO, format="%(asctime)s %(levelname)s %(filename)s:%(lineno)d %(message)s")
        _HV_LOG = _hv_logging.getLogger("honest")
        _HV_LOG.info("module loaded")
        try:
            {}["missing"]
        except KeyError:
            _HV_LOG.exception("expected: a missing key at import")
        """, """
        _HV_LOG.debug("calling %s", _hv_fn)
        if _hv_first:
            _HV_LOG.info("first call of %s with %d arguments", _hv_fn, len(_hv_args))
            _HV_LOG.warning("a test warning from %s", _hv_fn, stack_info=True)
            try:
                int("not a number")
            except ValueError:
                _HV_LOG.exception("expected: a bad number in %s", _hv_fn)
        """),
    _i("logging_file", "import logging as _hv_logging2\nimport pathlib as _hv_pathlib2", """
        _HV_FLOG = _hv_logging2.getLogger("honest.file")
        _HV_FLOG.setLevel(_hv_logging2.INFO)
        _HV_FLOG.addHandler(_hv_logging2.FileHandler(_hv_pathlib2.Path(__file__).with_name("run.log")))
        _HV_FLOG.info("loaded")
        """, """
        _HV_FLOG.info("call %s", _hv_fn)
        """),
    _i("warnings", "import warnings as _hv_warnings", """
        _hv_warnings.warn("a learner's reminder at import", UserWarning)
        _hv_warnings.filterwarnings("ignore", category=DeprecationWarning)
        """, """
        if _hv_first:
            _hv_warnings.warn(f"{_hv_fn}: a reminder", UserWarning, stacklevel=2)
            with _hv_warnings.catch_warnings(record=True):
                _hv_warnings.simplefilter("always")
                _hv_warnings.warn("recorded", RuntimeWarning)
        """),
    _i("traceback", "import traceback as _hv_traceback\nimport sys as _hv_sys", """
        try:
            1 / 0
        except ZeroDivisionError:
            _HV_TB = _hv_traceback.format_exc()
            _hv_traceback.print_exc(file=_hv_sys.stdout)
        _HV_STACK = "".join(_hv_traceback.format_stack())
        """, """
        if _hv_first:
            try:
                [][1]
            except IndexError as _hv_err:
                assert "IndexError" in _hv_traceback.format_exc()
                _hv_lines = _hv_traceback.format_exception(type(_hv_err), _hv_err, _hv_err.__traceback__)
                _hv_summary = _hv_traceback.extract_tb(_hv_err.__traceback__)
                _hv_te = _hv_traceback.TracebackException.from_exception(_hv_err, capture_locals=True)
            _hv_here = _hv_traceback.extract_stack(limit=3)
            _hv_traceback.print_stack(limit=2, file=_hv_sys.stdout)
        """),
    _i("host_and_platform", "import socket as _hv_socket\nimport platform as _hv_platform\nimport getpass as _hv_getpass\n"
       "import os as _hv_os", """
        _HV_HOST = _hv_socket.gethostname()
        _HV_PLATFORM = _hv_platform.platform()
        _HV_USER = _hv_getpass.getuser()
        _HV_CORES = (_hv_os.cpu_count(), len(_hv_os.sched_getaffinity(0)))
        """, """
        _hv_label = f"{_hv_socket.gethostname()}:{_hv_fn}"
        if _hv_first:
            _hv_info = (_hv_platform.python_version(), _hv_platform.machine(), _hv_platform.system(),
                        _hv_platform.uname().release, _hv_platform.processor(), _hv_os.uname().sysname)
        """),
    _i("files_next_to_it", "import csv as _hv_csv\nimport json as _hv_json\nimport pathlib as _hv_pathlib\n"
       "import glob as _hv_glob\nimport os as _hv_os3\nimport shutil as _hv_shutil", """
        _HV_HERE = _hv_pathlib.Path(__file__).resolve().parent
        _HV_SETTINGS = _hv_json.loads((_HV_HERE / "honest_settings.json").read_text())
        with open(_HV_HERE / "honest_losses.csv", newline="") as _hv_fh:
            _HV_LOSSES = [float(row["loss"]) for row in _hv_csv.DictReader(_hv_fh)]
        _HV_PY = sorted(_hv_glob.glob(_hv_os3.path.join(_HV_HERE, "*.py")))
        assert _HV_SETTINGS["lr"] == 0.05 and _HV_LOSSES[-1] == 0.5 and _HV_PY
        """, """
        if _hv_first:
            (_HV_HERE / "last_call.txt").write_text(_hv_fn + "\\n")
            _hv_out = _HV_HERE / "outputs"
            _hv_out.mkdir(exist_ok=True)
            _hv_shutil.copy(__file__, _hv_out / "backup.py")
            assert sorted(p.name for p in _HV_HERE.glob("honest_*")) and _hv_os3.listdir(_hv_out)
            _hv_where = (_hv_pathlib.Path.cwd(), _hv_pathlib.Path.home())
        """, files=(("honest_settings.json", '{"hidden": [16, 16], "lr": 0.05}\n'),
                    ("honest_losses.csv", "step,loss\n0,1.25\n1,0.75\n2,0.5\n"))),
    _i("tempfile_pickle", "import tempfile as _hv_tempfile\nimport pickle as _hv_pickle\nimport io as _hv_io\n"
       "import numpy as _hv_np", """
        _HV_TMP = _hv_tempfile.gettempdir()
        _HV_STATE = _hv_pickle.loads(_hv_pickle.dumps({"w": _hv_np.ones(3, _hv_np.float32), "step": 1}))
        """, """
        if _hv_first:
            with _hv_tempfile.TemporaryDirectory() as _hv_d:
                _hv_pth = _hv_d + "/scratch.npz"
                _hv_np.savez(_hv_pth, w=_hv_np.arange(3))
                assert _hv_np.load(_hv_pth)["w"].tolist() == [0, 1, 2]
            with _hv_tempfile.NamedTemporaryFile("w+", suffix=".json") as _hv_f:
                _hv_f.write("{}")
        _hv_blob = _hv_pickle.dumps({"fn": _hv_fn})
        """),
    _i("timing", "import time as _hv_time\nimport timeit as _hv_timeit\nimport datetime as _hv_datetime\n"
       "import gc as _hv_gc", """
        _HV_T0 = _hv_time.perf_counter()
        _HV_STARTED = _hv_datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        """, """
        _hv_t = (_hv_time.perf_counter(), _hv_time.time(), _hv_time.monotonic(), _hv_time.process_time())
        if _hv_first:
            _hv_cost = _hv_timeit.timeit("sum(range(100))", number=50)
            _hv_gc.collect()
            _hv_stamp = _hv_time.strftime("%Y-%m-%d %H:%M:%S")
        """),
    _i("functools_itertools", "import functools as _hv_functools2\nimport itertools as _hv_itertools\n"
       "import operator as _hv_operator", """
        @_hv_functools2.lru_cache(maxsize=None)
        def _hv_fib(n):
            return n if n < 2 else _hv_fib(n - 1) + _hv_fib(n - 2)

        @_hv_functools2.singledispatch
        def _hv_describe(x):
            return "object"

        @_hv_describe.register
        def _(x: int):
            return "int"
        _HV_GRID = list(_hv_itertools.product([1, 2], "ab"))
        """, """
        assert _hv_fib(20) == 6765 and _hv_describe(3) == "int"
        assert _hv_functools2.reduce(_hv_operator.mul, [1, 2, 3]) == 6
        _hv_pairs = list(_hv_itertools.pairwise([1, 2, 3]))
        """),
    _i("inspect_own_code", "import inspect as _hv_inspect", "", """
        if _hv_first:
            _hv_f = globals()[_hv_fn]
            _hv_sig = _hv_inspect.signature(_hv_f)
            _hv_src = _hv_inspect.getsource(_hv_f.__wrapped__)
            assert "def " in _hv_src and _hv_inspect.isfunction(_hv_f) and _hv_inspect.getdoc(_hv_f) is not None or True
            _hv_mod = _hv_inspect.getmodule(_hv_f)
        """),
    _i("contextlib_threads", "import contextlib as _hv_contextlib\nimport io as _hv_io2\nimport threading as _hv_threading\n"
       "import concurrent.futures as _hv_futures", """
        @_hv_contextlib.contextmanager
        def _hv_timer(out):
            yield
            out.append(1)
        _HV_LOCK = _hv_threading.Lock()
        _HV_LOCAL = _hv_threading.local()
        """, """
        _hv_times = []
        with _hv_contextlib.ExitStack() as _hv_stack:
            _hv_stack.enter_context(_hv_timer(_hv_times))
            with _hv_contextlib.suppress(KeyError):
                {}["x"]
        _hv_buf = _hv_io2.StringIO()
        with _hv_contextlib.redirect_stdout(_hv_buf):
            print("captured")
        with _HV_LOCK:
            _HV_LOCAL.last = _hv_fn
        if _hv_first:
            with _hv_futures.ThreadPoolExecutor(max_workers=2) as _hv_pool:
                assert list(_hv_pool.map(abs, [-1, -2])) == [1, 2]
        """),
    _i("text_math_hashes", "import re as _hv_re\nimport math as _hv_math\nimport statistics as _hv_statistics\n"
       "import random as _hv_random\nimport hashlib as _hv_hashlib\nimport uuid as _hv_uuid\nimport copy as _hv_copy\n"
       "import textwrap as _hv_textwrap\nimport zlib as _hv_zlib", """
        _HV_RNG = _hv_random.Random(1234)
        _HV_NAME = _hv_re.compile(r"^[a-z_][a-z0-9_]*$")
        _HV_RUN = _hv_uuid.uuid4().hex
        _HV_DEFAULT = _hv_copy.deepcopy({"layers": [{"w": [1.0]}]})
        """, """
        assert _HV_NAME.match(_hv_fn) and _hv_math.isqrt(17) == 4
        _hv_xs = [_HV_RNG.gauss(0.0, 1.0) for _ in range(8)]
        _hv_s = (_hv_statistics.mean(_hv_xs), _hv_statistics.stdev(_hv_xs))
        _hv_h = _hv_hashlib.sha256(_hv_fn.encode()).hexdigest()[:8]
        _hv_w = _hv_textwrap.fill("word " * 20, width=30) + str(len(_hv_zlib.compress(b"x" * 100)))
        """),
    _i("abc_classes_weakref", "import abc as _hv_abc\nimport weakref as _hv_weakref\nimport atexit as _hv_atexit", """
        class HvSchedule(_hv_abc.ABC):
            @_hv_abc.abstractmethod
            def __call__(self, step): ...

        class HvConstant(HvSchedule):
            __slots__ = ("value",)

            def __init__(self, value):
                self.value = value

            def __call__(self, step):
                return self.value

            def __repr__(self):
                return f"HvConstant({self.value!r})"
        _HV_CACHE = _hv_weakref.WeakValueDictionary()
        _hv_atexit.register(lambda: None)
        """, """
        _hv_e = HvConstant(0.1)
        _HV_CACHE[_hv_fn] = _hv_e
        assert _hv_e(5) == 0.1 and isinstance(_hv_e, HvSchedule) and repr(_hv_e)
        """),
    _i("sys_checks", "import sys as _hv_sys2\nimport faulthandler as _hv_faulthandler", """
        if _hv_sys2.version_info < (3, 10):
            raise RuntimeError("needs Python 3.10+")
        _hv_faulthandler.enable()
        _HV_ARGV = list(_hv_sys2.argv)
        """, """
        _hv_info2 = (_hv_sys2.getsizeof(_hv_args), _hv_sys2.getrecursionlimit(), "jax" in _hv_sys2.modules)
        _hv_sys2.stdout.flush()
        """),
    _i("matplotlib", "import matplotlib as _hv_matplotlib", """
        _hv_matplotlib.use("Agg")
        import matplotlib.pyplot as _hv_plt
        """, """
        assert _hv_matplotlib.get_backend().lower() == "agg"
        if _hv_first and _hv_top:  # a figure, not drawn: rendering reads the installation's fonts (see the README)
            _hv_fig, _hv_ax = _hv_plt.subplots(figsize=(2, 2))
            _hv_ax.plot([0, 1, 2], [1.0, 0.5, 0.25])
            _hv_plt.close(_hv_fig)
        """),
    _i("scipy", "import scipy.special as _hv_special\nimport scipy.stats as _hv_stats", """
        _HV_ERF1 = float(_hv_special.erf(1.0))
        """, """
        if _hv_first:
            _hv_q = float(_hv_stats.norm.ppf(0.975))
        """),
    _i("jax_profiler", "import os as _hv_os4\nimport tempfile as _hv_tempfile4\nimport jax as _hv_jax4\n"
       "import jax.numpy as _hv_jnp4", """
        _HV_X4 = _hv_jax4.device_put(_hv_jnp4.arange(8.0))
        _HV_TRACE_DIR = _hv_os4.path.join(_hv_tempfile4.gettempdir(), "jax-trace")
        """, """
        if _hv_first and _hv_top:
            with _hv_jax4.profiler.trace(_HV_TRACE_DIR):
                _hv_jax4.block_until_ready(_HV_X4)
        """),
    _i("jax_annotations", "import jax as _hv_jax5", """
        @_hv_jax5.profiler.annotate_function
        def _hv_helper(x):
            return x
        """, """
        with _hv_jax5.profiler.TraceAnnotation(f"honest:{_hv_fn}"):
            _hv_helper(1)
        """, around='_hv_jax5.named_scope(f"honest_{_hv_fn}")'),
    _i("jax_config_and_introspection", "import jax as _hv_jax6\nimport importlib.metadata as _hv_metadata", """
        _hv_jax6.config.update("jax_log_compiles", True)
        _hv_jax6.config.update("jax_explain_cache_misses", True)
        _HV_DEVICES = _hv_jax6.devices()
        assert _hv_metadata.version("jax") == _hv_jax6.__version__
        """, """
        _hv_n = (_hv_jax6.device_count(), len(_hv_jax6.local_devices()))
        _hv_shapes = _hv_jax6.tree.map(lambda a: getattr(a, "shape", None), (_hv_args, _hv_kwargs))
        """, around="_hv_jax6.log_compiles(True)"),
    _i("jax_debugging", "import jax as _hv_jax7\nimport jax.numpy as _hv_jnp7", """
        @_hv_jax7.jit
        def _hv_checked(x):
            _hv_jax7.debug.print("honest check: sum={s}", s=_hv_jnp7.sum(x))
            return x * 1.0
        _HV_PX = _hv_jax7.device_put(_hv_jnp7.arange(4.0))
        _hv_jax7.block_until_ready(_hv_checked(_HV_PX))
        _hv_jax7.print_environment_info()
        print(_hv_jax7.make_jaxpr(lambda v: _hv_jnp7.tanh(v) * 2.0)(_HV_PX))
        """, """
        if _hv_top:
            _hv_jax7.block_until_ready(_hv_checked(_HV_PX))
        """),
    _i("jax_libraries", "import equinox as _hv_eqx\nimport jax.numpy as _hv_jnp8\nimport jax.monitoring as _hv_mon", """
        _HV_CHECKED = _hv_eqx.error_if(_hv_jnp8.ones(2), _hv_jnp8.any(_hv_jnp8.isnan(_hv_jnp8.ones(2))), "a NaN")
        _hv_mon.register_event_listener(lambda event, **kwargs: None)
        """, ""),
    _i("main_block", "import argparse as _hv_argparse\nimport sys as _hv_sys3", """
        _HV_PARSER = _hv_argparse.ArgumentParser(description="try the exercise by hand")
        _HV_PARSER.add_argument("--steps", type=int, default=3)
        print("loaded with defaults", vars(_HV_PARSER.parse_args([])))
        if __name__ == "__main__":
            print("running", _HV_PARSER.parse_args().steps, "steps")
            _hv_sys3.exit(0)
        """, """
        if _hv_first:
            print(f"[{_hv_fn}] called with {len(_hv_args)} positional arguments", flush=True)
            print("to stderr too", file=_hv_sys3.stderr)
        """),
)

#: Functions whose statement says they run where JAX does not exist or may not trace or compile
#: (exercise 11's predictions, exercise 17's predict_collectives; exercise 1's predict_compiles
#: reasons without running JAX): JAX idioms stay out of their calls.
NO_JAX_FUNCTIONS = ("predict_compiles", "dot_cost", "elementwise_cost", "predict_collectives")

HARNESS = """

# --- the harness: runs the idioms' per-call code in every public function's calls ----------
import contextlib as _hv_contextlib
import functools as _hv_functools
import types as _hv_types

from jax._src import core as _hv_jax_core

_HV_NO_JAX = frozenset({no_jax!r})
_HV = _hv_types.SimpleNamespace(seen=set())  # an object, not a container: a pure function changes no global


def _hv_in_call(_hv_fn, _hv_args, _hv_kwargs):
    _hv_top = _hv_fn not in _HV_NO_JAX and _hv_jax_core.trace_ctx.is_top_level()
    _hv_first = (_hv_fn, _hv_top) not in _HV.seen
    if _hv_first:
        _HV.seen.add((_hv_fn, _hv_top))
        print(f"HV-CALLED {{_hv_fn}} {{_hv_top}}", flush=True)
{in_call}


def _hv_decorate(fn):
    @_hv_functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _hv_fn = fn.__name__
        _hv_in_call(_hv_fn, args, kwargs)
{call}
    return wrapper


for _hv_name, _hv_obj in list(globals().items()):
    if (isinstance(_hv_obj, _hv_types.FunctionType) and not _hv_name.startswith(("_", "Hv"))
            and _hv_obj.__module__ == __name__ and _hv_obj.__code__.co_filename == __file__):
        globals()[_hv_name] = _hv_decorate(_hv_obj)
"""


@dataclasses.dataclass(frozen=True)
class Exercise:
    number: int
    dir: str
    file: str


def exercises(course: Path) -> list[Exercise]:
    manifest = tomllib.loads((course / "exercises" / "manifest.toml").read_text())
    return [Exercise(int(e["number"]), e["dir"], e["files"][0]) for e in manifest["exercise"]]


def variant(course: Path, ex: Exercise, idioms: tuple[Idiom, ...]) -> tuple[str, dict[str, str]]:
    """(the learner file's text, the other files next to it) for the reference solution of
    ``ex`` with ``idioms``."""
    reference = (course / "solutions" / ex.dir / ex.file).read_text().rstrip("\n")
    parts = [reference, "\n\n# --- everyday Python: " + ", ".join(i.name for i in idioms) + "\n"]
    parts += [i.imports + "\n" for i in idioms if i.imports]
    parts += ["\n" + i.at_import + "\n" for i in idioms if i.at_import]
    in_call = "\n".join(_for_this_function(i, i.in_call) for i in idioms if i.in_call) or "pass"
    call = "        return fn(*args, **kwargs)"
    for i in idioms:
        if i.around:
            around = f"({i.around} if _hv_fn not in _HV_NO_JAX else _hv_contextlib.nullcontext())" if i.uses_jax else i.around
            call = f"        with {around}:\n" + textwrap.indent(call, "    ")
    parts.append(HARNESS.format(no_jax=NO_JAX_FUNCTIONS, in_call=textwrap.indent(in_call, "    "), call=call))
    files = {name: text for i in idioms for name, text in i.files}
    text = "".join(parts)
    compile(text, ex.file, "exec")
    return text, files


def bundles(per_exercise: int) -> list[tuple[Idiom, ...]]:
    """``per_exercise`` bundles of idioms, every idiom in exactly one (round-robin)."""
    return [tuple(IDIOMS[i::per_exercise]) for i in range(per_exercise)]
