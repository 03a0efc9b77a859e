"""Report writers for authoritative grading: each a pure function of a ``RunResult``.

Writers, their audience, and what they produce:

* ``grader.reports.gradescope`` -- ``to_gradescope(run) -> dict`` and
  ``to_gradescope_json(run) -> str``: Gradescope's ``results.json``, read by Gradescope and
  shown to the learner (hidden checks once the instructor publishes grades).
* ``grader.reports.junit`` -- ``to_junit_xml(run) -> str``: JUnit XML for CI test-report
  viewers (GitLab, Jenkins, GitHub reporters), read by learners and staff alike.
* ``grader.reports.github`` -- ``job_summary(run) -> str`` (Markdown for
  ``$GITHUB_STEP_SUMMARY``; ``write_summary(run, path)`` appends it) and
  ``annotations(run, root) -> list[str]`` (``::error``/``::warning``/``::notice`` workflow
  commands pointing at the learner's file): for the learner on their own repository.
* The grader's own JSON stays where it is: ``grader.render.to_json(run)``.

The rule every writer keeps: **no writer reads a ``private`` field** (a hidden check's
measured and expected values, grader tracebacks -- instructor only), nor the learner's
captured stdout (it can echo hidden inputs).  What a learner may read about a check is
decided in one place, ``grader.reports.learner_text``; the writers only lay it out.

"Pure" means: the output depends on the ``RunResult`` alone (``annotations`` also on the
checkout root), the input is not changed, no clock or environment is read, and the same
result always gives the same bytes.  ``write_summary`` is the only function that writes.

Each format carries its own version where the format has room for one, bumped whenever
the writer's output changes shape: Gradescope in ``extra_data.format_version``, JUnit in a
``format_version`` property of each test suite, the job summary in its first-line comment
``<!-- jax-exercises-grader summary v1 -->``, annotations in the final ``::notice``.
"""

from grader.reports.github import (
    GITHUB_ANNOTATIONS_FORMAT_VERSION,
    GITHUB_SUMMARY_FORMAT_VERSION,
)
from grader.reports.gradescope import GRADESCOPE_FORMAT_VERSION
from grader.reports.junit import JUNIT_FORMAT_VERSION

__all__ = [
    "GITHUB_ANNOTATIONS_FORMAT_VERSION",
    "GITHUB_SUMMARY_FORMAT_VERSION",
    "GRADESCOPE_FORMAT_VERSION",
    "JUNIT_FORMAT_VERSION",
]
