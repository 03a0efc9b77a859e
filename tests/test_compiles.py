"""Counting compilations.  Verdicts: the meter's total against the reference solution's total
for the same calls (``grader.testing``), which no forged attribution lowers.  Feedback (and
the fallback where no reference exists): the recorder, which decides whose compilations they
are by where the traced code comes from -- never by names -- and tells JAX's own incidental
compilations apart."""

import functools
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grader.compiles import CompileRecorder, defined_function_names
from grader.feedback import CheckFailed


def fresh(name="target", **jit_kwargs):
    def target(x, mode="sum"):
        return jnp.sum(x) if mode == "sum" else jnp.max(x)

    target.__name__ = target.__qualname__ = name
    return jax.jit(target, **jit_kwargs)


def test_counts_shape_changes_and_cache_hits_with_signatures():
    f = fresh("shape_target")
    with CompileRecorder() as rec:
        f(jnp.zeros(3)); f(jnp.zeros(3)); f(jnp.zeros(4))
    assert rec.own("shape_target") == 2
    sigs = [e["signature"] for e in rec.events()]
    assert len(sigs) == 2 and "float32[3]" in sigs[0] and "float32[4]" in sigs[1]


def test_incidental_compiles_are_told_apart_by_where_their_code_comes_from():
    f = fresh("main_fn")
    with CompileRecorder() as rec:
        x = jnp.ones((5, 7)).astype(jnp.int32)  # broadcast_in_dim + convert_element_type: JAX's own code
        f(x)
    assert rec.own() == 1 and rec.by_name() == {"main_fn": 1}
    assert rec.incidental >= 1
    assert {c["name"] for c in rec.compilations if not c["own"]} <= {"broadcast_in_dim", "convert_element_type"}


def test_renamed_exec_made_and_partial_functions_are_still_own():
    def scaled(x, k):
        return x * k

    made = {}
    exec("import jax.numpy as jnp\ndef hidden_name(x):\n    return jnp.cos(x) + 1\n", made)
    renamed = fresh("looks_like_broadcast_in_dim")
    with CompileRecorder() as rec:
        jax.jit(functools.partial(scaled, k=3.0))(jnp.zeros(2))
        jax.jit(made["hidden_name"])(jnp.zeros(2))
        renamed(jnp.zeros(5))
        jax.jit(lambda v: v)(jnp.zeros(6))  # no equation at all: judged by where it is defined
    # partial and lambda are made and dropped at once: their cache entries are gone before the block
    # ends, so they are counted (as own) from JAX's compilation counter, not classified
    assert rec.learner == 4 and {c["name"] for c in rec.compilations if not c["own"]} <= {"broadcast_in_dim"}


def test_a_dropped_lowering_cannot_borrow_a_library_lowering_of_the_same_name():
    """A compile whose traced program was dropped (its lowering leaves JAX's cache, its
    compiled entry stays) beside a genuine library lowering of the same name: one library
    lowering accounts for one compilation, so the other is the learner's."""
    kept = []
    with CompileRecorder() as rec:
        for n in range(3):
            def root(s):
                return jnp.sqrt(s) * 2.0
            root.__name__ = "broadcast_in_dim"
            low = jax.jit(root).lower(jnp.float32(4.0))
            kept.append(low)
            del root
            low.compile()
            jnp.zeros((1000 + n,))  # JAX's own jit(broadcast_in_dim), a new lowering each time
    assert rec.learner >= 3 and rec.total - rec.incidental >= 3


def test_library_function_jitted_directly_counts_as_library_code():
    x = jnp.zeros(3)  # outside the recorder: whether jnp.zeros compiles here depends on what ran before
    with CompileRecorder() as rec:
        jax.jit(jnp.sin)(x)
    assert rec.learner == 0 and rec.incidental == 1


def test_programs_with_no_traceback_to_judge_are_own_whoever_built_them():
    # a deserialized jax.export module and a host callback run code that no equation's
    # traceback describes: wrapped in library code, they would otherwise look like JAX's own
    from jax import export

    def work(x):
        return jnp.tanh(x) * 2

    spec = jax.ShapeDtypeStruct((4,), jnp.float32)
    x = jnp.zeros(4)  # outside the recorder: jnp.zeros's own first compilation is JAX's (run alone, it counts)
    with CompileRecorder() as rec:
        export.deserialize(export.export(jax.jit(work))(spec).serialize()).call(x)
        jax.jit(functools.partial(jax.pure_callback, np.tanh, spec))(x)
    assert rec.total >= 2 and rec.incidental == 0 and rec.learner == rec.total


