"""Scenarios for the integrity guard, run in a fresh interpreter by ``tests/test_guard.py``.

    python guard_scenarios.py SANDBOX GRADER_DIR   -> prints one JSON object

The guard is installed as the worker installs it (``grader.sandbox.guard.install``) with
SANDBOX as the learner's folder and GRADER_DIR as "the grader's code" (a module there,
``leaky.py``, stands for a hole: it keeps one of its frames where the learner's code can reach it).  Each scenario
runs learner-side code and reports what happened: "ok" (allowed), the exception the
learner's code got, and what the guard recorded (refusals, violations).  Nothing here
needs JAX, so it runs on any Python the grader supports (3.12's ``typing`` and ``enum``
ask ``sys._getframemodulename`` instead of frames).
"""

from __future__ import annotations

import json
import os
import sys

SANDBOX, GRADER_DIR = sys.argv[1], sys.argv[2]
sys.path.insert(0, GRADER_DIR)
# The scenarios' own code must count as the learner's: it is compiled under a file name
# inside the sandbox (this file lives in the course's tests/, outside the installation).
LEARNER_FILE = os.path.join(SANDBOX, "learner.py")

import builtins  # noqa: E402
import collections  # noqa: E402
import enum  # noqa: E402
import linecache  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import socket  # noqa: E402
import traceback  # noqa: E402
import typing  # noqa: E402
import warnings  # noqa: E402

from grader.sandbox import guard  # noqa: E402
import fakegrader.leaky as LEAKY  # noqa: E402 - the grader's code, loaded before any learner code (as in the worker)

roots = guard.Roots.of_this_python(sandbox=SANDBOX, grader=os.path.join(GRADER_DIR, "fakegrader"))
violations: list = []
refusals: list = []
guard.install(roots, violations, refusals)

