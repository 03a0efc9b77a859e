"""`grade watch [N]`: re-grade on every save, one clear screen per exercise.

The loop a learner lives in.  One process stays warm for the whole session: a zygote
that imported JAX once forks a fresh sandbox for every grading (the same sandboxes, seed
and checks as ``grade exercise N``, so the verdict is the same), and pytest and the
grader stay imported.  Saving the exercise's file re-grades it; when every check that
runs passes, the next unfinished exercise comes up.  Keys: ``h`` the next hint, ``l``
the list with progress, ``n``/``p`` the next/previous exercise, ``r`` grade again,
``q`` quit.

Events come from two threads into one queue -- file changes (``watchfiles``) and key
presses (the terminal in cbreak mode) -- and the main thread grades, so the trusted side's
deadlines (SIGALRM) work as they do everywhere else.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from grader import render, runner
from grader.learner.state import State

KEYS = "[h] hint  [l] list  [n]/[p] next/previous  [r] grade again  [q] quit"


class _Keys(threading.Thread):
    """Single key presses from a terminal (cbreak mode, restored on exit)."""

    def __init__(self, events: queue.Queue, stream):
        super().__init__(daemon=True)
        self.events = events
        self.stream = stream
        self._saved = None

    def __enter__(self) -> "_Keys":
        import termios
        import tty

        try:
            self._saved = termios.tcgetattr(self.stream.fileno())
            tty.setcbreak(self.stream.fileno())
        except (termios.error, OSError, ValueError):
            self._saved = None
            return self
        self.start()
        return self

    def run(self) -> None:
        import os

        while True:
            try:
                ch = os.read(self.stream.fileno(), 1)
            except OSError:
                return
            if not ch:
                return
            self.events.put(("key", ch.decode("ascii", "replace").lower()))

    def __exit__(self, *exc) -> None:
        if self._saved is not None:
            import termios

            termios.tcsetattr(self.stream.fileno(), termios.TCSADRAIN, self._saved)


class _Files(threading.Thread):
    """Changes to the current exercise's folder (``watchfiles``; debounced)."""

    def __init__(self, events: queue.Queue):
        super().__init__(daemon=True)
        self.events = events
        self.stop = threading.Event()
        self.folder: Path | None = None
        self._moved = threading.Event()

    def watch(self, folder: Path) -> None:
        self.folder = folder
        self._moved.set()

    def run(self) -> None:
        import watchfiles

        while not self.stop.is_set():
            folder = self.folder
            self._moved.clear()
            if folder is None or not folder.is_dir():
                time.sleep(0.2)
                continue
            for changes in watchfiles.watch(folder, stop_event=self.stop, debounce=60, step=20,
                                            rust_timeout=200, yield_on_timeout=True, raise_interrupt=False):
                if self._moved.is_set() or self.stop.is_set():
                    break
                paths = [p for _, p in changes if p.endswith(".py")]
                if paths:
                    self.events.put(("change", time.monotonic()))


class Watcher:
    def __init__(self, manifest, course: Path, root: Path, hidden_root: Path | None, start: int | None,
                 console: Console | None = None, stay: bool = False):
        self.manifest = manifest
        self.course = course
        self.root = root
        self.hidden_root = hidden_root
        self.console = console or Console()
        self.numbers = [e.number for e in manifest.exercises]
        self.number = start if start is not None else self._first_unfinished()
        self.events: queue.Queue = queue.Queue()
        self.state = State(root)
        self.stay = stay

    def _first_unfinished(self, after: int | None = None) -> int:
        progress = State(self.root).progress()
        order = self.numbers if after is None else self.numbers[self.numbers.index(after) + 1:] + self.numbers
        for n in order:
            if not progress.get(str(n), {}).get("all_passed"):
                return n
        return order[0]

    def folder(self) -> Path:
        return self.root / "exercises" / self.manifest.get(self.number).dir

    def run(self) -> None:
        from grader.sandbox.client import Zygote

        files = self._files = _Files(self.events)
        zygote = Zygote().start()
        try:
            with _Keys(self.events, sys.stdin) if sys.stdin.isatty() else contextlib.nullcontext():
                files.watch(self.folder())
                files.start()
                self.grade(zygote)
                while True:
                    kind, value = self.events.get()
                    if kind == "change":
                        self._drain("change")
                        self.grade(zygote)
                    elif kind == "key" and self.on_key(value, zygote, files) == "quit":
                        return
        except KeyboardInterrupt:
            return
        finally:
            files.stop.set()
            zygote.close()

    def _drain(self, kind: str) -> None:
        """Several saves in a row are one grading."""
        kept = []
        while True:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                break
            if event[0] != kind:
                kept.append(event)
        for event in kept:
            self.events.put(event)

    def on_key(self, key: str, zygote, files: _Files) -> str:
        if key == "q":
            return "quit"
        if key in ("n", "p"):
            i = self.numbers.index(self.number)
            self.number = self.numbers[(i + (1 if key == "n" else -1)) % len(self.numbers)]
            files.watch(self.folder())
            self.grade(zygote)
        elif key == "r":
            self.grade(zygote)
        elif key == "h":
            ex = self.manifest.get(self.number)
            shown = self.state.next_hint(str(ex.number), len(ex.hints))
            self.console.print(f"[bold]Hint {shown}/{len(ex.hints)}:[/] {escape(ex.hints[shown - 1])}")
        elif key == "l":
            from grader.learner.cli import exercise_states

            for n, st in exercise_states(self.manifest, self.root).items():
                mark = "\u2192" if n == self.number else " "
                self.console.print(f"{mark} {n:>2}  {escape(self.manifest.get(n).title):<38} {escape(st['text'])}")
        return ""

    def grade(self, zygote) -> None:
        ex = self.manifest.get(self.number)
        t0 = time.monotonic()
        self.console.clear()
        self.console.print(f"[bold]grade watch[/] \u00b7 exercise {ex.number}: {escape(ex.title)} \u00b7 "
                           f"[dim]{escape(str(self.folder() / ex.module_file))}[/]")
        with self.console.status(f"grading exercise {ex.number}...", spinner="dots"):
            try:
                run = runner.grade(self.manifest, [ex.number], course_root=self.course, submission_root=self.root,
                                   hidden_root=self.hidden_root, zygote=zygote if zygote.alive else None)
            except runner.GradingInterrupted:
                raise KeyboardInterrupt from None
        result = run.exercises[0]
        self.state.record(run.exercises, {result.number: result.content_digest})
        self.console.clear()
        elapsed = time.monotonic() - t0
        self.console.print(f"[bold]grade watch[/] \u00b7 exercise {ex.number} of {len(self.numbers)}: "
                           f"{escape(ex.title)}")
        render.print_exercise(result, self.console)
        ran = [c for c in result.checks if c.status != "not_run"]
        if ran and all(c.passed for c in ran) and not self.stay:
            nxt = self._first_unfinished(after=ex.number)
            if nxt != ex.number:  # on to the next: its file is watched now, this screen stays until it is saved
                self.number = nxt
                self._files.watch(self.folder())
                self.console.print(f"[green]Exercise {ex.number} passes.[/] Now watching exercise {nxt} "
                                   f"({escape(self.manifest.get(nxt).title)}): save it to grade it, \\[p] goes back.")
            else:
                self.console.print("[green]Every exercise passes.[/]")
        self.console.print(f"[dim]graded in {elapsed:.2f} s \u00b7 save your file to grade it again[/]")
        self.console.print(f"[dim]{escape(KEYS)}[/]")
        self.last = (result, elapsed)
