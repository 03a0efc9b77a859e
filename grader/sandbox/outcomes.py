"""What the sandbox's guard says, in words: refusals and accusations.

The guard (``grader.sandbox.guard``) judges every audited operation of the learner's
process and reaches one of three outcomes:

* **allow** -- most operations, including library code that looks at its caller's frame
  only to read a module name or a line number;
* **refuse quietly** -- an operation that isolation already makes harmless or that no
  exercise needs raises an ordinary exception in the learner's code (``PermissionError``,
  ``ImportError`` for imports) whose message says what to do instead.  Nothing is held
  against the learner: a library that tries and handles the error just works, and if a
  check is lost, its feedback repeats the message (``REFUSALS``);
* **accuse** -- an operation that no honest code performs and that is aimed at the grader
  or at what it measures is refused *and* recorded with the learner's file and line; the
  exercise's measured checks then score nothing (status ``integrity``, ``ACCUSATIONS``).

Both tables are read by the worker (the words of the exception) and by the trusted side
(feedback and reports), so the learner reads the same sentence everywhere.  A refusal's
``detail`` (a path, an event name) may come from the learner's code: it is shown with
public checks only, never in a hidden check's feedback.
"""

from __future__ import annotations

#: kind -> (what was tried, a gerund phrase; what to do instead)
REFUSALS: dict[str, tuple[str, str]] = {
    "frame": ("asking for a live stack frame (inspect.currentframe, inspect.stack, sys._getframe, a traceback's "
              "tb_frame, a generator's gi_frame)",
              "use traceback.extract_stack(), traceback.format_exc() or logging instead: the sandbox does not hand "
              "out live frames"),
    "thread_frames": ("asking for every thread's stack frames (sys._current_frames)",
                      "use faulthandler.dump_traceback(all_threads=True) to see where threads are"),
    "gc": ("searching the garbage collector for objects (gc.get_objects, get_referrers, get_referents)",
           "keep references to the objects you need yourself (gc.collect() is fine)"),
    "hook": ("installing a tracing or profiling hook (sys.settrace, sys.setprofile, cProfile, pdb, breakpoint())",
             "time code with time.perf_counter or jax.profiler.trace, and debug on your own machine"),
    "audit_hook": ("adding an audit hook", "remove it: the sandbox keeps its own"),
    "open_code": ("replacing io.open_code", "remove it: imports read files the usual way"),
    "ctypes": ("using ctypes", "compute it with Python, NumPy or JAX: native code and raw memory are out of reach"),
    "native": ("loading a native extension from outside the Python installation",
               "use the installed packages; a compiled module of your own cannot be graded"),
    "interpreter": ("starting a sub-interpreter", "run your code in this interpreter"),
    "process": ("starting a process (subprocess, os.system, os.fork, ...)",
                "compute it in Python: no process can be started while your code is graded"),
    "signal": ("sending a signal to a process", "remove it: no other process is there to receive it"),
    "network": ("opening a network connection or socket",
                "work offline: the sandbox has no network (socket.gethostname() is fine)"),
    "limits": ("changing another process's resource limits", "remove it: only your own process is yours"),
    "link": ("making a link", "copy the file instead"),
    "xattr": ("changing a file's extended attributes", "remove it: no exercise needs them"),
    "database": ("opening an SQLite database", "keep data in Python objects, json or csv files next to your file"),
    "browser": ("opening a web browser", "remove it: nobody is there to look"),
    "write_outside": ("writing outside your folder",
                      "write files next to your file or under tempfile.gettempdir() (both are yours)"),
    "read_outside": ("reading outside your folder",
                     "read files that sit next to your file (pathlib.Path(__file__).parent / NAME)"),
    "read_grader": ("reading the grader's files", "remove it: the grader's code is not part of the exercise"),
    "dotdot": ("using a relative path with '..'", "build paths from pathlib.Path(__file__).parent"),
    "chdir_fd": ("changing folder through a file descriptor", "change folder by name, inside your folder"),
    "grader_import": ("importing the grader's own modules",
                      "import only the standard library and the installed packages (jax, numpy, optax, ...)"),
    "no_jax": ("loading JAX's own files where JAX must not run (this function must be plain arithmetic on its "
               "inputs)", "compute the answer from the shapes and dtypes with Python arithmetic; no JAX here"),
    "marshal": ("loading code with marshal", "use pickle or json for data"),
    "pyc": ("importing compiled bytecode (a .pyc file) from your folder",
            "keep only source files: delete __pycache__ folders and .pyc files from your submission"),
}

