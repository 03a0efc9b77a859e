"""The grader's code for exercise 16 (``exercises/16_autodiff_modes``), one file per job.

* ``functions.py``: the functions the grader differentiates, by name (``probes.build`` makes
  them from plain-data parameters, in the sandbox and in the clean worker alike), their exact
  derivatives in float64 NumPy for the trusted side, and the draws of their parameters.
* ``probes.py``: measuring functions run in the sandbox beside the learner's code, named
  ``"ex16_autodiff:<function>"`` in the checks; ``truth_jacobian_flops`` and ``truth_hvp_work``
  run in the clean worker: what ``jax.jacfwd``, ``jax.jacrev`` and the reference hvp cost on the
  installed JAX and XLA.
* ``judges.py``: trusted-side draws and verdicts shared by the public and the hidden checks
  (``from grader.exercises.ex16_autodiff.judges import ...``).
* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

This ``__init__`` imports nothing: the sandbox imports ``probes`` alone.
"""
