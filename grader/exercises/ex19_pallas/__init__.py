"""The grader's code for exercise 19 (``exercises/19_pallas_kernel``), one file per job.

* ``probes.py``: measuring functions run in the sandbox beside the learner's code, named
  ``"ex19_pallas:<function>"`` in the checks: the learner's kernels called as written, under
  our ``jax.jit(jax.vmap(...))``, and read from their jaxpr (grid and block shapes).
* ``judges.py``: trusted-side draws, references and verdicts shared by the public and the
  hidden checks (``from grader.exercises.ex19_pallas.judges import ...``).
* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

This ``__init__`` imports nothing: the sandbox imports ``probes`` alone.
"""
