"""Helpers shared by an exercise's public and hidden check tests; trusted side only, never
imported by the sandbox worker; public code — nothing secret belongs here (hidden inputs
and their generators stay in test_hidden.py).

The grader copies each check file alone into a temporary folder before running it, so a
public and a hidden check file cannot import each other: what both need lives here, one
module per exercise (``exNN_<topic>.py``).  A module imports no more than the check files
that use it already do (most keep the trusted process free of JAX, for speed).
"""
