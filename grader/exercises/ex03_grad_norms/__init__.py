"""The grader's code for exercise 3 (``exercises/03_per_example_grad_norms``), one file per job.

* ``compare.py``: ``SPEC``, what ``grade compare`` measures for this exercise, on which fixed
  inputs (registered by ``grader.compare.specs``).

* ``probes.py``: whether the program copies the parameters once per example.
* ``judges.py``: whether the traced program loops over the batch or maps the parameters,
  shared by the public and the hidden loop checks.
"""
