"""The grader's code for exercise 19 (``exercises/19_pallas_kernel``), one file per job.

* ``probes.py``: measuring functions run in the sandbox beside the learner's code, named
  ``"ex19_pallas:<function>"`` in the checks: the learner's kernels traced once under our
  ``jax.jit`` (and ``jax.jit(jax.vmap(...))``), their jaxpr read (grid and block shapes) and
  that same trace's compiled program run for the values (``grader.probes.generic.traced_run``).
* ``judges.py``: trusted-side draws, references and verdicts shared by the public and the
  hidden checks (``from grader.exercises.ex19_pallas.judges import ...``).
* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

This ``__init__`` imports nothing: the sandbox imports ``probes`` alone.
"""
