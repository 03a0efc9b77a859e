"""The grader's code for exercise 7 (``exercises/07_training_lab``), one file per job.

* ``probes.py``: measuring functions run in the sandbox beside the learner's code, named
  ``"ex07_training:<function>"`` in the checks; the worker of this exercise imports only these
  (and the shared ``grader.probes``).
* ``judges.py``: trusted-side verdicts and references shared by the public and the hidden
  checks (``from grader.exercises.ex07_training.judges import ...``).
* ``reference.py``: the lab's constants, float64 NumPy references and draws that the
  judges and both check files use.
* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

This ``__init__`` imports nothing: the sandbox imports ``probes`` alone.
"""
