"""The ``grade`` command: start what a grading waits on first, then the CLI.

``grade exercise N`` spends most of its time on one thing: a sandbox importing JAX.  The
CLI itself takes 50-100 ms to import (click, rich, the manifest reader, the runner), so
when the command line names one exercise, its zygote (``grader.sandbox.client.Zygote``,
the process every sandbox of the grading is forked from) is started here first and
imports JAX while the CLI loads; ``grader.runner.grade`` takes it.  Nothing but the
grader's own code runs in it before the grading begins, exactly as with a zygote the runner
starts itself, and one that is not taken (an unknown exercise, ``--help``) is closed at exit.
"""

from __future__ import annotations

import os
import sys

# `grade exercise` options that take a value (grader.learner.cli.exercise_cmd)
_VALUE_OPTIONS = frozenset({"--submission", "--seed", "--hidden", "--file"})


def single_exercise(args: list[str]) -> int | None:
    """N when ``args`` is ``exercise N [options]`` with one exercise named by number;
    otherwise None (several exercises, a name, help: nothing is started early)."""
    if not args or args[0] != "exercise":
        return None
    positional, skip = [], False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg in ("-h", "--help", "--"):
            return None
        elif arg in _VALUE_OPTIONS:
            skip = True
        elif not arg.startswith("-"):
            positional.append(arg)
    if len(positional) != 1 or not positional[0].isascii() or not positional[0].isdigit():
        return None
    return int(positional[0])


def main() -> None:
    number = single_exercise(sys.argv[1:])
    if number is not None and os.environ.get("GRADER_NO_ZYGOTE") != "1":
        from grader.sandbox import client

        client.start_spare_zygote(client.probes_of_exercise(number))
    from grader.cli import main as cli_main

    cli_main()
