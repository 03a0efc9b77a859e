"""Probes: measuring functions that run inside the sandbox, next to the learner's code.

Each is named ``"<module>:<function>"``, takes a ``grader.sandbox.context.Context`` first,
and returns plain data.  Probes measure; the trusted tests decide.
"""
