"""The grader's code for exercise 15 (``exercises/15_prng_discipline``), one file per job.

* ``probes.py``: measuring functions run in the sandbox beside the learner's code, named
  ``"ex15_prng:<function>"`` in the checks (keys travel as their raw ``uint32[2]`` data and a
  kind, ``"typed"`` or ``"legacy"``, and are rebuilt there); its ``truth_*`` functions run in
  the clean worker: the installed JAX's own draws from the keys the grader chose, and the
  epoch recomputed from the masks the learner returned.
* ``judges.py``: trusted-side draws and verdicts shared by the public and the hidden checks
  (``from grader.exercises.ex15_prng.judges import ...``).
* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

This ``__init__`` imports nothing: the sandbox imports ``probes`` alone.
"""
