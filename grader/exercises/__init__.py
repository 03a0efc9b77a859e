"""One package per exercise: everything the grader knows about that exercise alone.

``exNN_<topic>/`` holds up to four modules, each found by a general mechanism, so a new
exercise needs no edit anywhere else in ``grader/``:

* ``probes.py`` -- measuring functions that run in the sandbox beside the learner's code,
  named ``"exNN_<topic>:<function>"``.  ``grader.sandbox.context.preload_probes`` imports
  only the probes of the exercise being graded (``grader.sandbox.client.probes_of_exercise``)
  plus the shared ones in ``grader.probes``.
* ``nojax_probes.py`` (optional) -- probes for a worker where JAX does not exist
  (``grader.sandbox.nojax``): they import no JAX and call learner functions that must be
  formulas (exercise 17's predictions), with arguments such a worker can build.
* ``judges.py`` -- the trusted side shared by the exercise's public and hidden check files:
  references, draws and verdicts (``CheckFailed`` with feedback).  The grader copies each
  check file alone into a temporary folder before running it, so the two check files cannot
  import each other: what both need lives here.  This code is public (it ships in the
  learners' release): hidden inputs and their generators stay in ``test_hidden.py``.  A
  judges module imports no more than the check files that use it already do (most keep the
  trusted process free of JAX, for speed), and the sandbox never imports it.
* ``compare.py`` -- ``SPEC``: what ``grade compare`` measures, on which fixed inputs
  (``grader.compare.specs`` collects every one).

Neither this ``__init__`` nor an exercise's imports anything: the sandbox imports this
package on its way to one exercise's ``probes``.
"""