def test_static_argument_values_each_compile():
    f = fresh("static_fn", static_argnames=("mode",))
    with CompileRecorder() as rec:
        f(jnp.zeros(3), mode="sum"); f(jnp.zeros(3), mode="max"); f(jnp.zeros(3), mode="sum")
    assert rec.own("static_fn") == 2


def test_nested_jit_compiles_only_the_outer_function():
    @jax.jit
    def inner_fn(x):
        return x * 2

    @jax.jit
    def outer_fn(x):
        return inner_fn(x) + 1

    with CompileRecorder() as rec:
        outer_fn(jnp.zeros(2))
    assert rec.by_name() == {"outer_fn": 1}


def test_a_silenced_log_hides_nothing():
    f = fresh("silenced_fn")
    with CompileRecorder() as rec:
        logging.disable(logging.CRITICAL)
        jax.config.update("jax_log_compiles", False)
        f(jnp.zeros(6)); f(jnp.zeros(7))
    logging.disable(logging.NOTSET)
    assert not rec.events()  # the log saw nothing...
    assert rec.own("silenced_fn") == 2  # ...the caches did


def test_cache_miss_explanations_name_the_argument():
    f = fresh("explained_fn")
    with CompileRecorder(explain_cache_misses=True) as rec:
        f(jnp.zeros(3)); f(jnp.zeros(4))
    assert any("now f32[4] and before f32[3]" in m for m in rec.cache_misses)


def test_recorder_restores_config():
    before = (jax.config.jax_log_compiles, jax.config.jax_explain_cache_misses)
    with CompileRecorder(explain_cache_misses=True):
        pass
    assert (jax.config.jax_log_compiles, jax.config.jax_explain_cache_misses) == before


def test_defined_function_names_include_nested_and_lambdas_and_decode_like_python():
    src = "def a():\n    def b():\n        return lambda: 1\n    return b\nclass C:\n    def m(self): pass\n"
    names = defined_function_names(src)
    assert {"a", "b", "<lambda>", "m"} <= names
    assert "<listcomp>" not in defined_function_names("x = [i for i in range(3)]")
    latin1 = "# -*- coding: latin-1 -*-\n# caf\xe9\ndef f():\n    return 1\n".encode("latin-1")
    assert defined_function_names(latin1) == {"f"}
    assert defined_function_names(b"\xef\xbb\xbfdef g():\n    return 2\n") == {"g"}


def test_to_plain_is_json_ready():
    import json

    f = fresh("plain_fn")
    with CompileRecorder() as rec:
        f(np.zeros(2, np.float32))
    plain = rec.to_plain()
    assert plain["own_by_name"] == {"plain_fn": 1} and plain["events"][0]["name"] == "plain_fn"
    json.dumps(plain)


# --- verdicts rest on totals, against the reference solution's (grader.testing) ------------------

FORGE = '''
import concurrent.futures, jax, jax.numpy as jnp
from jax._src import source_info_util
from jax._src.lib import xla_client

# a traceback of library frames only, captured in another thread
LIBRARY_TB = concurrent.futures.ThreadPoolExecutor(1).submit(xla_client.Traceback.get_traceback).result()
_n = [0]

def _body(x):
    _n[0] += 1
    jax.config.update("jax_xla_profile_version", _n[0])  # in the trace context: the next call misses
    if _n[0] > 1:
        _traced.__name__ = "convert_element_type"
        with source_info_util.user_context(LIBRARY_TB):
            return jnp.sin(x) * 2.0
    return jnp.sin(x) * 2.0

def _traced(x):
    return _body(x)

step = jax.jit(_traced)
'''


def _forged_step():
    ns = {}
    exec(compile(FORGE, "/tmp/learner_forge.py", "exec"), ns)
    return ns["step"]


def test_forged_source_info_fools_the_attribution_but_not_the_total():
    """Learner code can make its compilations look like JAX's own (a library traceback set as
    the trace's source-info context, a library name): the recorder's attribution drops them,
    the meter's total cannot, and the verdict rests on the total."""
    from jax._src.interpreters import pxla

    from grader.testing import Compiles, expect_compiles

    step = _forged_step()
    x = jnp.zeros(3)
    jnp.sin(x)  # the eager sin of the first trace below is compiled already
    before = pxla._cached_compilation.cache_info().misses
    try:
        with CompileRecorder() as rec:
            for _ in range(4):
                step(x)
    finally:
        jax.config.update("jax_xla_profile_version", 0)
    total = pxla._cached_compilation.cache_info().misses - before
    assert total == 4 and rec.learner < total  # four compilations, some disguised as JAX's own
    forged = Compiles(total=total, reference=1, attributed=rec.learner, incidental=rec.incidental)
    with pytest.raises(CheckFailed) as info:
        expect_compiles(forged, at_least=1, at_most=1, what="step")
    assert "4 compilations during these calls; the reference solution makes 1" in info.value.message


