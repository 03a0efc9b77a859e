"""The grader's code for exercise 14 (``exercises/14_control_flow``), one file per job.

* ``probes.py``: measuring functions run in the sandbox beside the learner's code, named
  ``"ex14_control_flow:<function>"`` in the checks; the worker of this exercise imports only
  these (and the shared ``grader.probes``).  Its ``truth_answers`` runs in the clean worker:
  what the installed JAX does about the statement's questions.
* ``judges.py``: trusted-side draws, references and verdicts shared by the public and the
  hidden checks (``from grader.exercises.ex14_control_flow.judges import ...``).
* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

This ``__init__`` imports nothing: the sandbox imports ``probes`` alone.
"""
