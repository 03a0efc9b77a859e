"""``python -m grader ...``: the ``grade`` command (``grader.entry``)."""

from grader.entry import main

main()
