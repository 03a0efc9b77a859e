"""The learner's loop: what a learner runs in their own copy of the exercises.

``cli``           `grade list`, `exercise`, `all`, `hint`, `reset`, `watch`, `cache` (click)
``state``         hints shown and progress, in ``.grade-state.json``
``stubs``         `grade reset`: a stub back from ``.grade/stubs`` (the learner's file kept)
``watch``         `grade watch`: re-grade on every save
``pytest_entry``  plain ``pytest exercises/NN_topic``: the public checks in the grader's sandbox

Grading itself is the shared core's (``grader.runner``); this package only drives it.
"""
