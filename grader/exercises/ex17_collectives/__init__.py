"""The grader's code for exercise 17 (``exercises/17_predicting_collectives``), one file per job.

* ``probes.py``: measuring functions run in the sandbox beside the learner's code, named
  ``"ex17_collectives:<function>"`` in the checks; the worker of this exercise imports only
  these (and the shared ``grader.probes``).  Its ``truth_collectives`` runs in the clean
  worker: the collectives XLA really inserts for a layout, compiled on the installed JAX.
* ``judges.py``: trusted-side layouts, draws, references and verdicts shared by the public
  and the hidden checks (``from grader.exercises.ex17_collectives.judges import ...``).
* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

This ``__init__`` imports nothing: the sandbox imports ``probes`` alone.
"""
