"""The grader's code for exercise 8 (``exercises/08_equinox_modules``), one file per job.

* ``probes.py``: measuring functions run in the sandbox beside the learner's code, named
  ``"ex08_equinox:<function>"`` in the checks; the worker of this exercise imports only these
  (and the shared ``grader.probes``).
* ``judges.py``: trusted-side verdicts and references shared by the public and the hidden
  checks (``from grader.exercises.ex08_equinox.judges import ...``).
* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

This ``__init__`` imports nothing: the sandbox imports ``probes`` alone.
"""