SCENARIOS = {
    # --- allowed: the standard library reading a module name or a line for the learner
    "namedtuple": "P = collections.namedtuple('P', 'x y'); P(1, 2)",
    "typevar_newtype": "T = typing.TypeVar('T'); U = typing.NewType('U', int); U(3)",
    "typeddict_functional": "M = typing.TypedDict('M', {'a': int})",
    "enum_functional": "C = enum.Enum('C', 'RED GREEN'); C.RED",
    "format_exc": "try:\n    1 / 0\nexcept ZeroDivisionError:\n    out = traceback.format_exc()\nassert 'ZeroDivision' in out",
    "format_stack": "out = traceback.format_stack(); traceback.extract_stack(); traceback.print_stack(file=__import__('io').StringIO())",
    "capture_locals": ("try:\n    x = 1 / 0\nexcept ZeroDivisionError as e:\n"
                       "    traceback.TracebackException.from_exception(e, capture_locals=True).format()"),
    "logging_exception": ("log = logging.getLogger('scenario'); log.addHandler(logging.NullHandler())\n"
                          "try:\n    1 / 0\nexcept ZeroDivisionError:\n    log.exception('x', stack_info=True)"),
    "warnings_stacklevel": "warnings.warn('w', UserWarning, stacklevel=2)",
    "hostname_platform": "socket.gethostname(); platform.platform(); platform.processor()",
    "dev_null_and_own_folder": ("open(os.devnull, 'w').write('x'); open(os.path.join(SANDBOX, 'out.txt'), 'w').write('x');"
                                " open(os.path.join(SANDBOX, 'out.txt')).read(); os.listdir(SANDBOX)"),
    "own_function_code": "def a():\n    return 1\ndef b():\n    return 2\na.__code__ = b.__code__",
    "ast_parse_of_a_library_file": "import ast, json\nast.parse('x = 1', json.__file__)",
    # CPython's traceback printer parses each shown line's segment under its file's name
    "thread_dies": ("import threading\ndef work():\n    return 1 / 0\n"
                    "t = threading.Thread(target=work); t.start(); t.join()"),
    # a library making coroutine code of its own generators at import (types.coroutine: asyncio, trio)
    "library_import_makes_code": ("import tempfile; tempfile.tempdir = SANDBOX  # as the worker sets TMPDIR\n"
                                  "try:\n    import trio\nexcept Exception:  # what it is refused on the way, it handles\n    import asyncio"),
    # absl names the module that defines a flag (optax's import does it)
    "absl_defines_a_flag": ("try:\n    from absl import flags\nexcept ImportError:\n    flags = None\n"
                            "if flags is not None:\n    flags.DEFINE_string('guard_scenario_flag', 'a', 'doc')"),
    # --- refused quietly
    "currentframe": "import inspect\ninspect.currentframe()",
    "inspect_stack": "import inspect\ninspect.stack()",
    "getframe": "sys._getframe()",
    "walk_tb": "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    list(traceback.walk_tb(e.__traceback__))",
    "walk_stack": "list(traceback.walk_stack(None))",
    "gi_frame": "def g():\n    yield 1\ngen = g()\ngen.gi_frame",
    "getframe_from_c": "list(map(sys._getframe, [0]))",
    "current_frames": "sys._current_frames()",
    "gc_walk": "import gc\ngc.get_referrers(gc)",
    "settrace": "sys.settrace(lambda *a: None)",
    "subprocess": "import subprocess\nsubprocess.run(['true'])",
    "socket_connect": "socket.create_connection(('127.0.0.1', 9), timeout=1)",
    "read_outside": "open('/etc/hostname').read()",
    "write_outside": "open('/tmp/guard-scenario-escape', 'w')",
    "grader_import": "import fakegrader.leaky",
    "ctypes": "import ctypes\nctypes.CDLL(None)",
    "marshal_load": "import marshal, io\nmarshal.load(io.BytesIO(marshal.dumps(1)))",
    # --- a consumer whose helpers the learner replaced is ordinary code again
    "consumer_with_replaced_walk_stack": ("orig = traceback.walk_stack\ntraceback.walk_stack = lambda f: [(f, 0)]\n"
                                          "try:\n    traceback.extract_stack()\nfinally:\n    traceback.walk_stack = orig"),
    "consumer_with_replaced_lazycache": ("got = []\norig = linecache.lazycache\n"
                                         "linecache.lazycache = lambda name, glb: got.append(glb)\n"
                                         "try:\n    traceback.format_stack()\nfinally:\n    linecache.lazycache = orig\n"
                                         "assert not got, 'the globals of a frame reached the learner'"),
    "consumer_copy_with_own_globals": ("ns = {'__name__': 'copy'}\n"
                                       "exec(compile(open(traceback.__file__).read(), traceback.__file__, 'exec'), ns)\n"
                                       "ns['linecache'] = type('L', (), {'lazycache': staticmethod(lambda n, g: None),"
                                       " 'checkcache': staticmethod(lambda n: None)})\n"
                                       "ns['extract_stack']()"),
    "repr_during_capture_locals": ("class R:\n    def __repr__(self):\n        try:\n            sys._getframe(1)\n"
                                   "            STOLEN.append(1)\n        except PermissionError:\n            pass\n"
                                   "        return 'R'\n"
                                   "r = R()\ntraceback.TracebackException(ValueError, ValueError(), None, capture_locals=True)\n"
                                   "traceback.StackSummary.extract(traceback.walk_stack(None), capture_locals=True)\n"
                                   "assert not STOLEN"),
    "handler_sees_no_frame": ("class H(logging.Handler):\n    def emit(self, record):\n"
                              "        try:\n            record.exc_info[2].tb_frame\n            STOLEN.append(1)\n"
                              "        except PermissionError:\n            pass\n"
                              "log = logging.getLogger('h'); log.addHandler(H()); log.propagate = False\n"
                              "try:\n    1 / 0\nexcept ZeroDivisionError:\n    log.exception('x')\nassert not STOLEN"),
    "stack_summary_subclass_c_callable": ("class S(traceback.StackSummary):\n    _extract_from_extended_frame_gen = dict\n"
                                          "S.extract(traceback.walk_stack(None))"),
    "stack_summary_subclass": ("class S(traceback.StackSummary):\n    @classmethod\n"
                               "    def _extract_from_extended_frame_gen(klass, gen, **kw):\n        return list(gen)\n"
                               "S.extract(traceback.walk_stack(None))"),
    # --- the hook never runs the learner's code (it would run unguarded)
    "patched_builtins": ("calls = []\nreal = (builtins.len, builtins.isinstance, builtins.getattr, builtins.next)\n"
                         "def spy(real_fn):\n    def f(*a, **k):\n        try:\n            sys._getframe(1)\n"
                         "            calls.append(real_fn.__name__)\n        except PermissionError:\n            pass\n"
                         "        return real_fn(*a, **k)\n    return f\n"
                         "builtins.len, builtins.isinstance, builtins.getattr, builtins.next = map(spy, real)\n"
                         "try:\n    try:\n        open('/etc/hostname')\n    except PermissionError:\n        pass\n"
                         "    try:\n        __import__('gc').get_objects()\n    except PermissionError:\n        pass\n"
                         "finally:\n    builtins.len, builtins.isinstance, builtins.getattr, builtins.next = real\n"
                         "assert not calls, calls"),
    "evil_path_string": ("calls = []\nclass S(str):\n    def startswith(self, *a):\n        calls.append(1); return False\n"
                         "    def __eq__(self, o):\n        calls.append(1); return False\n"
                         "    def __hash__(self):\n        calls.append(1); return 0\n"
                         "    def split(self, *a):\n        calls.append(1); return []\n"
                         "try:\n    open(S('/etc/hostname'))\nexcept PermissionError:\n    pass\nassert not calls, calls"),
    "fabricated_events": ("calls = []\nclass S(str):\n    def __eq__(self, o):\n        calls.append(1); return False\n"
                          "    def __hash__(self):\n        calls.append(1); return 0\n"
                          "class F:\n    @property\n    def f_code(self):\n        calls.append(1)\n"
                          "try:\n    sys.audit(S('open'), S('/etc/hostname'), S('r'), 0)\nexcept PermissionError:\n    pass\n"
                          "try:\n    sys.audit('object.__getattr__', F(), 'f_code')\nexcept PermissionError:\n    pass\n"
                          "assert not calls, calls"),
    # --- accused
    "compile_under_a_library_name": "import json\nexec(compile('def f(): pass', json.__file__, 'exec'), {})",
    "code_claiming_a_library": "import json\ncompile('1', 'x.py', 'eval').replace(co_filename=json.__file__)",
    "function_from_library_code": "import json, types\ntypes.FunctionType(json.dumps.__code__, {})",
    "swap_in_library_code": "import json\ndef g():\n    pass\ng.__code__ = json.dumps.__code__",
    "exec_library_function_code": "import json\nexec(json.dumps.__code__, {})",
    # a frame the grader's code left where the learner's can reach it (a hole): touching it is evidence
    "holding_a_grader_frame": "LEAKY.FRAME.f_code",
}


def run(name: str, code: str) -> dict:
    before_r, before_v = len(refusals), len(violations)
    text = code
    env = {"sys": sys, "os": os, "builtins": builtins, "collections": collections, "enum": enum,
           "linecache": linecache, "logging": logging, "platform": platform, "socket": socket,
           "traceback": traceback, "typing": typing, "warnings": warnings, "SANDBOX": SANDBOX, "STOLEN": [],
           "LEAKY": LEAKY, "__name__": "learner"}
    try:
        exec(compile(text, LEARNER_FILE, "exec"), env)
        outcome = "ok"
    except BaseException as exc:  # noqa: BLE001
        outcome = f"{type(exc).__name__}: {exc}"[:300]
    return {"outcome": outcome,
            "refused": [json.loads(r) for r in refusals[before_r:]],
            "accused": [json.loads(v) for v in violations[before_v:]]}


if __name__ == "__main__":
    sys.modules.pop("fakegrader", None)  # as the worker seals the grader: importing it again is refused
    sys.modules.pop("fakegrader.leaky", None)
    results = {name: run(name, code) for name, code in SCENARIOS.items()}
    print(json.dumps(results))
