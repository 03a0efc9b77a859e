"""The grader's code for exercise 9 (``exercises/09_lowering_and_export``), one file per job.

* ``probes.py``: measuring functions run in the sandbox beside the learner's code, named
  ``"ex09_lowering:<function>"`` in the checks; the worker of this exercise imports only these
  (and the shared ``grader.probes``).
* ``judges.py``: trusted-side verdicts and references shared by the public and the hidden
  checks (``from grader.exercises.ex09_lowering.judges import ...``).
* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

This ``__init__`` imports nothing: the sandbox imports ``probes`` alone.
"""
