"""The grader's code for exercise 13 (``exercises/13_pytrees_and_purity``), one file per job.

* ``trees.py``: pytrees as plain data -- how a drawn tree (tuples, lists, dicts, ``None``,
  namedtuples) reaches the sandbox and how whatever the learner returns comes back; shared by
  the probes and the judges.
* ``probes.py``: measuring functions run in the sandbox beside the learner's code, named
  ``"ex13_pytrees:<function>"`` in the checks; the worker of this exercise imports only these
  (and the shared ``grader.probes``).
* ``judges.py``: trusted-side draws, references and verdicts shared by the public and the
  hidden checks (``from grader.exercises.ex13_pytrees.judges import ...``).
* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

This ``__init__`` imports nothing: the sandbox imports ``probes`` alone.
"""
