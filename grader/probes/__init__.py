"""Shared probes: measuring functions that run inside the sandbox, next to the learner's code,
for any exercise (``generic``: counted calls, jaxpr summaries, and ``traced_run``, the jaxpr and
the values of one trace; ``module_state``: a module's globals by content, for purity checks;
``traced``: whether a function does its work in JAX, traced end to end (the count floor,
``grader.traced_work``); ``steps``: what a jitted training step really is, for the probes of
exercises 7 and 12; ``fingerprint``: ``grade compare``'s measurements).  An exercise's own probes live in
``grader/exercises/exNN_<topic>/probes.py``.

Each is named ``"<module>:<function>"``, takes a ``grader.sandbox.context.Context`` first,
and returns plain data.  Probes measure; the trusted tests decide.
"""
