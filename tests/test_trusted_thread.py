"""The worker's trusted thread runs no code the learner's can replace.

The learner's code shares the worker's process.  Through the class graph
(``object.__subclasses__()``) and a function's ``__globals__`` -- neither covered by an
audit event -- it can reach and rebind any module global of the grader's, and it can
replace builtins.  Code that the trusted thread runs while answering requests (the answer
loop, the compile meter) therefore looks up no global or builtin name at run time: all it
calls is bound as locals or closure cells before the learner's module is imported.  This
reads their bytecode, nested functions included -- the grader-namespace check
(``grader.sandbox.namespaces``) too."""

from __future__ import annotations

import dis
import types

from grader.sandbox import meter, namespaces, worker

LOOKUPS = {"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"}


def _global_lookups(code: types.CodeType) -> list[str]:
    found = [f"{code.co_name}: {i.opname} {i.argval}" for i in dis.get_instructions(code) if i.opname in LOOKUPS]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found += _global_lookups(const)
    return found


def test_the_answer_loop_looks_up_no_global_or_builtin():
    assert _global_lookups(worker._answer_loop.__code__) == []


def test_the_meter_reads_through_closures_that_look_up_no_global_or_builtin():
    runtime = {"read", "holds", "defined_at", "accusations_", "status"}  # what the trusted thread calls
    nested = [c for c in meter._closures.__code__.co_consts if isinstance(c, types.CodeType) and c.co_name in runtime]
    assert {c.co_name for c in nested} == runtime
    for code in nested:
        assert _global_lookups(code) == [], code.co_name


def test_the_grader_namespace_check_looks_up_no_global_or_builtin():
    runtime = {"changes", "namespace_changes", "kept_changes", "function_changes", "accuse", "defined_at",
               "name_of", "by_key_id"}
    nested = [c for c in namespaces._closure.__code__.co_consts
              if isinstance(c, types.CodeType) and c.co_name in runtime]
    assert {c.co_name for c in nested} == runtime
    for code in nested:
        assert _global_lookups(code) == [], code.co_name


def test_the_meter_class_has_no_methods_to_rebind():
    # read/accusations/status live on the instance (closures), not on the class the learner can reach
    assert not {"read", "accusations", "status"} & set(vars(meter.Meter))


def test_the_check_sees_a_global_lookup():
    def uses_a_builtin():
        return len([])

    assert _global_lookups(uses_a_builtin.__code__) == ["uses_a_builtin: LOAD_GLOBAL len"]
