"""`grade`: the auto-checker for the JAX/XLA exercise suite.

Architecture in five minutes
----------------------------
Three users over one shared core::

    grader/__main__.py, entry.py, cli.py, cli_common.py   the `grade` command (thin click layer)
    grader/learner/    the learner's loop: grade list/exercise/all/hint/reset/watch, plain pytest
    grader/course/     authoritative grading for a course: release, ci, gradescope, batch,
                       gradebook, hidden checks, verify
    grader/compare/    the instructor's view of how a class solved one exercise
    grader/exercises/  one package per exercise: probes.py, judges.py, compare.py
    grader/probes/     probes every exercise may use;  sandbox/, reports/, templates/
    grader/*.py        the core: manifest, submission, runner, session, results, ...

* ``exercises/manifest.toml`` (loaded by ``grader.manifest``) lists every exercise: its
  learner file(s), checks (points, public/hidden), hints, timeout, memory and devices.
* Learner code runs only in a **sandbox worker** (``grader.sandbox.worker``): one fresh
  Python process per exercise, with a memory cap, its own JAX caches and device count.
  The trusted side talks to it through ``grader.sandbox.client.Sandbox`` over a private
  pipe; every answer is **plain data** (``grader.plaindata``) -- numbers, strings,
  arrays rebuilt from bytes -- so nothing the submission builds reaches the trusted side,
  and its cost is bounded in bytes, elements and depth before it is decoded
  (``grader.boundedjson``), the decoding counted in the exercise's time budget.
* **Probes** are measuring functions that run in the sandbox beside the learner's code:
  an exercise's own in ``grader.exercises.exNN_<topic>.probes`` (named
  ``"exNN_<topic>:<fn>"``; a worker imports only its exercise's), shared ones in
  ``grader.probes``.  They record compilations for feedback (``grader.compiles``),
  summarise jaxprs and HLO (``grader.ir``), read shardings.  Compile counts are judged on
  the worker's meter (``grader.sandbox.meter``) against the **reference solution**'s for
  the same request, run at the same time in a sandbox of the same kind (the ``reference``
  fixture, ``grader.testing``); code that must be a formula runs in a worker where JAX
  does not exist (``without_jax``, ``grader.sandbox.nojax``).
* **Checks** are ordinary pytest tests (public ones in ``exercises/<dir>/test_public.py``,
  hidden ones in ``solutions/<dir>/test_hidden.py``), run by ``grader.runner`` in the
  trusted process with ``grader.pytest_plugin`` providing ``submission``/``rng``/...
  fixtures; what an exercise's two check files share is its
  ``grader.exercises.exNN_<topic>.judges``.  Tests decide pass/fail from plain data;
  failures carry structured feedback (``grader.feedback.CheckFailed``: message, measured,
  expected, hint).
* ``grader.results`` holds frozen results, with two audiences: everything is for the
  learner except the ``private`` fields (what hidden checks measured, grader tracebacks),
  which only the instructor's JSON and the gradebook keep.  Every report is a pure
  function of a result: ``grader.render`` (terminal, JSON), ``grader.reports`` (Gradescope,
  JUnit, GitHub Actions).  ``grader.cli`` is a thin click layer over ``grader.learner.cli``,
  ``grader.course.cli`` and ``grader.compare.cli``.
* Everything that depends on the JAX version lives in ``grader.jaxcompat``.

Grading for a course (``grader.course``, the README's "For courses" section):

* ``release`` builds the learners' repository from an allowlist and scans it for leaks;
  ``hidden`` opens the private hidden checks (folder or tarball); ``ci`` grades one fork
  authoritatively and always leaves a result; ``gradescope`` builds Gradescope's
  autograder zip; ``verify`` proves the suite (solutions full marks, stubs zero, wrong
  fixtures and cheats caught).
* ``batch`` grades many forks, one (submission, exercise) unit per worker, and
  ``gradebook`` records every result in SQLite, resumably.  ``result_file`` decides which
  result files ``grade gradebook import`` takes: read within bounds, checked against the
  manifest, and signed by ``grade ci`` when the course keeps a key (``GRADER_RESULT_KEY``).
* A learner's repository is data: ``grader.gitsafe`` is the only module that runs git, never
  in a learner's repository (its objects are copied into one the grader made), and
  ``grader.safepath`` judges every name a learner chose before it becomes a path.
* ``grader.sandbox.user``: as root, learner code runs as an unprivileged user that cannot
  read the course's secrets.
"""

__version__ = "0.1.0"