def test_the_budget_is_the_reference_total_which_must_be_what_the_check_expects():
    from grader.testing import Compiles, ReferenceMismatch, budget, expect_compiles

    assert expect_compiles(Compiles(total=1, reference=1, attributed=0), at_least=1, at_most=1) == 1
    assert budget(Compiles(total=0, reference=0, attributed=0), 0, 0) == (0, 0)
    with pytest.raises(CheckFailed):  # one more than the reference, whatever the attribution says
        expect_compiles(Compiles(total=2, reference=1, attributed=0), at_least=1, at_most=1)
    with pytest.raises(CheckFailed) as info:  # none at all
        expect_compiles(Compiles(total=0, reference=1, attributed=0), at_least=1, at_most=1)
    assert "jitted" in info.value.diagnosis
    for ref in (0, 2):  # the live reference disagrees with the check's design: a grader error, never slack
        with pytest.raises(ReferenceMismatch):
            expect_compiles(Compiles(total=ref, reference=ref, attributed=ref), at_least=1, at_most=1)
    # without a reference the attributed count is judged, and the message says so
    with pytest.raises(CheckFailed) as info:
        expect_compiles(Compiles(total=1, reference=None, attributed=2), at_least=1, at_most=1)
    assert "no reference solution here" in info.value.measured


class _Box:
    """A sandbox stand-in: answers in order, or fails as told."""

    def __init__(self, answers, compiles):
        self.answers, self.compiles = list(answers), compiles
        self.last_meter, self.sent, self.read, self.violations = {}, [], [], []

    def submit(self, op, target, *args, **kwargs):
        self.sent.append(target)
        return len(self.sent)

    def result(self, rid):
        self.read.append(rid)
        self.last_meter = {"compiles": self.compiles, "traces": 0}
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def note_violation(self, reason):
        self.violations.append(reason)


def test_probe_pair_sends_both_requests_first_and_always_reads_both_answers():
    from grader.sandbox.client import SubmissionError
    from grader.testing import probe_compiles, probe_pair

    learner, reference = _Box([{"compiles": {}}], 5), _Box([{"compiles": {}}], 2)
    out, compiles = probe_compiles(learner, reference, "generic:count_compiles")
    assert (compiles.total, compiles.reference) == (5, 2) and learner.read == reference.read == [1]
    # the learner's failure is the learner's: the reference's answer is still read (the next pair lines up)
    learner, reference = _Box([SubmissionError("exception", "boom")], 0), _Box([{}], 0)
    with pytest.raises(SubmissionError):
        probe_pair(learner, reference, "x:y")
    assert reference.read == [1]
    # the reference's failure is the grader's
    with pytest.raises(RuntimeError, match="reference solution failed"):
        probe_pair(_Box([{}], 0), _Box([SubmissionError("exception", "boom")], 0), "x:y")


def test_a_forging_file_fails_against_the_reference_in_real_sandboxes(tmp_path):
    """End to end: the same calls in the learner's sandbox and in the reference's; the
    learner's total is judged, however its compilations are disguised."""
    from grader.sandbox.client import Sandbox
    from grader.submission import from_source
    from grader.testing import count_compiles, expect_compiles

    honest = "import jax, jax.numpy as jnp\n\n@jax.jit\ndef step(x):\n    return jnp.sin(x) * 2.0\n"
    calls = [{"args": [np.ones(5, np.float32)]} for _ in range(4)]
    with Sandbox(from_source(str(tmp_path / "f.py"), "f.py", FORGE.encode()), timeout_s=60) as learner, \
            Sandbox(from_source(str(tmp_path / "r.py"), "r.py", honest.encode()), timeout_s=60) as reference:
        _, compiles = count_compiles(learner, reference, "step", calls)
    assert compiles.reference == 1 and compiles.total >= 4 and not learner.integrity
    with pytest.raises(CheckFailed):
        expect_compiles(compiles, at_least=1, at_most=1, what="step")
