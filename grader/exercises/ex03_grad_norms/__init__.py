"""The grader's code for exercise 3 (``exercises/03_per_example_grad_norms``), one file per job.

* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

* ``judges.py``: whether the traced program loops over the batch, shared by the public and the
  hidden loop checks.

No probes of its own (its checks use the shared ``grader.probes``): an exercise lacks whichever
of the files it does not need.
"""