#: Refusals raised as ``ImportError`` (the others raise ``PermissionError``), and the
#: exception names a refusal can surface as in the learner's traceback.
IMPORT_REFUSALS = frozenset({"native", "grader_import", "pyc", "no_jax"})
REFUSAL_EXCEPTIONS = frozenset({"PermissionError", "ImportError", "ModuleNotFoundError"})

#: kind -> what the learner's code did, a verb phrase that follows "your code"
ACCUSATIONS: dict[str, str] = {
    "spoof_compile": "compiled code under the grader's or a library's file name (with source that is not that file's)",
    "spoof_code": "made a code object that claims to come from the grader or from a library",
    "spoof_function": "made a function out of the grader's or a library's code object",
    "code_swap": "replaced a function's code (__code__) with code from elsewhere",
    "library_exec": "ran the code object of the grader's or a library's function directly (exec)",
    "grader_frame": "held one of the grader's own stack frames",
    "answer_pipe": "wrote to the grader's answer pipe",
    "meter_rebind": "replaced a JAX cache function the grader counts compilations with",
    "grader_rebind": ("changed the grader's own code or data in the sandbox (a module global, a class attribute, "
                      "a function's defaults, code or closure, reached through the class graph)"),
    "jax_rule": ("replaced, removed or added a rule JAX registered for one of its own primitives (a lowering, "
                 "differentiation or batching rule: mlir.register_lowering, ad.primitive_jvps, ...) or changed "
                 "such a primitive (its impl or abstract evaluation), so that what JAX compiles is not what "
                 "it traced"),
}

#: Accusations (their words' start) that void every check, not only the measured ones: the
#: program JAX ran was not the one it traced, so returned values prove nothing either.
VOIDS_EVERY_CHECK: tuple[str, ...] = (ACCUSATIONS["jax_rule"],)

#: Why a measured number could not be taken (not an accusation: the checks that need it
#: fail and say so).
UNMEASURED: dict[str, str] = {
    "caches_cleared": ("your code cleared JAX's caches (jax.clear_caches() or a cache's cache_clear()) while it "
                       "was graded, so the grader could not count compilations and traces from then on"),
}

UNMEASURED_ADVICE = ("call jax.clear_caches() only outside the functions the grader calls (and not when your file is "
                     "imported); to time a first call, use a fresh jax.jit of the function instead")


REFUSED_MARK = "refused by the grader's sandbox"


def refusal_message(kind: str, detail: str = "") -> str:
    """The exception message the learner's code sees."""
    what, advice = REFUSALS.get(kind, ("this operation", "remove it"))
    return f"{REFUSED_MARK}: {what}" + (f" [{detail}]" if detail else "") + f"; {advice}"


def accusation_text(kind: str) -> str:
    return ACCUSATIONS.get(kind, "did something the grader's sandbox does not allow while it measures")


class Refusal:
    """One quiet refusal, as the trusted side reports it (``file`` as the learner knows it)."""

    __slots__ = ("kind", "detail", "file", "line")

    def __init__(self, kind: str, detail: str = "", file: str = "", line: int = 0):
        self.kind, self.detail, self.file, self.line = kind, detail, file, line

    def __eq__(self, other):
        return isinstance(other, Refusal) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return f"Refusal({self.kind!r}, {self.detail!r}, {self.file!r}, {self.line})"

    def key(self) -> tuple:
        return (self.kind, self.detail, self.file, self.line)

    def text(self, public: bool) -> str:
        """The sentence a check's feedback shows: with the detail and the place only for a
        public check (both may depend on what the learner's code was given)."""
        what, advice = REFUSALS.get(self.kind, ("an operation", "remove it"))
        if not public:
            return f"the grader's sandbox refused {what}; {advice}"
        where = f" at {self.file}:{self.line}" if self.file and self.line else ""
        detail = f" [{self.detail}]" if self.detail else ""
        return f"the grader's sandbox refused {what}{detail}{where}; {advice}"
