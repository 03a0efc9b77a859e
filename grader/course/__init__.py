"""Authoritative grading for a course: what an instructor and the course's CI run.

``cli``         `grade batch` and `grade gradebook` (click)
``release``     the learners' repository, built from an allowlist and scanned for leaks
``hidden``      the private hidden checks, from a folder or a tarball
``ci``          grades one fork authoritatively and always leaves a result
``gradescope``  Gradescope's autograder zip
``batch``       many forks, one (submission, exercise) unit per worker process
``gradebook``   every result in SQLite, resumably
``verify``      proves the suite: solutions full marks, stubs zero, fixtures caught

Grading itself is the shared core's (``grader.runner``); this package adds who is graded,
with which hidden checks, and where the results go.
"""
