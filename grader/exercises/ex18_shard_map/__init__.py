"""The grader's code for exercise 18 (``exercises/18_shard_map``), one file per job.

* ``probes.py``: measuring functions run in the sandbox beside the learner's code, named
  ``"ex18_shard_map:<function>"`` in the checks; the worker of this exercise imports only these
  (and the shared ``grader.probes``).
* ``judges.py``: trusted-side draws, float64 references and verdicts shared by the public and
  the hidden checks (``from grader.exercises.ex18_shard_map.judges import ...``).
* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

This ``__init__`` imports nothing: the sandbox imports ``probes`` alone.
"""
